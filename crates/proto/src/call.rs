//! How a stream's chunks are handed to the kernel: what a reverse stream's hello asks of the
//! server (version 12).

use crate::ProtocolError;

/// The most chunks one `writev` takes (Linux's `IOV_MAX`).
pub const MAX_BATCH: u32 = 1024;

/// How a stream's chunks are handed to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// One `write` per chunk.
    Write,
    /// One `writev` of this many chunks (1 to [`MAX_BATCH`]), each its own iovec.
    Writev(u32),
    /// One `sendfile` per chunk, from a file (never a pass repeated).
    Sendfile,
}

impl Call {
    /// The hello's code and batch: 0 = none (the server's own way), 1 = write, 2 = writev,
    /// 3 = sendfile; the batch is writev's only.
    pub(crate) fn code(call: Option<Call>) -> (u8, u16) {
        match call {
            None => (0, 0),
            Some(Call::Write) => (1, 0),
            Some(Call::Writev(batch)) => (2, u16::try_from(batch).unwrap_or(u16::MAX)),
            Some(Call::Sendfile) => (3, 0),
        }
    }

    /// The call of a hello's code and batch, checked.
    pub(crate) fn of(code: u8, batch: u16) -> Result<Option<Call>, ProtocolError> {
        match (code, batch) {
            (0, 0) => Ok(None),
            (1, 0) => Ok(Some(Call::Write)),
            (2, 1..) if u32::from(batch) <= MAX_BATCH => Ok(Some(Call::Writev(u32::from(batch)))),
            (3, 0) => Ok(Some(Call::Sendfile)),
            _ => Err(ProtocolError::BadCall(code, batch)),
        }
    }
}
