//! How a client should drive the N streams of one `-P` session: a thread per stream (what
//! tsclient does) or one event loop writing every socket. Measured on the data path alone: each
//! stream writes `per_stream` bytes in `chunk`-byte writes over loopback and hashes every chunk
//! with xxh3 as it goes (tsclient's per-byte work: it digests what it sends), into a reader per
//! connection that counts and discards. The rest of a stream (hello, report) costs the same
//! either way. `cargo bench --bench fanout` prints both side by side.

use std::hash::Hasher as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener};
use std::time::{Duration, Instant};

use tsperf_sys::timing::CpuTime;

/// Who writes the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// A thread per stream, each a blocking socket.
    Threads,
    /// One thread, one mio poll, every socket non-blocking.
    OneLoop,
}

/// One run: bytes every reader got, from the first write to the last reader's end, and the
/// process's CPU time over it (writers and readers both).
#[derive(Debug, Clone, Copy)]
pub struct Fanout {
    /// Bytes the readers got in all.
    pub bytes: u64,
    /// First write to the last reader's end of stream.
    pub elapsed: Duration,
    /// The writers' CPU time (the sending threads' own, from `RUSAGE_THREAD`).
    pub writer_cpu: Duration,
}

impl Fanout {
    /// The rate in Gbit/s.
    pub fn gbit_per_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

/// Moves `per_stream` bytes on each of `streams` connections, written the way `model` says.
pub fn run(model: Model, streams: usize, per_stream: u64, chunk: usize) -> io::Result<Fanout> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let readers = std::thread::spawn(
        move || -> io::Result<Vec<std::thread::JoinHandle<io::Result<u64>>>> {
            (0..streams)
                .map(|_| {
                    let (mut s, _) = listener.accept()?;
                    Ok(std::thread::spawn(move || {
                        let mut buf = vec![0u8; 256 << 10];
                        let mut got = 0u64;
                        loop {
                            match s.read(&mut buf) {
                                Ok(0) => return Ok(got),
                                Ok(n) => got += n as u64,
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                Err(e) => return Err(e),
                            }
                        }
                    }))
                })
                .collect()
        },
    );
    let data: Vec<u8> = (0..chunk.max(1)).map(|i| b'a' + (i % 26) as u8).collect();
    let conns = (0..streams)
        .map(|_| std::net::TcpStream::connect(addr))
        .collect::<io::Result<Vec<_>>>()?;
    let handles = readers
        .join()
        .map_err(|_| io::Error::other("the accepting thread panicked"))??;
    let start = Instant::now();
    let writer_cpu = match model {
        Model::Threads => threads(conns, &data, per_stream)?,
        Model::OneLoop => one_loop(conns, &data, per_stream)?,
    };
    let mut bytes = 0;
    for h in handles {
        bytes += h
            .join()
            .map_err(|_| io::Error::other("a reader panicked"))??;
    }
    let elapsed = start.elapsed();
    if bytes != per_stream * streams as u64 {
        return Err(io::Error::other(format!(
            "the readers got {bytes} of {} bytes",
            per_stream * streams as u64
        )));
    }
    Ok(Fanout {
        bytes,
        elapsed,
        writer_cpu,
    })
}

/// A thread per stream: write a chunk, hash it, until `per_stream` bytes went.
fn threads(conns: Vec<std::net::TcpStream>, data: &[u8], per_stream: u64) -> io::Result<Duration> {
    std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .into_iter()
            .map(|mut c| {
                s.spawn(move || -> io::Result<(Duration, u64)> {
                    let cpu = CpuTime::thread();
                    let mut hash = twox_hash::XxHash3_64::new();
                    let mut sent = 0u64;
                    while sent < per_stream {
                        let n = (data.len() as u64).min(per_stream - sent) as usize;
                        hash.write(&data[..n]);
                        c.write_all(&data[..n])?;
                        sent += n as u64;
                    }
                    c.shutdown(Shutdown::Write)?;
                    let used = CpuTime::thread().since(cpu);
                    Ok((used.user + used.sys, hash.finish()))
                })
            })
            .collect();
        let mut cpu = Duration::ZERO;
        for h in handles {
            cpu += h
                .join()
                .map_err(|_| io::Error::other("a writer panicked"))??
                .0;
        }
        Ok(cpu)
    })
}

/// One stream's place in the one loop: bytes sent, and how far into the current chunk.
struct Lane {
    sock: mio::net::TcpStream,
    hash: twox_hash::XxHash3_64,
    sent: u64,
    /// Bytes of the current chunk already written (it was hashed when begun).
    at: usize,
    done: bool,
}

/// One thread: every socket non-blocking in one poll; on each writable event a lane writes
/// (hashing each chunk as it begins it) until the kernel would block, then the next lane.
fn one_loop(conns: Vec<std::net::TcpStream>, data: &[u8], per_stream: u64) -> io::Result<Duration> {
    let cpu = CpuTime::thread();
    let mut poll = mio::Poll::new()?;
    let mut lanes = Vec::with_capacity(conns.len());
    for (i, c) in conns.into_iter().enumerate() {
        c.set_nonblocking(true)?;
        let mut sock = mio::net::TcpStream::from_std(c);
        poll.registry()
            .register(&mut sock, mio::Token(i), mio::Interest::WRITABLE)?;
        lanes.push(Lane {
            sock,
            hash: twox_hash::XxHash3_64::new(),
            sent: 0,
            at: 0,
            done: false,
        });
    }
    let mut events = mio::Events::with_capacity(lanes.len().max(1));
    let mut left = lanes.len();
    // Every socket starts writable: one pass over all before the first wait.
    let mut ready: Vec<usize> = (0..lanes.len()).collect();
    while left > 0 {
        for &i in &ready {
            let lane = &mut lanes[i];
            if !lane.done && write_lane(lane, data, per_stream)? {
                lane.done = true;
                lane.sock.shutdown(Shutdown::Write)?;
                left -= 1;
            }
        }
        if left == 0 {
            break;
        }
        match poll.poll(&mut events, Some(Duration::from_secs(30))) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => r?,
        }
        if events.is_empty() {
            return Err(io::Error::other("no socket became writable in 30 s"));
        }
        ready.clear();
        ready.extend(events.iter().map(|e| e.token().0));
    }
    let used = CpuTime::thread().since(cpu);
    Ok(used.user + used.sys)
}

/// Writes `lane` until the kernel would block (false) or its bytes are all sent (true).
fn write_lane(lane: &mut Lane, data: &[u8], per_stream: u64) -> io::Result<bool> {
    while lane.sent < per_stream {
        let n = (data.len() as u64).min(per_stream - (lane.sent - lane.at as u64)) as usize;
        if lane.at == 0 {
            lane.hash.write(&data[..n]);
        }
        match lane.sock.write(&data[lane.at..n]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(w) => {
                lane.sent += w as u64;
                lane.at += w;
                if lane.at == n {
                    lane.at = 0;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both models move every byte of every stream, at odd sizes too.
    #[test]
    fn both_models_move_every_byte() {
        for model in [Model::Threads, Model::OneLoop] {
            for (streams, chunk) in [(1, 10240), (4, 1000), (3, 131072)] {
                let f = run(model, streams, 1_000_003, chunk).unwrap();
                assert_eq!(f.bytes, 1_000_003 * streams as u64, "{model:?}");
            }
        }
    }
}
