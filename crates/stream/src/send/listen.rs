//! What the client says while a reverse stream is sent to it: a byte asks the data to stop
//! (its Ctrl-C), the end of its stream means it has gone.

use std::io;

use super::Sender;

/// The most bytes [`Sender::listen`] takes from the client in one look: it should send one.
pub const LISTEN_MOST: usize = 64 << 10;

/// What the client sent during a reverse stream, looked at once a turn.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// Nothing.
    Nothing,
    /// A byte: stop the data now (the client's Ctrl-C), end the stream as at its time.
    Stop,
    /// The client closed the connection.
    Closed,
}

impl Sender {
    /// Looks, without waiting, whether the client sent anything: a byte asks the data to stop
    /// (it ends at once, as at a timed stream's time); the end of its stream means it has gone.
    ///
    /// Everything the client sent is taken (up to [`LISTEN_MOST`] a look), not only its first
    /// byte: bytes left unread when the stream closes would make the close a reset, and the
    /// client would lose the stream's end (issue 32).
    pub fn listen<S: std::os::fd::AsFd>(&mut self, sock: &S) -> io::Result<Heard> {
        let mut buf = [0u8; 256];
        let mut heard = Heard::Nothing;
        let mut taken = 0;
        while taken < LISTEN_MOST {
            match tsperf_sys::net::read_now(sock, &mut buf)? {
                None => break,
                Some(0) => return Ok(Heard::Closed),
                Some(n) => {
                    taken += n;
                    self.stopped = true;
                    heard = Heard::Stop;
                }
            }
        }
        Ok(heard)
    }
}
