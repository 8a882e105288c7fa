//! Issue 23: hardening, second round. One client must not spin or freeze the server, the log
//! sinks keep their bounds, and every client exit prints what it measured.
//!
//! CPU use is read from `/proc/PID/stat` over a bounded window, never guessed.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use tsperf::protocol::Frame;

const MODELS: [&[&str]; 2] = [&[], &["--blocking"]];

/// The user and system CPU time of process `pid` so far (`/proc/PID/stat`, clock ticks).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The CPU share (0.0-1.0 of one core) `pid` used while `window` passed.
fn cpu_share_over(pid: u32, window: Duration) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let before = cpu_ticks(pid);
    std::thread::sleep(window);
    (cpu_ticks(pid) - before) as f64 / hz / window.as_secs_f64()
}

/// A raw client: connects, sends a stream hello asking for `queries` clock queries, reads the
/// accept.
fn stream_with_queries(port: u16, queries: u8) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut hello = Vec::new();
    tsperf::protocol::encode_hello(
        &tsperf::protocol::Hello {
            clock_queries: queries,
            ..tsperf::protocol::Hello::stream(1 << 20, 1024, "paused.bin")
        },
        &mut hello,
    );
    s.write_all(&hello).unwrap();
    match read_one_frame(&mut s) {
        Some(Frame::Accept { .. }) => s,
        other => panic!("hello not accepted: {other:?}"),
    }
}

/// Issue 23 (1): a stream client that pauses between its clock queries costs the server no CPU:
/// the event loop waits for its next query instead of serving it again and again.
#[test]
fn paused_clock_queries_do_not_spin_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let mut s = stream_with_queries(server.port, 2);
        let mut query = [0u8; tsperf::protocol::CLOCK_QUERY];
        query[15] = 1;
        s.write_all(&query).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Time(t)) => assert_eq!(t.seq, 0),
            other => panic!("no answer to query 0: {other:?}"),
        }
        // Query 1 never comes (within the window): the server has nothing to do.
        let share = cpu_share_over(server.pid(), Duration::from_secs(1));
        assert!(
            share < 0.2,
            "{model:?}: the server used {:.0}% of a CPU while its only client paused",
            share * 100.0
        );
        drop(s);
    }
}

/// Issue 23 (1): clients paused in every phase at once (half a hello, a latency session between
/// requests, a stream halfway through its data, a stream whose trailer is late, a stream
/// between clock queries) cost the server no CPU while they pause.
#[test]
fn clients_paused_in_every_phase_do_not_spin_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let connect = || {
            let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(DEADLINE)).unwrap();
            s
        };
        let mut half_hello = connect();
        half_hello
            .write_all(&stream_hello(10, 10, "half.bin")[..10])
            .unwrap();
        let mut latency = connect();
        latency.write_all(&latency_hello(100, 1, 1)).unwrap();
        assert!(matches!(
            read_one_frame(&mut latency),
            Some(Frame::Accept { .. })
        ));
        latency.write_all(&binary_request(0)).unwrap();
        let mut halfway = stream_with_queries(server.port, 0);
        halfway.write_all(&[b'x'; 4096]).unwrap();
        let mut no_trailer = stream_with_queries(server.port, 0);
        no_trailer.write_all(&vec![b'y'; 1 << 20]).unwrap();
        let mut between = stream_with_queries(server.port, 3);
        between
            .write_all(&[0u8; tsperf::protocol::CLOCK_QUERY])
            .unwrap();
        // The latency answer and the clock answer are out: everyone now waits.
        let mut answer = [0u8; 4];
        latency.read_exact(&mut answer).unwrap();
        assert!(matches!(read_one_frame(&mut between), Some(Frame::Time(_))));
        std::thread::sleep(Duration::from_millis(100));
        let share = cpu_share_over(server.pid(), Duration::from_secs(1));
        assert!(
            share < 0.2,
            "{model:?}: the server used {:.0}% of a CPU while its five clients paused",
            share * 100.0
        );
    }
}
