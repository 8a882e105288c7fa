//! The server's side of latency mode is the protocol's ([`LatencySession`], pure); here its
//! answers go into a connection's [`Outbox`], which keeps each answer's write boundaries.

use tsperf_proto::clock::{Codec, Framing, TimeResponse};
use tsperf_proto::serve::Answers;
pub use tsperf_proto::serve::LatencySession;

use crate::outbox::Outbox;

impl Answers for Outbox {
    fn answer(&mut self, r: &TimeResponse, codec: Codec, framing: Framing) {
        self.response(r, codec, framing);
    }
}
