//! Test harness: real `tsserver` and `tsclient` processes over real sockets on port 0.
//! Every wait here has a deadline; nothing a test does can hang the suite.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tsperf_proto::{Frame, Hello, Mode, Session, decode_hello, encode_frame, encode_hello};

/// The server models most behaviour is checked in: the event loop and a thread per connection.
pub(crate) const MODELS: [&[&str]; 2] = [&[], &["--blocking"]];
/// Every server model: also the event loop on more than one thread.
pub(crate) const EVERY_MODEL: [&[&str]; 3] = [&[], &["--blocking"], &["--threads", "2"]];

/// The longest any single step of a test may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);
/// An Accept frame on the wire: its header and its 15-byte body (protocol 7).
pub(crate) const ACCEPT_LEN: usize = 3 + 80;

/// The program `name`: this package's own as cargo built it for the tests; another package's
/// (tsperf-bench's tests run tsserver and tsclient, the root package's) from the same target
/// directory, where `cargo test --workspace` builds them before any test runs.
pub(crate) fn bin(name: &str) -> PathBuf {
    let own = match name {
        "tsserver" => option_env!("CARGO_BIN_EXE_tsserver"),
        "tsclient" => option_env!("CARGO_BIN_EXE_tsclient"),
        "tsgen" => option_env!("CARGO_BIN_EXE_tsgen"),
        "tsmatrix" => option_env!("CARGO_BIN_EXE_tsmatrix"),
        "tsreport" => option_env!("CARGO_BIN_EXE_tsreport"),
        "tsprobe" => option_env!("CARGO_BIN_EXE_tsprobe"),
        "tsdocs" => option_env!("CARGO_BIN_EXE_tsdocs"),
        "tsscale" => option_env!("CARGO_BIN_EXE_tsscale"),
        "tspeers" => option_env!("CARGO_BIN_EXE_tspeers"),
        "tsverdicts" => option_env!("CARGO_BIN_EXE_tsverdicts"),
        other => panic!("unknown binary {other}"),
    };
    if let Some(path) = own {
        return PathBuf::from(path);
    }
    // The test runs as target/PROFILE/deps/NAME-HASH: the binaries are in target/PROFILE.
    let exe = std::env::current_exe().expect("the test's own path");
    let path = exe.parent().and_then(Path::parent).unwrap().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run the tests with `cargo test --workspace` (it builds every \
         package's binaries first)",
        path.display()
    );
    path
}

/// Runs `program` with `args`, killed after `limit`: a hang is a failure, not a wait.
pub(crate) fn run_within(program: &Path, args: &[&str], limit: Duration) -> Output {
    let mut cmd = assert_cmd::Command::new(program);
    cmd.args(args).timeout(limit);
    let out = cmd.output().expect("run the program");
    assert!(
        out.status.code().is_some(),
        "{} {args:?} was killed (a hang past {limit:?}, or a signal); stderr: {}",
        program.display(),
        stderr(&out)
    );
    out
}

