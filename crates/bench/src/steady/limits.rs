//! The machine's own limits beside the cells: the floor loops ([`crate::floor`]), bare and
//! checksummed, from one buffer or the generated stream, on the kernel's congestion control or
//! cubic; the loop that does a cell's work with nothing else ([`limit_of`]); and what xxh3
//! costs one core.

use std::hash::Hasher as _;

use anyhow::Result;
use serde::Serialize;

use super::Kind;

/// The machine's own limit at one write size: the bare loop and the same with the checksum,
/// medians of `reps` alternating runs of `len` bytes, MiB/s, and what each loop's two threads
/// spent (CPU seconds per GiB, medians).
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    /// Bytes per write.
    pub chunk: u32,
    /// The bare write/read loop.
    pub bare_mib_s: f64,
    /// The same with xxh3 on both ends.
    pub hashed_mib_s: f64,
    /// The same with xxh3 on both ends, written from tsperf's generated stream (36 MiB of text,
    /// cycled) instead of one cache-resident block.
    #[serde(default)]
    pub stream_mib_s: f64,
    /// The bare loop, the writer sending with TCP cubic.
    #[serde(default)]
    pub bare_cubic_mib_s: f64,
    /// The loop with checksums, the writer sending with TCP cubic.
    #[serde(default)]
    pub hashed_cubic_mib_s: f64,
    /// Each loop's CPU per GiB at each end, in the order bare, hashed, stream, bare cubic,
    /// hashed cubic ([`Floor::cpu`]).
    pub cpu: [LoopCpu; 5],
}

/// What one floor loop's threads spent, CPU seconds per GiB (each thread's
/// `CLOCK_THREAD_CPUTIME_ID`; on loopback the writer's includes the receive path
/// the kernel runs on its way out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LoopCpu {
    /// The writing thread's (and the sendfile loop's hashing thread's).
    pub writer: f64,
    /// The reading thread's.
    pub reader: f64,
    /// The writing thread's before its loop, making its source: the stream loop's period,
    /// made as tsclient makes it once a run ([`crate::floor::run_generated`]); 0 for the
    /// others.
    #[serde(default)]
    pub making: f64,
}

/// Which of the floor's loops a figure is from ([`Floor::cpu`] is indexed by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// No checksum.
    Bare,
    /// xxh3 on both ends, one cache-resident block.
    Hashed,
    /// xxh3 on both ends, written from the generated stream.
    Stream,
    /// No checksum, the writer on cubic.
    BareCubic,
    /// xxh3 on both ends, the writer on cubic.
    HashedCubic,
    /// xxh3 on both ends, written from the file cells' file, `read()` block by block (as
    /// iperf3 -F reads it): their own loop, not in the floor's table.
    File,
    /// xxh3 on both ends, the file cells' file sent with `sendfile` and hashed on a thread of
    /// its own: the sendfile cells' own loop, not in the floor's table.
    Sendfile,
}

impl Floor {
    /// The loop `l`'s CPU per GiB; None for [`Loop::File`] and [`Loop::Sendfile`], which the
    /// table does not run.
    pub fn cpu(&self, l: Loop) -> Option<LoopCpu> {
        self.cpu.get(l as usize).copied()
    }
}

/// One run of a floor loop: its rate and CPU per GiB at each end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LoopSample {
    /// MiB/s, the writer's first write to the reader's last byte.
    pub mib_s: f64,
    /// CPU seconds per GiB at each end.
    pub cpu: LoopCpu,
}

