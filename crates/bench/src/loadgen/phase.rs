//! Where a load generator's connection is, and its name in a failure.

/// Where a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Connecting, its hello sent or going, its accept awaited.
    Opening,
    /// Accepted: waiting for the start.
    Ready,
    /// Writing the data.
    Sending,
    /// The data and the trailer written or going: the report awaited.
    Reporting,
    /// Verified, or failed.
    Done,
}

impl Phase {
    pub(super) fn name(self) -> &'static str {
        match self {
            Phase::Opening => "waiting for the server's accept",
            Phase::Ready => "accepted, waiting for the start",
            Phase::Sending => "sending the data",
            Phase::Reporting => "waiting for the report",
            Phase::Done => "done",
        }
    }
}