/// `prog` ended well: its output (exit 0), or a clear error (exit 1, one `prog:` line naming
/// what it could not take), never a panic (101) or a usage error for a good command line.
pub(crate) fn ends_well(out: &Output, prog: &str, what: &str) {
    let code = out.status.code();
    let err = stderr(out);
    assert!(
        code == Some(0) || (code == Some(1) && err.starts_with(&format!("{prog}: "))),
        "{what}: exit {code:?}, stderr: {err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// Makes `at` a file that is not a regular one: a symlink to `/dev/zero` (0, endless), a FIFO
/// with no writer (1, a read blocks for ever), or a directory (2).
pub(crate) fn make_special(at: &Path, kind: u8) {
    match kind {
        0 => std::os::unix::fs::symlink("/dev/zero", at).unwrap(),
        1 => {
            let c = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
            // SAFETY: mkfifo(3) on a NUL-terminated path we own.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
        _ => std::fs::create_dir(at).unwrap(),
    }
}

/// Every option in `name -h` says what it does.
pub(crate) fn assert_every_option_has_help(name: &str) {
    // An option's line is indented 2 (`  -l, --chunk`) or 6 (`      --json`); a description's
    // wrapped lines are indented to its column, further.
    let re_opt = |l: &str| {
        let t = l.trim_start();
        let indent = l.len() - t.len();
        (indent == 6 && t.starts_with("--"))
            || (indent == 2 && t.starts_with('-') && t.get(2..4) == Some(", "))
    };
    let out = run(bin(name), &["-h"]);
    assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if !re_opt(l) {
            continue;
        }
        // The description follows the option and its value name after two spaces, or on the
        // next line when the option is long.
        let t = l.trim_start();
        let rest = t.split_once("  ").map_or("", |(_, r)| r.trim());
        let next = lines.get(i + 1).map_or("", |n| n.trim());
        let said = if rest.is_empty() && !re_opt(lines.get(i + 1).unwrap_or(&"")) {
            next
        } else {
            rest
        };
        let said = said.split("[default:").next().unwrap().trim();
        assert!(
            !said.is_empty(),
            "{name}: no help for '{}'\n{text}",
            t.trim()
        );
    }
}

/// `name --help` opens with what that program does (`opening`), not its package's description.
pub(crate) fn assert_describes_itself(name: &str, opening: &str) {
    let out = run(bin(name), &["--help"]);
    assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with(opening), "{name}: {text}");
    assert!(!text.contains("command-line front ends"), "{name}: {text}");
}

/// The repository's root.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/common.sh").is_file())
        .expect("the repository's root")
        .to_owned()
}

/// Runs `scripts/NAME` with `args`.
pub(crate) fn script(name: &str, args: &[&str]) -> Output {
    run(repo_root().join("scripts").join(name), args)
}

/// True if a network namespace can be made here (root and iproute2).
pub(crate) fn can_make_namespaces() -> bool {
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("tsprobe{}-{n}", std::process::id() % 100_000);
    let ok = Command::new("ip")
        .args(["netns", "add", &name])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
    }
    ok
}

/// A test that needs namespaces, asked to run (`--ignored`), fails where they cannot be made:
/// it never passes without having run.
pub(crate) fn needs_namespaces() {
    assert!(
        can_make_namespaces(),
        "cannot create network namespaces here: this test needs root and iproute2"
    );
}

/// A running tsserver, killed when dropped. Its stdout and stderr are collected as they come.
pub(crate) struct Server {
    child: Child,
    pub port: u16,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    /// The threads collecting stdout and stderr; joined once the server has exited, so
    /// everything it printed is in `stdout`/`stderr` by then.
    readers: Vec<thread::JoinHandle<()>>,
}

impl Server {
    /// Starts `tsserver --port 0 ARGS` and waits (bounded) for its `listening on` line.
    pub(crate) fn start(args: &[&str]) -> Server {
        let mut cmd = Command::new(bin("tsserver"));
        cmd.args(["--port", "0", "--bind", "127.0.0.1"]).args(args);
        Server::spawn(cmd)
    }

