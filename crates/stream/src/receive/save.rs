//! Saving a stream as it is received: each piece checksummed, then written to the sink, each
//! timed apart; a save directory's file ended whole (synced as its mode says, renamed into
//! place) or removed.

use std::hash::Hasher as _;
use std::io;
use std::path::PathBuf;
use std::time::Instant;

use tsperf_proto::{SaveMode, TimePhase, TimeSplit};
use tsperf_sys::save::Partial;

use super::{ReadLog, Receiver, Save};

/// A save directory's file being received (`--save`).
impl Save for Partial {
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        Partial::write(self, data)
    }
}

impl<L: ReadLog, const N: usize> Receiver<L, Partial, N> {
    /// Ends the save, if there is one: kept (`keep`: every byte arrived and the digests agree),
    /// its last block written (timed as the save), synced as its mode says and renamed into
    /// place (timed as the sync); else its temporary removed. A save measured and not kept
    /// (`measured`) is written and synced alike, then removed: its path is empty. The saved
    /// path and mode.
    pub fn commit_save(
        &mut self,
        keep: bool,
        measured: bool,
    ) -> io::Result<Option<(PathBuf, SaveMode)>> {
        let Some(mut partial) = self.sink.take().filter(|_| keep) else {
            self.sink = None;
            return Ok(None);
        };
        let mode = partial.mode();
        let flushed = partial.flush();
        self.lap(TimePhase::Save);
        let committed = flushed.and_then(|()| match measured {
            true => partial.measured().map(|()| PathBuf::new()),
            false => partial.commit(),
        });
        self.lap(TimePhase::Fsync);
        committed.map(|path| Some((path, mode)))
    }
}

impl<L: ReadLog, S: Save, const N: usize> Receiver<L, S, N> {
    /// [`Receiver::hash`] with a sink: each piece checksummed, then saved, each timed apart.
    pub(super) fn hash_and_save(&mut self, data: &[u8]) -> io::Result<()> {
        let mut written = Ok(());
        let Receiver {
            tail,
            hasher,
            hashed,
            sink,
            split,
            lap_at,
            ..
        } = self;
        let mut take = |d: &[u8]| {
            hasher.write(d);
            *hashed += d.len() as u64;
            lap_into(split, lap_at, TimePhase::Hash);
            if let (Some(sink), Ok(())) = (sink.as_mut(), &written) {
                written = sink.write(d);
            }
            lap_into(split, lap_at, TimePhase::Save);
        };
        match tail {
            Some(tail) => tail.feed(data, &mut take),
            None => take(data),
        }
        written
    }
}

/// Adds the time since `lap_at` to `phase` of `split`, and moves `lap_at` to now (nothing
/// before the first byte: no `lap_at`).
#[inline]
fn lap_into(split: &mut TimeSplit, lap_at: &mut Option<Instant>, phase: TimePhase) {
    if let Some(at) = *lap_at {
        let now = Instant::now();
        split.add(phase, now.saturating_duration_since(at).as_nanos() as u64);
        *lap_at = Some(now);
    }
}
