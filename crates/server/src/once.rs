//! `tsserver --once`: one client's run, whole, then exit (issue 51). A run is the connections
//! that carry one non-zero session id from one address: its session's streams, in both
//! directions for a two-way run ([`Hello::run_connections`]); a connection whose hello has an id
//! of zeros is a run of its own. The first run to send a hello is served; any other
//! connection is refused with the reason. The run is over once each of its connections has
//! ended and all of them came, or none more came within the patience (the hello timeout)
//! after the last ended: a client that died before opening them all does not hold the server.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tsperf_proto::serve::Refusal;
use tsperf_proto::{Hello, RefuseCode};

/// The run being served, as it stands: pure, time handed in.
#[derive(Debug, Default)]
struct Run {
    /// Whose, by its first hello: the address and the session id (zeros: that one connection).
    key: Option<(IpAddr, [u8; 16])>,
    /// Its connections, as its hellos say.
    expected: u16,
    /// The connections of it served, by their addresses.
    members: Vec<SocketAddr>,
    ended: usize,
    failed: bool,
    last_end: Option<Instant>,
    /// Decided: every connection of it completed.
    result: Option<bool>,
}

impl Run {
    fn join(&mut self, peer: SocketAddr, hello: &Hello) -> Result<(), Refusal> {
        let key = (peer.ip(), hello.session.id);
        match self.key {
            None if self.result.is_none() => {
                self.key = Some(key);
                self.expected = hello.run_connections();
            }
            Some(k)
                if k == key
                    && k.1 != [0; 16]
                    && self.members.len() < usize::from(self.expected)
                    && self.result.is_none() => {}
            _ => {
                return Err((
                    RefuseCode::Limit,
                    "this server serves one client's run and exits (--once): it is serving \
                     another"
                        .to_owned(),
                ));
            }
        }
        self.members.push(peer);
        Ok(())
    }

    fn ended(&mut self, peer: SocketAddr, completed: bool, now: Instant) {
        if let Some(i) = self.members.iter().position(|m| *m == peer) {
            // An address is reused only after its connection is gone.
            self.members[i] = SocketAddr::from(([0, 0, 0, 0], 0));
            self.ended += 1;
            self.failed |= !completed;
            self.last_end = Some(now);
        } else if self.key.is_none() {
            // A connection that ended before any hello fixed a run: it was the one served.
            self.result.get_or_insert(completed);
        }
    }

    /// Each connection of the run that came has ended, and more are due: the patience runs.
    fn waiting(&self) -> bool {
        self.result.is_none()
            && self.key.is_some()
            && self.ended == self.members.len()
            && self.members.len() < usize::from(self.expected)
    }

    fn over(&mut self, now: Instant, patience: Duration) -> Option<bool> {
        if self.result.is_some() {
            return self.result;
        }
        let all_ended = self.key.is_some() && self.ended == self.members.len();
        let all_came = self.members.len() == usize::from(self.expected);
        let waited = self.last_end.is_some_and(|t| now >= t + patience);
        if all_ended && (all_came || waited) {
            self.result = Some(!self.failed && all_came);
        }
        self.result
    }
}

/// The run a `--once` server serves, shared by its connections.
#[derive(Debug, Default)]
pub(crate) struct Once {
    run: Mutex<Run>,
}

impl Once {
    /// A connection from `peer` sent `hello`: served if it is of the run (the first hello's).
    pub(crate) fn join(&self, peer: SocketAddr, hello: &Hello) -> Result<(), Refusal> {
        self.lock().join(peer, hello)
    }

    /// The connection from `peer` ended, `completed` or not.
    pub(crate) fn ended(&self, peer: SocketAddr, completed: bool, now: Instant) {
        self.lock().ended(peer, completed, now);
    }

    /// True while the run waits for connections of it that have not come, all that came
    /// having ended: it is over after the patience unless one comes.
    pub(crate) fn waiting(&self) -> bool {
        self.lock().waiting()
    }

    /// The run's result once it is over: true if each of its connections came and completed.
    pub(crate) fn over(&self, now: Instant, patience: Duration) -> Option<bool> {
        self.lock().over(now, patience)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Run> {
        self.run.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tsperf_proto::Session;

    const PATIENCE: Duration = Duration::from_secs(10);

    fn addr(ip: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, ip], port))
    }

    fn of(id: u8, index: u8, count: u8, two_way: bool) -> Hello {
        Hello {
            session: Session {
                id: [id; 16],
                index,
                count,
            },
            two_way,
            ..Hello::stream(1, 1, "f")
        }
    }

    /// A two-way session of 2 streams is 4 connections: all served, then over, completed.
    #[test]
    fn a_two_way_session_is_served_whole() {
        let (mut r, t) = (Run::default(), Instant::now());
        for (port, i) in [(1, 0), (2, 1), (3, 0), (4, 1)] {
            r.join(addr(1, port), &of(7, i, 2, true)).unwrap();
        }
        assert!(r.join(addr(1, 5), &of(7, 0, 2, true)).is_err(), "a fifth");
        for port in 1..=3 {
            r.ended(addr(1, port), true, t);
            assert_eq!(r.over(t, PATIENCE), None);
        }
        r.ended(addr(1, 4), true, t);
        assert_eq!(r.over(t, PATIENCE), Some(true));
    }

    /// Another run, another address's connection of the same id, and a stream of its own
    /// beside a run are refused, naming --once; one that failed fails the run.
    #[test]
    fn others_are_refused_and_a_failure_fails_the_run() {
        let (mut r, t) = (Run::default(), Instant::now());
        r.join(addr(1, 1), &of(7, 0, 2, false)).unwrap();
        for (peer, hello) in [
            (addr(1, 2), of(8, 0, 2, false)),
            (addr(2, 2), of(7, 1, 2, false)),
            (addr(1, 3), Hello::stream(1, 1, "g")),
        ] {
            let (code, why) = r.join(peer, &hello).unwrap_err();
            assert_eq!(code, RefuseCode::Limit);
            assert!(why.contains("--once"), "{why}");
        }
        r.join(addr(1, 4), &of(7, 1, 2, false)).unwrap();
        r.ended(addr(1, 2), false, t);
        r.ended(addr(1, 1), true, t);
        r.ended(addr(1, 4), false, t);
        assert_eq!(r.over(t, PATIENCE), Some(false));
    }

    /// A stream of its own is a run of one; a connection gone before any hello is the run,
    /// failed; a run whose other connections never come is over after the patience.
    #[test]
    fn runs_of_one_and_runs_cut_short() {
        let (mut r, t) = (Run::default(), Instant::now());
        r.join(addr(1, 1), &Hello::stream(1, 1, "f")).unwrap();
        assert!(r.join(addr(1, 2), &Hello::stream(1, 1, "f")).is_err());
        r.ended(addr(1, 1), true, t);
        assert_eq!(r.over(t, PATIENCE), Some(true));

        let mut r = Run::default();
        r.ended(addr(1, 1), false, t);
        assert_eq!(r.over(t, PATIENCE), Some(false));
        assert!(r.join(addr(1, 2), &Hello::stream(1, 1, "f")).is_err());

        let mut r = Run::default();
        r.join(addr(1, 1), &of(7, 0, 3, false)).unwrap();
        assert!(!r.waiting(), "one of it is still going");
        r.ended(addr(1, 1), true, t);
        assert!(r.waiting());
        assert_eq!(r.over(t + PATIENCE / 2, PATIENCE), None);
        assert_eq!(r.over(t + PATIENCE, PATIENCE), Some(false));
    }
}