    /// Starts `cmd` (a tsserver command line) with stdout and stderr collected, and waits
    /// (bounded) for its `listening on` line.
    pub(crate) fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tsserver");
        let (stdout, out_reader) = collect(child.stdout.take().unwrap());
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = mpsc::channel();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let err_reader = thread::spawn(move || {
            let mut first = String::new();
            let _ = err.read_line(&mut first);
            let _ = tx.send(first.clone());
            sink.lock().unwrap().push_str(&first);
            let mut line = String::new();
            while err.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("tsserver printed no listening line within 10 s");
        let port = listening_port(&first);
        Server {
            child,
            port,
            stdout,
            stderr,
            readers: vec![out_reader, err_reader],
        }
    }

    pub(crate) fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) until stdout or stderr satisfies `pred`; false on timeout.
    pub(crate) fn wait_for(&self, pred: impl Fn(&str, &str) -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if pred(&self.stdout(), &self.stderr()) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Waits (bounded) for the server to exit by itself and returns its exit code.
    pub(crate) fn wait_exit(&mut self) -> Option<i32> {
        let end = Instant::now() + DEADLINE;
        while Instant::now() < end {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its pipes closed with it: the readers end once they have read everything.
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                return status.code();
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Sends `sig` (e.g. `libc::SIGTERM`) to the server.
    pub(crate) fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(mut r: impl Read + Send + 'static) -> (Arc<Mutex<String>>, thread::JoinHandle<()>) {
    let out = Arc::new(Mutex::new(String::new()));
    let sink = out.clone();
    let reader = thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (out, reader)
}

/// Runs tsclient with `args`, killed after [`DEADLINE`].
pub(crate) fn client(args: &[&str]) -> Output {
    run(bin("tsclient"), args)
}

pub(crate) fn run(program: PathBuf, args: &[&str]) -> Output {
    let mut cmd = assert_cmd::Command::new(program);
    cmd.args(args).timeout(DEADLINE);
    let out = cmd.output().expect("run binary");
    assert!(
        out.status.code().is_some(),
        "{args:?} was killed (timeout or signal); stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs tsclient against `server` with `--json` and parses its stdout.
pub(crate) fn client_json(port: u16, args: &[&str]) -> (Output, serde_json::Value) {
    let port = port.to_string();
    let mut all = vec!["--port", &port, "--json"];
    all.extend_from_slice(args);
    let out = client(&all);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {:?}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, v)
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts a clean failure: the exit code, a message containing `needle`, and no panic.
pub(crate) fn assert_fails(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
}

/// Writes `len` bytes of the deterministic test text to `dir/name`.
pub(crate) fn test_file(dir: &Path, name: &str, len: u64) -> PathBuf {
    let p = dir.join(name);
    tsperf_sys::testdata::generate(&p, len).expect("generate test file");
    p
}

pub(crate) fn xxh3_of(path: &Path) -> String {
    format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(&std::fs::read(path).unwrap())
    )
}

/// The digest of the generated stream of `size` bytes, as tsgen writes it to a file.
pub(crate) fn tsgen_digest(size: u64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gen.txt");
    let out = run(
        bin("tsgen"),
        &["--size", &size.to_string(), file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    xxh3_of(&file)
}

/// Connects to the server on `port`, sends `hello` raw, and reads its first answer: the Accept
/// (`Ok`) or a refusal's reason. The connection is returned open.
pub(crate) fn hello_answer(port: u16, hello: &Hello) -> (TcpStream, Result<(), String>) {
    let mut s = raw_hello(port, hello);
    let answer = match read_one_frame(&mut s) {
        Some(Frame::Accept { .. }) => Ok(()),
        Some(Frame::Refuse { reason, .. }) => Err(reason),
        other => Err(format!("{other:?}")),
    };
    (s, answer)
}

/// A raw client: connected to the server on 127.0.0.1:`port` and `hello` sent, nothing read
/// yet; its reads time out after [`DEADLINE`].
pub(crate) fn raw_hello(port: u16, hello: &Hello) -> TcpStream {
    use std::io::Write;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut bytes = Vec::new();
    encode_hello(hello, &mut bytes);
    s.write_all(&bytes).unwrap();
    s
}

/// A raw client whose `hello` the server on `port` accepted (the Accept read; anything else
/// fails the test).
pub(crate) fn accepted(port: u16, hello: &Hello) -> TcpStream {
    match hello_answer(port, hello) {
        (s, Ok(())) => s,
        (_, Err(answer)) => panic!("hello not accepted: {answer}"),
    }
}

/// A raw client's timed stream of `duration_ms` (no clock queries), accepted.
pub(crate) fn timed_stream(port: u16, duration_ms: u32) -> TcpStream {
    let hello = Hello {
        duration_ms,
        clock_queries: 0,
        ..Hello::stream(1000, 1000, "t.txt")
    };
    accepted(port, &hello)
}

/// A raw reverse client for the generated stream of `length` bytes in `chunk`-byte writes, its
/// hello sent (no clock queries); it has read nothing.
pub(crate) fn reverse_stream(port: u16, length: u64, chunk: u32) -> TcpStream {
    let hello = Hello {
        reverse: true,
        clock_queries: 0,
        ..Hello::stream(length, chunk, "")
    };
    raw_hello(port, &hello)
}

/// A server slow enough (tiny reads and buffers) that a transfer takes seconds.
pub(crate) fn slow_server() -> Server {
    Server::start(&["--read-size", "16", "--rcvbuf", "65536"])
}

/// A fake server for reverse streams whose data never ends: each connection's hello is
/// accepted (its length a pass), its clock queries answered, then data sent until the client
/// goes or `DEADLINE` passes. Returns the port.
pub(crate) fn endless_reverse_server() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let end = std::time::Instant::now() + DEADLINE;
        for s in l.incoming().take(8) {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                s.set_write_timeout(Some(DEADLINE)).unwrap();
                let Some(hello) = read_hello(&mut s) else {
                    return;
                };
                accept_hello(&mut s, &hello, hello.length);
                let data = vec![b'x'; 64 << 10];
                while std::time::Instant::now() < end && s.write_all(&data).is_ok() {}
            });
        }
    });
    port
}

/// A fake server on 127.0.0.1:0 for one connection: it reads a hello, accepts it, then hands the
/// socket to `then`. Returns the port.
pub(crate) fn fake_server(then: impl FnOnce(TcpStream, u64) + Send + 'static) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let hello = read_hello(&mut s).expect("client closed before its hello");
        accept_hello(&mut s, &hello, 0);
        then(s, hello.length);
    });
    port
}