/// One run of the loop `l` moving `len` bytes in `chunk`-byte writes, read as tsserver reads
/// (the event loop's 1 MiB, or a chunk if larger) and woken as it is (the floor's mark); the
/// stream loop makes its period as tsclient does; `file`: the file and sendfile loops'.
pub(super) fn loop_run(
    l: Loop,
    len: u64,
    chunk: u32,
    file: Option<&std::path::Path>,
) -> Result<LoopSample> {
    use crate::floor::{run, run_as, run_from_file, run_generated, run_hashed, run_sendfile};
    let c = chunk as usize;
    let read = (tsperf_proto::LOOP_READ as usize).max(c);
    let f = match l {
        Loop::Bare => run(len, c, read),
        Loop::Hashed => run_hashed(len, c, read),
        Loop::Stream => run_generated(len, c, read),
        Loop::BareCubic => run_as(len, c, read, false, Some("cubic")),
        Loop::HashedCubic => run_as(len, c, read, true, Some("cubic")),
        Loop::File | Loop::Sendfile => {
            let file = file.ok_or_else(|| anyhow::anyhow!("the file loop was given no file"))?;
            match l {
                Loop::File => run_from_file(len, c, read, file),
                _ => run_sendfile(len, c, read, file),
            }
        }
    }?;
    let gib = f.bytes.max(1) as f64 / f64::from(1u32 << 30);
    Ok(LoopSample {
        mib_s: f.bytes as f64 / f64::from(1u32 << 20) / f.wall.as_secs_f64(),
        cpu: LoopCpu {
            writer: f.writer_cpu.as_secs_f64() / gib,
            reader: f.reader_cpu.as_secs_f64() / gib,
            making: f.making.as_secs_f64() / gib,
        },
    })
}

/// The median rate and CPU at each end of `v`.
pub(super) fn medians(v: &[LoopSample]) -> LoopSample {
    let med = |f: fn(&LoopSample) -> f64| {
        tsperf_results::stats::median(&mut v.iter().map(f).collect::<Vec<_>>())
    };
    LoopSample {
        mib_s: med(|s| s.mib_s),
        cpu: LoopCpu {
            writer: med(|s| s.cpu.writer),
            reader: med(|s| s.cpu.reader),
            making: med(|s| s.cpu.making),
        },
    }
}

/// Measures [`Floor`] at each of `chunks`, the five loops alternating.
pub fn floors(chunks: &[u32], len: u64, reps: u32) -> Result<Vec<Floor>> {
    const LOOPS: [Loop; 5] = [
        Loop::Bare,
        Loop::Hashed,
        Loop::Stream,
        Loop::BareCubic,
        Loop::HashedCubic,
    ];
    let mut out = Vec::new();
    for &chunk in chunks {
        let mut runs: [Vec<LoopSample>; 5] = Default::default();
        for _ in 0..reps {
            for l in LOOPS {
                runs[l as usize].push(loop_run(l, len, chunk, None)?);
            }
        }
        let m = runs.each_ref().map(|v| medians(v));
        out.push(Floor {
            chunk,
            bare_mib_s: m[Loop::Bare as usize].mib_s,
            hashed_mib_s: m[Loop::Hashed as usize].mib_s,
            stream_mib_s: m[Loop::Stream as usize].mib_s,
            bare_cubic_mib_s: m[Loop::BareCubic as usize].mib_s,
            hashed_cubic_mib_s: m[Loop::HashedCubic as usize].mib_s,
            cpu: m.map(|s| s.cpu),
        });
    }
    Ok(out)
}

/// The CPU seconds xxh3 takes per GiB on one core: 16 passes over a 64 MiB buffer (larger than
/// the caches, as a stream's bytes are), the fastest of three tries.
pub fn hash_cost() -> f64 {
    let buf: Vec<u8> = (0..64u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let mut h = twox_hash::XxHash3_64::new();
        for _ in 0..16 {
            h.write(&buf);
        }
        std::hint::black_box(h.finish());
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

/// The floor loop that does a cell's work with nothing else (a cell's limit on this machine),
/// and whether the client is its writer.
pub fn limit_of(kind: Kind) -> Option<(Loop, bool)> {
    Some(match kind {
        Kind::Memory | Kind::Parallel => (Loop::Stream, true),
        Kind::File => (Loop::File, true),
        Kind::OneBuffer | Kind::ParallelOneBuffer => (Loop::Hashed, true),
        Kind::OneBufferCubic => (Loop::HashedCubic, true),
        Kind::Reverse => (Loop::Stream, false),
        Kind::ReverseOneBuffer => (Loop::Hashed, false),
        Kind::ReverseOneBufferCubic => (Loop::HashedCubic, false),
        Kind::Sendfile => (Loop::Sendfile, true),
    })
}
