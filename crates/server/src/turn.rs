//! A reverse stream's turn, the same at either I/O model ([`send_turn`]): what the client said
//! (a stop, or its close), a turn of the engine's writes, and at the data's end the stream's
//! end, or why it cannot go on. The model acts on what it returns ([`Turned`]): the blocking
//! one keeps its stall clock and writes the end itself, the event loop queues it.

use std::time::Instant;

use tsperf_proto::ServerIo;
use tsperf_proto::serve::{Conversation, Step};
use tsperf_stream::send::{Heard, SendEnd, Sender, Sink};

/// How one turn of a reverse stream's writes went, for the I/O model to act on.
pub(crate) enum Turned {
    /// The stream goes on, having moved `moved` bytes; `more`: the turn's share was used and
    /// the socket may take more; `timed_out`: a write waited its whole timeout (blocking).
    On {
        moved: u64,
        more: bool,
        timed_out: bool,
    },
    /// Every byte is sent: its end (the Sent frame and the trailer) to write, then
    /// [`Conversation::sent_all`].
    Closing(Vec<u8>),
    /// It cannot go on: what to write first (its reason, in the Sent frame's place, so the client
    /// reads why), then the step that ends it.
    Over(Option<Vec<u8>>, Box<Step>),
}

/// One turn of a reverse stream at either I/O model: what the client said (a stop, or its
/// close), a turn of writes (told to the conversation: the client took bytes), and at the
/// data's end the stream's end, or why it cannot go on.
pub(crate) fn send_turn<S: Sink>(
    tx: &mut Sender,
    conv: &mut Conversation,
    sock: &mut S,
    server_io: ServerIo,
    scratch: &mut [u8],
) -> Turned {
    let cannot = |conv: &mut Conversation, what: &str, e: &dyn std::fmt::Display| {
        Turned::Over(
            None,
            Box::new(conv.send_failed(&format!("cannot {what} the client: {e}"))),
        )
    };
    match tx.listen(&*sock) {
        Ok(Heard::Closed) => {
            return Turned::Over(
                None,
                Box::new(conv.send_failed("the client closed the connection")),
            );
        }
        Err(e) => return cannot(conv, "read from", &e),
        Ok(Heard::Stop | Heard::Nothing) => {}
    }
    let before = tx.sent();
    let end = tx.send_turn(sock, scratch);
    let moved = tx.sent() - before;
    // Counted whatever the turn ended as: a failure says how much went, this turn's included.
    conv.sending(moved, Instant::now());
    let on = |more, timed_out| Turned::On {
        moved,
        more,
        timed_out,
    };
    match end {
        SendEnd::TurnOver => on(true, false),
        SendEnd::WouldBlock => on(false, false),
        SendEnd::Error(e) if tsperf_sys::net::is_timeout(&e) => on(false, true),
        SendEnd::Error(e) => cannot(conv, "write to", &e),
        SendEnd::Done => match tx.closing(&*sock, server_io, scratch) {
            Ok(closing) => Turned::Closing(closing),
            Err(why) => fail_sending(tx, conv, &why, scratch),
        },
        SendEnd::Source(why) => fail_sending(tx, conv, &format!("{why:#}"), scratch),
    }
}

/// Ends a reverse stream that cannot go on for `why`.
pub(crate) fn fail_sending(
    tx: &mut Sender,
    conv: &mut Conversation,
    why: &str,
    scratch: &mut [u8],
) -> Turned {
    Turned::Over(
        Some(tx.failing(why, scratch)),
        Box::new(conv.send_failed(why)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use tsperf_proto::Hello;
    use tsperf_proto::serve::Outcome;
    use tsperf_proto::serve::Policy;
    use tsperf_stream::send::Generated;

    /// A client's socket that takes `room` bytes, then fails as a reset connection does; its
    /// descriptor is one end of a quiet socket pair (nothing to hear from the client).
    struct Resets {
        took: u64,
        room: u64,
        quiet: (UnixStream, UnixStream),
    }

    impl Write for Resets {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = (self.room - self.took).min(buf.len() as u64);
            if n == 0 {
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            self.took += n;
            Ok(n as usize)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl AsFd for Resets {
        fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
            self.quiet.0.as_fd()
        }
    }

    impl Sink for Resets {}

    /// A reverse stream whose client's connection fails partway through a turn says how many
    /// bytes it had sent, that turn's included (the event loop counted them before it looked at
    /// how the turn ended; one shared turn must too).
    #[test]
    fn a_turn_that_fails_counts_the_bytes_it_sent() {
        let now = Instant::now();
        let policy = Policy {
            max_bytes: 1 << 30,
            ..Policy::default()
        };
        let hello = Hello {
            reverse: true,
            ..Hello::stream(1 << 20, 1024, "")
        };
        let mut conv = Conversation::new(ServerIo::EventLoop, &policy, None, now);
        let mut bytes = Vec::new();
        tsperf_proto::encode_hello(&hello, &mut bytes);
        let mut clock = || 1_000u64;
        for b in &bytes {
            conv.space()[0] = *b;
            let _ = conv.received(1, now, &mut clock);
        }
        let _ = conv.begun(Ok(()), now);
        let mut tx = Sender::new(&hello);
        let text: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        tx.give(Generated::Text(tsperf_sys::source::Held::of(&text)));
        let quiet = UnixStream::pair().unwrap();
        quiet.0.set_nonblocking(true).unwrap();
        let mut sock = Resets {
            took: 0,
            room: 10_000,
            quiet,
        };
        let mut scratch = [0u8; 64];
        let step = match send_turn(
            &mut tx,
            &mut conv,
            &mut sock,
            ServerIo::EventLoop,
            &mut scratch,
        ) {
            Turned::Over(_, step) => step,
            Turned::On { .. } => panic!("the turn went on past the reset"),
            Turned::Closing(_) => panic!("the stream ended"),
        };
        assert_eq!(sock.took, 10_000);
        match step.end {
            Some(Outcome::Incomplete(why)) => assert!(
                why.starts_with("sent 10000 bytes of a reverse stream, then cannot write"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