/// A fake server's reading of a client's hello (each read within [`DEADLINE`]); `None` if the
/// client closed or sent something else first.
pub(crate) fn read_hello(s: &mut TcpStream) -> Option<Hello> {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 512];
    loop {
        if let Ok(Some((h, _))) = decode_hello(&buf) {
            return Some(h);
        }
        match s.read(&mut tmp) {
            Ok(n) if n > 0 => buf.extend_from_slice(&tmp[..n]),
            _ => return None,
        }
    }
}

/// A fake server's Accept of `hello` (a reverse stream's pass of `length` bytes), and its
/// answers to the clock queries the hello asks for.
pub(crate) fn accept_hello(s: &mut TcpStream, hello: &Hello, length: u64) {
    send(
        s,
        &Frame::Accept {
            read_size: hello.chunk,
            server_io: tsperf_proto::ServerIo::Blocking,
            log: tsperf_proto::LogMode::None,
            stdout: tsperf_proto::StdoutKind::Unknown,
            length,
            tls: None,
        },
    );
    answer_clock_queries(s, hello.clock_queries);
}

pub(crate) fn send(s: &mut TcpStream, f: &Frame) {
    use std::io::Write;
    let mut out = Vec::new();
    encode_frame(f, &mut out);
    s.write_all(&out).unwrap();
}

/// A port with nothing listening on it (bound, then released).
pub(crate) fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Checks one verified transfer's JSON against the file it sent (default `--io write`).
pub(crate) fn assert_verified(v: &Value, path: &Path, chunk: u64, io: &str, server_io: &str) {
    assert_verified_io(v, path, chunk, io, server_io, "write", 1);
}

