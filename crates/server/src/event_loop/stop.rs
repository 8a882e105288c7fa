//! Stopping the event loop: stop accepting, refuse what has not started, give transfers in
//! flight the grace, then cut off the rest, reverse streams with their reason.

use std::time::{Duration, Instant};

use super::{Conn, Loop};
use crate::SHUTTING_DOWN;

/// How long reverse streams cut off by a stop have to send their reason before they are
/// closed regardless.
const CUT_PATIENCE: Duration = Duration::from_secs(1);

/// Where a stop has got to.
#[derive(Debug, Default)]
pub(super) struct Stop {
    /// The grace ends.
    by: Option<Instant>,
    /// The grace ended: transfers still going were cut off.
    cut_at: Option<Instant>,
}

impl Stop {
    /// When the loop must look again.
    pub(super) fn next(&self) -> Option<Instant> {
        match self.cut_at {
            Some(t) => Some(t + CUT_PATIENCE),
            None => self.by,
        }
    }
}

impl Loop<'_> {
    /// A stop's next step; true once every connection is gone. The first call stops accepting
    /// and refuses connections that have not started a transfer; when the grace is over (or a
    /// second signal came), reverse streams end themselves with the reason in their report's
    /// place, within [`CUT_PATIENCE`], and the rest are aborted at once.
    pub(super) fn stopping(&mut self, stop: &mut Stop) -> bool {
        let now = Instant::now();
        if stop.by.is_none() {
            if let Some(mut l) = self.listener.take() {
                let _ = self.poll.registry().deregister(&mut l);
            }
            stop.by = Some(now + self.srv.cfg.grace);
            self.abort_where(|c| c.conv.not_started());
        }
        if self.srv.stopping_now() || stop.by.is_some_and(|t| now >= t) {
            if stop.cut_at.is_none() {
                stop.cut_at = Some(now);
                let sending: Vec<usize> = self
                    .conns
                    .iter_mut()
                    .filter_map(|(k, c)| c.cut_sending(SHUTTING_DOWN).then_some(k))
                    .collect();
                for key in sending {
                    let _ = self.turn_and_requeue(key, false);
                }
            }
            let patience_over = stop.cut_at.is_some_and(|t| now >= t + CUT_PATIENCE);
            self.abort_where(|c| patience_over || !c.cut());
        }
        self.conns.is_empty()
    }

    /// Ends every connection `which` picks, telling each client why.
    pub(super) fn abort_where(&mut self, which: impl Fn(&Conn) -> bool) {
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| which(c))
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            let outcome = self.conns[key].abort(SHUTTING_DOWN, self.srv);
            self.close(key, outcome);
        }
    }
}
