//! A client never believes a server that lies or misbehaves: a report or a Sent frame whose
//! figures contradict each other or this transfer is refused naming the figure; a server that
//! does not speak tsperf is named; reverse data that never ends is cut off; an empty pass is not
//! "verified".

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::*;
use tsperf_proto::Frame;

/// A fake server that takes a whole transfer and its trailer, then sends `report` (its bytes and
/// digest made right for the data) and closes.
fn reporting_server(report: tsperf_proto::Report) -> u16 {
    fake_server(move |mut s, len| {
        let mut data = vec![0u8; len as usize + 8];
        s.read_exact(&mut data).unwrap();
        let (data, trailer) = data.split_at(len as usize);
        let r = tsperf_proto::Report {
            bytes: len,
            digest: u64::from_be_bytes(trailer.try_into().unwrap()),
            reads: 1,
            server_io: Some(tsperf_proto::ServerIo::Blocking),
            log: Some(tsperf_proto::LogMode::None),
            ..report
        };
        assert_eq!(xxhash_rust::xxh3::xxh3_64(data), r.digest);
        send(&mut s, &Frame::Report(r));
    })
}

/// A report whose numbers contradict each other, or this transfer, is a protocol
/// error naming the figure; a server time outside the transfer is shown as unknown, never as a
/// one-way time of billions of seconds or a share above 100%.
#[test]
fn absurd_report_numbers_are_refused_or_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "r.txt", 1000);
    let f = file.to_str().unwrap();
    let split = |read_ns, wait_ns| tsperf_proto::TimeSplit {
        read_ns,
        wait_ns,
        ..Default::default()
    };
    let overflowing = tsperf_proto::Report {
        split: split(u64::MAX, 10),
        ..Default::default()
    };
    let port = reporting_server(overflowing).to_string();
    let out = client(&["--port", &port, f]);
    assert_fails(
        &out,
        1,
        "the report's time split contradicts the rest of it",
    );
    // An hour of server time in a transfer of milliseconds.
    let long = tsperf_proto::Report {
        split: split(1000, 3_600_000_000_000),
        ..Default::default()
    };
    let port = reporting_server(long).to_string();
    let out = client(&["--port", &port, f]);
    assert_fails(
        &out,
        1,
        "the server's report contradicts this transfer: its time split took",
    );
    // First and last byte at the end of time: consistent in itself, but not in this transfer.
    let far = tsperf_proto::Report {
        first_byte_unix_us: u64::MAX,
        last_byte_unix_us: u64::MAX,
        split: split(1000, 1000),
        ..Default::default()
    };
    let port = reporting_server(far.clone()).to_string();
    let (out, v) = client_json(port.parse().unwrap(), &[f]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(v["one_way"]["first_byte_us"].is_null(), "{v:#}");
    assert!(v["one_way"]["last_byte_us"].is_null(), "{v:#}");
    let port = reporting_server(far).to_string();
    let out = client(&["--port", &port, f]);
    let text = stdout(&out);
    assert!(
        !text.contains("16650588101") && !text.contains("16,650,588,101"),
        "{text}"
    );
}

/// A server that does not speak tsperf is named at once with what it sent (an
/// HTTP server's status line, an iperf3 server's state byte); one that says nothing is named
/// when the hello's answer is late; latency mode fails the same way instead of reporting
/// "0 clock queries".
#[test]
fn the_wrong_server_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "w.txt", 1000);
    let f = file.to_str().unwrap();
    let answering = |answer: &'static [u8]| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for _ in 0..2 {
                let Ok((mut s, _)) = l.accept() else { return };
                let _ = s.read(&mut [0u8; 512]);
                let _ = s.write_all(answer);
                std::thread::sleep(Duration::from_secs(3));
            }
        });
        port.to_string()
    };
    let http = answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    let out = client(&["--port", &http, "--timeout", "20", f]);
    assert_fails(
        &out,
        1,
        "does not speak the tsperf protocol (it sent \"HTTP/1.1 400 Bad Request\")",
    );
    let out = client(&["--port", &http, "--timeout", "20", "--latency"]);
    assert_fails(&out, 1, "does not speak the tsperf protocol");
    assert!(
        !stdout(&out).contains("0 clock queries"),
        "{}",
        stdout(&out)
    );
    let iperf3 = answering(&[9]);
    let out = client(&["--port", &iperf3, "--timeout", "20", f]);
    assert_fails(&out, 1, "as an iperf3 server does");
    let silent = answering(b"");
    let out = client(&["--port", &silent, "--timeout", "1", f]);
    assert_fails(
        &out,
        1,
        "took the connection but said nothing (is it a tsserver?)",
    );
}