/// Checks one verified transfer's JSON against the file it sent with `--io strategy`, `batch`
/// chunks per call.
pub(crate) fn assert_verified_io(
    v: &Value,
    path: &Path,
    chunk: u64,
    io: &str,
    server_io: &str,
    strategy: &str,
    batch: u64,
) {
    let len = std::fs::metadata(path).unwrap().len();
    let digest = xxh3_of(path);
    assert_eq!(v["mode"], "stream");
    assert_eq!(v["io"], io);
    assert_eq!(v["verified"], true, "{v:#}");
    assert_eq!(v["bytes"], len);
    assert_eq!(v["chunk"], chunk);
    assert_eq!(v["digest"], digest.as_str());
    assert_eq!(v["file"], path.file_name().unwrap().to_str().unwrap());
    let s = &v["server"];
    assert_eq!(s["bytes"], len);
    assert_eq!(s["digest"], digest.as_str());
    assert_eq!(s["log"], "none");
    assert_eq!(s["log_lines"], 0);
    assert_eq!(s["io"], server_io);
    // Bulk reads: an event loop's block serves all its connections, --blocking's one.
    let bulk = if server_io == "blocking" {
        256 << 10
    } else {
        1 << 20
    };
    assert_eq!(s["read_size"], chunk.max(bulk));
    assert_eq!(v["strategy"], strategy);
    // One call per `batch` chunks, the last one shorter; each read returned data.
    let writes = len.div_ceil(chunk * batch);
    assert_eq!(
        v["client"]["writes"].as_u64().unwrap() - v["client"]["partial_writes"].as_u64().unwrap(),
        writes
    );
    let reads = s["reads"].as_u64().unwrap();
    assert!(
        reads >= writes.min(1) && reads <= len,
        "reads {reads} for {len} bytes"
    );
    assert!(v["begin_unix_us"].as_u64().unwrap() <= v["end_unix_us"].as_u64().unwrap());
    assert!(v["elapsed_s"].as_f64().unwrap() >= 0.0);
    for side in [&v["cpu"], &s["cpu"]] {
        assert!(side["user_s"].as_f64().unwrap() >= 0.0 && side["sys_s"].as_f64().unwrap() >= 0.0);
    }
    if len > 0 {
        let (first, last) = (
            s["first_byte_unix_us"].as_u64().unwrap(),
            s["last_byte_unix_us"].as_u64().unwrap(),
        );
        assert!(first <= last);
    } else {
        assert!(s["first_byte_unix_us"].is_null());
    }
}

/// The bytes of a stream-mode hello.
pub(crate) fn stream_hello(length: u64, chunk: u32, name: &str) -> Vec<u8> {
    let mut b = Vec::new();
    encode_hello(&Hello::stream(length, chunk, name), &mut b);
    b
}

/// Waits (bounded by [`DEADLINE`]) for a spawned child and collects its output.
pub(crate) fn wait_child(mut child: Child) -> Output {
    let end = Instant::now() + DEADLINE;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "child did not finish in time");
        thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// A sparse file of `len` bytes (zeros that cost no disk): a transfer big enough to still be
/// running when a test interrupts it.
pub(crate) fn sparse_file(dir: &Path, name: &str, len: u64) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().set_len(len).unwrap();
    p
}

