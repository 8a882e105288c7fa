//! [`Block`]: where a transfer's reads land until they are checksummed in one go.

use std::io::{self, Read};

use super::{HASH_BLOCK, ReadLog, Receiver, Save, TURN_BYTES, TURN_READS};
use tsperf_proto::{LogMode, TimePhase};

/// What one call of [`Block::read_turn`] ended with.
#[derive(Debug)]
pub enum ReadEnd {
    /// Every announced byte has arrived.
    Complete,
    /// The peer closed the connection first.
    Eof,
    /// A closed stream ended: the peer closed its direction, and this is its end trailer
    /// (`None`: fewer bytes than a trailer came).
    Ended(Option<tsperf_proto::end::End>),
    /// The socket had no more data for now (non-blocking only).
    WouldBlock,
    /// This turn's share is used up ([`Block::read_turn`]), or the transfer wants a new
    /// low-water mark ([`Receiver::wake_at`]); more data may be waiting.
    TurnOver,
    /// Any other error, including a blocking socket's timeout.
    Error(io::Error),
    /// Saving the received bytes failed (disk full, I/O error).
    Sink(io::Error),
}

/// A buffer that reads land in until it is checksummed in one go.
pub struct Block {
    buf: Vec<u8>,
    pos: usize,
    /// Reads are non-blocking (the event loop's): a read that returns less than it asked for
    /// found the socket empty for now, and a logged transfer's turn ends there, so its next
    /// read waits for its low-water mark ([`Receiver::wake_at`]) instead of taking the few bytes
    /// that trickled in meanwhile (a line each).
    nonblocking: bool,
    /// A blocking turn ends here: a read that returns less than it asked for looks at the
    /// clock (one that fills its buffer does not), so a trickle cannot stretch a turn of
    /// blocking reads past a timed run's end ([`Block::until`]).
    until: Option<std::time::Instant>,
}

impl Block {
    /// A block for reads of up to `read_size` bytes, sized no larger than `limit` needs.
    pub fn new(read_size: usize, limit: u64) -> Block {
        let cap = HASH_BLOCK.max(read_size);
        let cap = cap.min(usize::try_from(limit.max(1)).unwrap_or(usize::MAX));
        Block {
            buf: vec![0; cap],
            pos: 0,
            nonblocking: false,
            until: None,
        }
    }

    /// Ends every turn at `deadline` (the blocking model's timed runs): a short read after it
    /// ends the turn.
    pub fn until(&mut self, deadline: Option<std::time::Instant>) {
        self.until = deadline;
    }

    /// Reads from `src` into the block for `rx` until the transfer completes, the peer closes,
    /// the socket says `WouldBlock`/errs, or the turn is over ([`ReadEnd::TurnOver`]: after
    /// [`TURN_READS`] reads or [`TURN_BYTES`] bytes, whichever comes first, so one connection
    /// cannot keep the event loop to itself; or when the transfer wants a new low-water mark).
    /// Everything read is counted and checksummed before this returns, so the block can serve
    /// another connection next.
    pub fn read_turn<R: Read, L: ReadLog, S: Save, const N: usize>(
        &mut self,
        src: &mut R,
        rx: &mut Receiver<L, S, N>,
    ) -> ReadEnd {
        self.read_some(src, rx, TURN_READS, TURN_BYTES)
    }

    /// One read only (then [`ReadEnd::TurnOver`] if it got data and more is due): the blocking
    /// server reads the first byte of a transfer under a different timeout than the rest.
    pub fn read_once<R: Read, L: ReadLog, S: Save, const N: usize>(
        &mut self,
        src: &mut R,
        rx: &mut Receiver<L, S, N>,
    ) -> ReadEnd {
        self.read_some(src, rx, 1, TURN_BYTES)
    }

    /// The same block for non-blocking reads (the event loop's): a logged transfer's turn ends at
    /// a short read.
    pub fn nonblocking(self) -> Block {
        Block {
            nonblocking: true,
            ..self
        }
    }

    /// Reads as [`Block::read_turn`] does, the turn being `max_reads` reads or `max_bytes`
    /// bytes.
    pub fn read_some<R: Read, L: ReadLog, S: Save, const N: usize>(
        &mut self,
        src: &mut R,
        rx: &mut Receiver<L, S, N>,
        max_reads: u64,
        max_bytes: usize,
    ) -> ReadEnd {
        let (mut reads, mut bytes) = (0u64, 0usize);
        // Since the last turn this transfer waited: for data, for the CPU, for others.
        rx.lap(TimePhase::Wait);
        let mark = rx.wake_at();
        let drains = self.nonblocking && rx.log() != LogMode::None && !rx.peer_closed;
        let end = loop {
            let want = rx.want();
            if want == 0 {
                break ReadEnd::Complete;
            }
            // A new low-water mark ends the turn, so the caller sets it before the next wait:
            // a blocking read under the old mark could wait for bytes that never come.
            if reads >= max_reads || bytes >= max_bytes || rx.wake_at() != mark {
                break ReadEnd::TurnOver;
            }
            if self.buf.len() - self.pos < want {
                if let Err(e) = self.flush(rx) {
                    return ReadEnd::Sink(e);
                }
                if self.buf.len() < want {
                    self.buf.resize(want, 0);
                }
            }
            match src.read(&mut self.buf[self.pos..self.pos + want]) {
                Ok(0) => break ReadEnd::Eof,
                Ok(n) => {
                    self.pos += n;
                    rx.count(n);
                    reads += 1;
                    bytes += n;
                    if drains && n < want && !rx.is_complete() {
                        break ReadEnd::WouldBlock;
                    }
                    if n < want && self.until.is_some_and(|t| std::time::Instant::now() >= t) {
                        break ReadEnd::TurnOver;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break ReadEnd::WouldBlock,
                Err(e) => break ReadEnd::Error(e),
            }
        };
        match self.flush(rx) {
            Ok(()) if matches!(end, ReadEnd::Eof) && rx.closed() => ReadEnd::Ended(rx.ended()),
            Ok(()) => end,
            Err(e) => ReadEnd::Sink(e),
        }
    }

    fn flush<L: ReadLog, S: Save, const N: usize>(
        &mut self,
        rx: &mut Receiver<L, S, N>,
    ) -> io::Result<()> {
        let pos = std::mem::take(&mut self.pos);
        rx.hash(&self.buf[..pos])
    }
}