/// A server whose reverse data never ends cannot keep the client: a sized stream
/// stops once more than it asked for (and the server's end) has come, a timed one at its time
/// plus the grace, each with the reason and one JSON object; `-P -R` too. Before, the client
/// read on until it was killed, printing nothing.
#[test]
fn a_reverse_stream_that_never_ends_is_cut_off() {
    for (mode, words) in [
        (
            &["-R", "--bytes", "1MiB"][..],
            "more than the 1048576 bytes asked for",
        ),
        (&["-R", "-t", "0.3"][..], "past the run's time"),
        (
            &["-P", "2", "-R", "--bytes", "2MiB"][..],
            "more than the 1048576 bytes asked for",
        ),
    ] {
        for io in [&[][..], &["--nonblocking"][..]] {
            let port = endless_reverse_server();
            let mut args = mode.to_vec();
            args.extend_from_slice(io);
            let (out, v) = client_json(port, &args);
            assert_eq!(out.status.code(), Some(1), "{mode:?}: {}", stderr(&out));
            let text = v.to_string();
            assert!(text.contains(words), "{mode:?} {io:?}: {v:#}");
        }
    }
}

/// A fake reverse server that accepts a pass of `pass` bytes (by default what was asked for),
/// sends them and then `sent` as its report, with a true end trailer. Returns the port.
fn reverse_server_reporting(sent: tsperf_proto::sent::Sent, pass: Option<u64>) -> u16 {
    use tsperf_proto::{Frame, encode_frame};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let Some(hello) = read_hello(&mut s) else {
            return;
        };
        let length = pass.unwrap_or(hello.length);
        accept_hello(&mut s, &hello, length);
        // A first write of 0 is stamped now, as a server would.
        let first_write_unix_us = match sent.first_write_unix_us {
            0 => tsperf_sys::timing::unix_us_now(),
            at => at,
        };
        let data = vec![b'y'; length as usize];
        let _ = s.write_all(&data);
        let mut end = Vec::new();
        let sent = tsperf_proto::sent::Sent {
            first_write_unix_us,
            ..sent
        };
        encode_frame(&Frame::Sent(sent), &mut end);
        end.extend_from_slice(
            &tsperf_proto::end::End {
                length,
                digest: xxhash_rust::xxh3::xxh3_64(&data),
            }
            .encode(),
        );
        let _ = s.write_all(&end);
    });
    port
}

/// A Sent frame an honest server could send for 1 MiB in 10240-byte writes (its first write
/// stamped when the fake server sends: [`reverse_server_reporting`]).
fn honest_sent() -> tsperf_proto::sent::Sent {
    tsperf_proto::sent::Sent {
        bytes: 1 << 20,
        writes: 103,
        partial_writes: 0,
        would_block: 0,
        first_write_unix_us: 0,
        elapsed_ns: 1000,
        cpu_user_us: 1,
        cpu_sys_us: 1,
        on_cpu_ns: None,
        run_queue_ns: None,
        source_read_ns: 0,
        chunk: 10240,
        sndbuf: 1 << 20,
        server_io: tsperf_proto::ServerIo::Blocking,
        boot_id: None,
        tcp: Default::default(),
        flight: Default::default(),
        congestion: None,
    }
}