impl Server {
    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `kB` field of the server's `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
    pub(crate) fn status_kib(&self, field: &str) -> u64 {
        proc_status_kib(self.child.id(), field)
    }
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
pub(crate) fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Answers a stream's `n` clock queries, as a server does before the data.
pub(crate) fn answer_clock_queries(s: &mut TcpStream, n: u8) {
    for _ in 0..n {
        let mut q = [0u8; tsperf_proto::CLOCK_QUERY];
        s.read_exact(&mut q).unwrap();
        let seq = u64::from_be_bytes(q[..8].try_into().unwrap());
        let now = tsperf_sys::timing::unix_ns_now();
        send(
            s,
            &Frame::Time(tsperf_proto::clock::TimeResponse {
                seq,
                server_recv_unix_ns: now,
                server_send_unix_ns: now,
            }),
        );
    }
}

/// The bytes of a latency-mode hello for `count` requests.
pub(crate) fn latency_hello(count: u64, codec: u8, framing: u8) -> Vec<u8> {
    let mut b = Vec::new();
    let hello = Hello {
        mode: Mode::Latency,
        nodelay: false,
        codec,
        framing,
        length: count,
        chunk: 1,
        name: String::new(),
        log: None,
        clock_queries: 0,
        duration_ms: 0,
        reverse: false,
        one_buffer: false,
        session: Session::ALONE,
        two_way: false,
        congestion: None,
        call: None,
        save: None,
        measure_save: false,
        tls: None,
        pace: None,
    };
    encode_hello(&hello, &mut b);
    b
}

/// One binary clock request (prefix and body), as tsclient sends it.
pub(crate) fn binary_request(seq: u64) -> Vec<u8> {
    let mut b = Vec::new();
    tsperf_proto::clock::encode_request(
        &tsperf_proto::clock::TimeRequest {
            seq,
            client_send_unix_ns: 1,
        },
        tsperf_proto::clock::Codec::Binary,
        &mut b,
    );
    b
}

/// Reads one frame from `s` (bounded by its read timeout); `None` if the connection ended or
/// timed out first.
pub(crate) fn read_one_frame(s: &mut TcpStream) -> Option<Frame> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Ok(Some((f, _))) = tsperf_proto::decode_frame(&buf) {
            return Some(f);
        }
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// Starts tsserver with `args` and stdout going to a pipe nobody reads (a paused pager): the
/// pipe is returned, so the test decides when to read it. Waits for the listening line.
pub(crate) fn server_with_stuck_stdout(args: &[&str]) -> (Child, u16, std::process::ChildStdout) {
    let mut child = Command::new(bin("tsserver"))
        .args(["--port", "0", "--bind", "127.0.0.1"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tsserver");
    let out = child.stdout.take().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let port = listening_port(&first);
    // Keep draining stderr so only stdout is stuck.
    thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = err.read_to_end(&mut sink);
    });
    (child, port, out)
}

/// The port of a `tsserver: listening on ADDR:PORT` line.
pub(crate) fn listening_port(line: &str) -> u16 {
    tsperf_lab::harness::listening_port(line)
        .unwrap_or_else(|| panic!("unexpected first stderr line {line:?}"))
}

/// Kills a child and reaps it.
pub(crate) fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Writes a stand-in `iperf3` into `dir` that appends its arguments to `dir/iperf3-args.txt`
/// and prints `json` (the shape tspeers reads); returns a PATH that finds it first, and the
/// argument log's path.
pub(crate) fn stand_in_iperf3(dir: &Path, json: &str) -> (String, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let fake = dir.join("iperf3");
    let log = dir.join("iperf3-args.txt");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\necho '{json}'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap());
    (path, log)
}

/// Starts tsclient with `args`, its output piped (for [`wait_child`]).
pub(crate) fn spawn_client(args: &[&str]) -> Child {
    Command::new(bin("tsclient"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts tsclient with `args`, waits `after`, sends it SIGINT, and returns its output.
pub(crate) fn interrupt_client(args: &[&str], after: std::time::Duration) -> std::process::Output {
    let child = spawn_client(args);
    std::thread::sleep(after);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    wait_child(child)
}

/// The xxh3 of the first `len` bytes of the generated stream: the tsgen text of the seed's
/// size, again and again (what a reverse stream of `--bytes len` carries).
pub(crate) fn generated_digest(len: u64) -> String {
    use tsperf_sys::testdata::{SEED_FILE_LEN, text};
    let pattern = text(SEED_FILE_LEN as usize);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut left = len;
    while left > 0 {
        let n = left.min(pattern.len() as u64) as usize;
        h.update(&pattern[..n]);
        left -= n as u64;
    }
    format!("{:016x}", h.digest())
}
