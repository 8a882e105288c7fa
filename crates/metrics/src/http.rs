//! The small HTTP/1.1 endpoint the metrics are served from (`tsserver --metrics`, `tsprobe`).
//!
//! A request is parsed by `httparse`, its query by `form_urlencoded`; the connections are ours,
//! so each is bounded: at most [`Limits::connections`] at once (one past them gets a `503` at
//! once and is closed), a request head of at most [`MAX_HEAD`] bytes read within
//! [`Limits::read_timeout`], one request a connection (`Connection: close`). A client that
//! connects and says nothing holds one slot until its deadline, never a thread for ever.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest request head read (its request line and headers).
pub const MAX_HEAD: usize = 16 << 10;

/// A request, as the handler sees it.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `GET` or `HEAD`.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query's pairs, decoded, in order.
    pub query: Vec<(String, String)>,
    /// The headers, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A response: its status, its content type and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body's content type.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Response {
    /// A `200` page of metrics.
    pub fn metrics(body: String) -> Response {
        Response {
            status: 200,
            content_type: crate::CONTENT_TYPE,
            body,
        }
    }

    /// A plain-text answer: a page for people, or an error with its reason.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
        }
    }
}

/// What bounds the endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// The time a client has to send its request's head.
    pub read_timeout: Duration,
    /// The time a client has to take the response.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 64,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// The handler of every request.
pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Binds `addr`: `HOST:PORT`, `[V6]:PORT`, or `:PORT` for every interface (as Prometheus's
/// exporters take `--web.listen-address`). The error names the address.
pub fn bind(addr: &str) -> io::Result<TcpListener> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
    if let Some(port) = addr.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{addr}' is not an address: expected HOST:PORT or :PORT"),
            )
        })?;
        return TcpListener::bind(("::", port))
            .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            .map_err(named);
    }
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{addr}' is not an address: expected HOST:PORT or :PORT ({e})"),
            )
        })?
        .collect();
    TcpListener::bind(&addrs[..]).map_err(named)
}

/// Serves `listener` on a thread of its own, each connection on a thread of its own within
/// `limits`, until the process ends.
pub fn serve(
    listener: TcpListener,
    limits: Limits,
    handler: Handler,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || accept_loop(listener, limits, handler))
}

fn accept_loop(listener: TcpListener, limits: Limits, handler: Handler) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            // Out of descriptors, say: wait a little rather than spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = stream.set_write_timeout(Some(limits.write_timeout));
        if active.fetch_add(1, Ordering::AcqRel) >= limits.connections {
            active.fetch_sub(1, Ordering::AcqRel);
            let busy = Response::text(
                503,
                format!(
                    "busy: {} connections are being served, the most at once",
                    limits.connections
                ),
            );
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_response(&mut stream, &busy, false);
            continue;
        }
        let (active, handler) = (Arc::clone(&active), Arc::clone(&handler));
        let spawned = std::thread::Builder::new()
            .name("metrics-conn".into())
            .spawn(move || {
                let _slot = Slot(&active);
                converse(&mut stream, limits, &*handler);
            });
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A connection's place in the count, given back when it ends.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn converse(stream: &mut TcpStream, limits: Limits, handler: &dyn Fn(&Request) -> Response) {
    let response = match read_request(stream, limits.read_timeout) {
        Ok(req) if req.method != "GET" && req.method != "HEAD" => {
            Response::text(405, format!("{} is not served: use GET", req.method))
        }
        Ok(req) => {
            let r = handler(&req);
            let _ = write_response(stream, &r, req.method == "HEAD");
            return;
        }
        Err(Bad(status, why)) => Response::text(status, why),
    };
    let _ = write_response(stream, &response, false);
}

/// A request that cannot be served: its status and why.
#[derive(Debug)]
struct Bad(u16, String);

/// Reads and parses one request head, within `timeout` in all.
fn read_request(stream: &mut TcpStream, timeout: Duration) -> Result<Request, Bad> {
    let until = Instant::now() + timeout;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Bad(408, "the request did not arrive in time".into()));
        }
        let _ = stream.set_read_timeout(Some(left));
        let n = match stream.read(&mut buf) {
            Ok(0) => return Err(Bad(400, "the connection closed before a request".into())),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(Bad(408, "the request did not arrive in time".into())),
        };
        head.extend_from_slice(&buf[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&head) {
            Ok(httparse::Status::Complete(_)) => return Ok(request_of(&req)),
            Ok(httparse::Status::Partial) if head.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => {
                return Err(Bad(
                    431,
                    format!("a request head longer than {MAX_HEAD} bytes"),
                ));
            }
            Err(e) => return Err(Bad(400, format!("not an HTTP request: {e}"))),
        }
    }
}

fn request_of(req: &httparse::Request<'_, '_>) -> Request {
    let target = req.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Request {
        method: req.method.unwrap_or("").to_owned(),
        path: path.to_owned(),
        query: form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
        headers: req
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn write_response(stream: &mut TcpStream, r: &Response, head_only: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(r.body.as_bytes())?;
    }
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // Read what the client still sends (briefly), so the close is not a reset.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = stream.read(&mut [0u8; 512]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, raw: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn endpoint(limits: Limits) -> SocketAddr {
        let l = bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let handler: Handler = Arc::new(|r: &Request| {
            Response::text(200, format!("{} {:?}", r.path, r.param("target")))
        });
        serve(l, limits, handler).unwrap();
        addr
    }

    /// A request's path and query reach the handler decoded; anything else is answered with a
    /// status and its reason.
    #[test]
    fn requests_and_bad_requests() {
        let addr = endpoint(Limits::default());
        let ok = get(
            addr,
            "GET /probe?target=a%3A1&x=2 HTTP/1.1\r\nHost: h\r\n\r\n",
        );
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("/probe Some(\"a:1\")\n"), "{ok}");
        let post = get(addr, "POST / HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        let junk = get(addr, "\x01\x02\x03 nonsense\r\n\r\n");
        assert!(junk.starts_with("HTTP/1.1 400 "), "{junk}");
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(MAX_HEAD));
        assert!(get(addr, &long).starts_with("HTTP/1.1 431 "));
    }

    /// Connections that say nothing hold their slots only until their deadline; one past the
    /// limit is told the server is busy, and once they are cut off a request is served again.
    #[test]
    fn silent_connections_are_bounded_and_cut_off() {
        let addr = endpoint(Limits {
            connections: 2,
            read_timeout: Duration::from_millis(300),
            ..Limits::default()
        });
        let silent: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(50));
        let busy = get(addr, "GET / HTTP/1.1\r\n\r\n");
        assert!(busy.starts_with("HTTP/1.1 503 "), "{busy}");
        assert!(busy.contains("busy: 2 connections"), "{busy}");
        let mut served = String::new();
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(100));
            served = get(addr, "GET / HTTP/1.1\r\n\r\n");
            if served.starts_with("HTTP/1.1 200") {
                break;
            }
        }
        assert!(served.starts_with("HTTP/1.1 200"), "{served}");
        drop(silent);
    }

    /// `:PORT` listens on every interface; a bad address is named.
    #[test]
    fn addresses() {
        let l = bind(":0").unwrap();
        assert!(l.local_addr().unwrap().ip().is_unspecified());
        let e = bind("nonsense").unwrap_err().to_string();
        assert!(e.contains("'nonsense' is not an address"), "{e}");
    }
}