/// A reverse stream of 1 MiB from a fake server reporting `bad` fails, the error naming
/// `figure` as a contradiction, and is not called verified.
fn assert_sent_refused(bad: tsperf_proto::sent::Sent, figure: &str) {
    let port = reverse_server_reporting(bad, None);
    let (out, v) = client_json(port, &["-R", "--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(1), "{figure}: {}", stderr(&out));
    let error = v["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("contradicts") && error.contains(figure),
        "{figure}: {v:#}"
    );
    assert_ne!(v["verified"], true);
}

/// A reverse stream's Sent frame is checked against the stream as a Report is:
/// a send time longer than the whole stream took here, a write size other than the one asked
/// for, a byte count other than the trailer's are refused, naming the figure; before, the
/// client printed "18446744073 s" and a "16 EiB" write.
#[test]
fn an_absurd_sent_report_is_refused() {
    use tsperf_proto::sent::Sent;
    let honest = honest_sent();
    let port = reverse_server_reporting(honest, None);
    let (out, v) = client_json(port, &["-R", "--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    for (bad, figure) in [
        (
            Sent {
                elapsed_ns: u64::MAX / 2,
                ..honest
            },
            "first to last write",
        ),
        (
            Sent {
                chunk: 1 << 62,
                ..honest
            },
            "write size",
        ),
        (
            Sent {
                bytes: 7,
                writes: 1,
                ..honest
            },
            "bytes",
        ),
        (
            Sent {
                cpu_user_us: u64::MAX / 4,
                ..honest
            },
            "CPU",
        ),
    ] {
        assert_sent_refused(bad, figure);
    }
}

/// A Sent frame's figures that no sender can have are refused, naming them:
/// 1 write of 10240 B for 1 MiB, 10^12 retransmissions, a 4 GiB send buffer, a first write in
/// 2100 (held to the clock queries); before, each was printed as fact and a verdict built on it.
#[test]
fn a_sent_report_no_sender_can_make_is_refused() {
    use tsperf_proto::sent::Sent;
    let honest = honest_sent();
    let in_2100 = 4_102_444_800_000_000;
    for (bad, figure) in [
        (
            Sent {
                writes: 1,
                ..honest
            },
            "1 writes",
        ),
        (
            Sent {
                tcp: tsperf_proto::tcp::SenderTcp {
                    total_retrans: Some(1_000_000_000_000),
                    ..Default::default()
                },
                ..honest
            },
            "retransmitted segments",
        ),
        (
            Sent {
                sndbuf: u32::MAX,
                ..honest
            },
            "send buffer",
        ),
        (
            Sent {
                first_write_unix_us: in_2100,
                ..honest
            },
            "first write",
        ),
    ] {
        assert_sent_refused(bad, figure);
    }
}

/// A server that accepts a named file with an empty pass is refused: a pass is at
/// least a byte, and a stream of nothing is not "verified".
#[test]
fn an_empty_pass_for_a_named_file_is_refused() {
    let empty = tsperf_proto::sent::Sent {
        bytes: 0,
        writes: 0,
        partial_writes: 0,
        would_block: 0,
        first_write_unix_us: 0,
        elapsed_ns: 0,
        cpu_user_us: 0,
        cpu_sys_us: 0,
        on_cpu_ns: None,
        run_queue_ns: None,
        source_read_ns: 0,
        chunk: 10240,
        sndbuf: 0,
        server_io: tsperf_proto::ServerIo::Blocking,
        boot_id: None,
        tcp: Default::default(),
        flight: Default::default(),
        congestion: None,
    };
    let port = reverse_server_reporting(empty, Some(0));
    let (out, v) = client_json(port, &["-R", "some.bin"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("at least 1 byte"), "{v:#}");
    assert_ne!(v["verified"], true);
}
