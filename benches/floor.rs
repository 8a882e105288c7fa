//! The floor: how fast a bare write()/read() loop moves the seed file over loopback, side by
//! side with tsperf (issue 8).
//!
//! `cargo bench --bench floor` runs, for chunks 102, 1024 and 10240, alternately REPS times
//! (env `TSPERF_REPS`, default 5): a writer thread that `write()`s exactly CHUNK bytes at a time
//! from memory and a reader thread that `read()`s with a CHUNK-byte buffer until EOF (std only,
//! no tsperf code on the path), and tsclient to a `--log none` tsserver with the 36 MiB file. It
//! prints the medians and tsperf's fraction of the floor.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Instant;

use common::{client, median, reps, seed_file, server};

/// Moves `total` bytes through loopback in `chunk`-byte writes and reads; returns MiB/s.
fn floor(total: usize, chunk: usize) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; chunk];
        let mut got = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        (got, Instant::now())
    });
    let data = vec![b'x'; chunk];
    let mut s = TcpStream::connect(addr).unwrap();
    let start = Instant::now();
    let mut sent = 0;
    while sent < total {
        let n = chunk.min(total - sent);
        s.write_all(&data[..n]).unwrap();
        sent += n;
    }
    drop(s);
    let (got, end) = reader.join().unwrap();
    assert_eq!(got, total);
    got as f64 / (1024.0 * 1024.0) / end.duration_since(start).as_secs_f64()
}

fn main() {
    let reps = reps();
    let file = seed_file();
    let total = std::fs::metadata(&file).unwrap().len() as usize;
    let (_server, port) = server(&["--log", "none"], Stdio::null());
    println!("36 MiB over loopback, median of {reps} alternating runs (MiB/s)\n");
    println!(
        "| chunk | bare write/read loop | tsperf (blocking) | tsperf (nonblocking) | tsperf / floor |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for chunk in [102usize, 1024, 10240] {
        let (mut f, mut b, mut n) = (Vec::new(), Vec::new(), Vec::new());
        let c = chunk.to_string();
        for _ in 0..reps {
            f.push(floor(total, chunk));
            b.push(
                client(&port, &["--chunk", &c, file.to_str().unwrap()])["mib_per_s"]
                    .as_f64()
                    .unwrap(),
            );
            n.push(
                client(
                    &port,
                    &["--chunk", &c, "--nonblocking", file.to_str().unwrap()],
                )["mib_per_s"]
                    .as_f64()
                    .unwrap(),
            );
        }
        let (f, b, n) = (median(&mut f), median(&mut b), median(&mut n));
        println!(
            "| {chunk} | {f:.1} | {b:.1} | {n:.1} | {:.2} / {:.2} |",
            b / f,
            n / f
        );
    }
}
