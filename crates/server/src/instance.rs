//! A server as a value (issue 34): its settings and its own state (its stop, its open
//! connections), so nothing of a server hides in a process-wide static and two servers can run
//! in one process, one stopping while the other serves (a test does).

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Result;

use crate::ServerConfig;
use crate::console::{Console, Stream};
use crate::sessions::Sessions;
use tsperf_metrics::server::{Live, ServerMetrics};
use tsperf_stream::send::pattern::Pattern;

/// Scrapes of `--metrics` served at once (a few Prometheus servers scrape a host); one more is
/// told 503.
pub(crate) const METRICS_CONNECTIONS: usize = 8;

/// A server: its settings and its state. Clones share the state (a connection's thread holds
/// one).
#[derive(Clone)]
pub struct Server {
    /// Its settings.
    pub cfg: ServerConfig,
    state: Arc<State>,
}

/// What a server keeps while it runs.
struct State {
    /// Its stdout and stderr.
    console: Arc<Console>,
    /// Set once the server has been asked to stop (SIGINT or SIGTERM).
    stopping: AtomicBool,
    /// Set when asked to stop a second time: the grace period ends at once.
    stop_now: AtomicBool,
    /// Connections open, in every event loop (`--threads`) or thread of the blocking model:
    /// `--max-clients` bounds them all together, and a stop says how many it waits for.
    open: AtomicUsize,
    /// What to call to wake the server's loops waiting for work, so they see the stop.
    wakers: Mutex<Vec<Box<dyn Fn() + Send>>>,
    /// The `--parallel` sessions it follows.
    sessions: Sessions,
    /// The number the next connection's log lines and events go by (from 1).
    next_conn: AtomicU64,
    /// The generated text its reverse streams send, made once on the first's asking.
    text: Arc<Pattern>,
    /// With `--once`: the one run it serves.
    once: Option<crate::once::Once>,
    /// Its counters, served by `--metrics`.
    metrics: ServerMetrics,
}

impl Server {
    /// A server of `cfg`, not yet serving.
    pub fn new(cfg: ServerConfig) -> Server {
        Server::with_console(cfg, Console::start())
    }

    /// A server of `cfg` writing its output through `console` (one its diagnostics share).
    pub fn with_console(cfg: ServerConfig, console: Arc<Console>) -> Server {
        Server {
            state: Arc::new(State {
                console,
                stopping: AtomicBool::default(),
                stop_now: AtomicBool::default(),
                open: AtomicUsize::default(),
                wakers: Mutex::default(),
                sessions: Sessions::default(),
                next_conn: AtomicU64::default(),
                text: Arc::default(),
                once: cfg.once.then(crate::once::Once::default),
                metrics: ServerMetrics::new(),
            }),
            cfg,
        }
    }

    /// Its stdout and stderr.
    pub fn console(&self) -> &Arc<Console> {
        &self.state.console
    }

    /// Its counters.
    pub fn metrics(&self) -> &ServerMetrics {
        &self.state.metrics
    }

    /// Its metrics page, as a scrape finds it now.
    pub fn metrics_page(&self) -> String {
        let budget = &self.cfg.send_budget;
        self.state.metrics.render(Live {
            open: self.state.open.load(Ordering::Acquire) as u64,
            lines_dropped: u64::from(self.state.console.dropped()),
            send_buffers_reserved: budget.reserved(),
            send_buffers_budget: budget.limit(),
        })
    }

    /// Serves its metrics page at `/metrics` on `listener` (`--metrics`), on threads of its
    /// own, apart from the data port: at most `METRICS_CONNECTIONS` (8) scrapes at once, taken
    /// from the descriptors [`fds::RESERVE`](crate::fds::RESERVE) keeps beside the clients'.
    pub fn serve_metrics(&self, listener: TcpListener) -> std::io::Result<()> {
        use tsperf_metrics::http::{self, Handler, Limits, Request, Response};
        let srv = self.clone();
        let handler: Handler = Arc::new(move |r: &Request| match r.path.as_str() {
            "/metrics" => Response::metrics(srv.metrics_page()),
            "/" => Response::text(200, "tsserver: its metrics are at /metrics"),
            other => Response::text(404, format!("{other}: not here; try /metrics")),
        });
        let limits = Limits {
            connections: METRICS_CONNECTIONS,
            ..Limits::default()
        };
        http::serve(listener, limits, handler).map(drop)
    }

    /// Serves `listener` with the configured I/O model until stopped, or one client's run with
    /// `--once`; then the result says whether each of the run's connections completed.
    pub fn serve(&self, listener: TcpListener) -> Result<bool> {
        if self.cfg.blocking {
            crate::blocking::serve(listener, self)
        } else {
            crate::event_loop::serve_all(listener, self)
        }
    }

    /// True once the server has been asked to stop.
    pub fn stopping(&self) -> bool {
        self.state.stopping.load(Ordering::Acquire)
    }

    /// True once the server has been asked to stop twice: transfers in flight are cut off now.
    pub fn stopping_now(&self) -> bool {
        self.state.stop_now.load(Ordering::Acquire)
    }

    /// Asks the server to stop: it accepts no more connections, lets transfers in flight
    /// finish within the grace period, aborts the rest, and returns from `serve`. Asked again,
    /// it ends the grace period at once.
    pub fn request_stop(&self) {
        if self.state.stopping.swap(true, Ordering::AcqRel) {
            self.state.stop_now.store(true, Ordering::Release);
        }
        self.wake();
    }

    /// Ends the grace period: transfers still in flight are cut off now ([`Server::stopping_now`]),
    /// as a second signal would.
    pub fn cut_off(&self) {
        self.state.stopping.store(true, Ordering::Release);
        self.state.stop_now.store(true, Ordering::Release);
    }

    /// On every SIGINT or SIGTERM `signals` catch ([`catch_stop_signals`]): the first stops
    /// the server after `grace`, the second at once. Each says so on stderr.
    pub fn stop_on_signals(
        &self,
        mut signals: signal_hook::iterator::Signals,
        grace: Duration,
    ) -> std::io::Result<()> {
        let server = self.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for _ in signals.forever() {
                    server
                        .console()
                        .message(Stream::Err, &server.stop_notice(grace));
                    server.request_stop();
                }
            })?;
        Ok(())
    }

    /// What a stop request says: what it waits for, and how to stop at once.
    fn stop_notice(&self, grace: Duration) -> String {
        let open = self.state.open.load(Ordering::Acquire);
        if open == 0 {
            "tsserver: stopping: no transfers in flight\n".to_owned()
        } else if self.stopping() {
            "tsserver: stopping now: transfers in flight are cut off\n".to_owned()
        } else {
            format!(
                "tsserver: stopping: {} in flight {} {} s to finish (press Ctrl-C again, or \
                 send a second SIGTERM, to stop now)\n",
                tsperf_results::units::count(open as u64, "connection"),
                if open == 1 { "has" } else { "have" },
                grace.as_secs_f64()
            )
        }
    }

    /// Registers how to wake one of the server's loops when a stop is requested. A stop asked
    /// before (a signal just after the listening line) wakes it at once: under the lock, either
    /// [`Server::request_stop`] sees this waker or this sees its flag.
    pub(crate) fn on_stop(&self, wake: impl Fn() + Send + 'static) {
        let mut wakers = self
            .state
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.stopping() {
            wake();
        }
        wakers.push(Box::new(wake));
    }

    /// The count of open connections.
    pub(crate) fn open(&self) -> &AtomicUsize {
        &self.state.open
    }

    /// The `--parallel` sessions it follows.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.state.sessions
    }

    /// With `--once`, the one run it serves.
    pub(crate) fn once(&self) -> Option<&crate::once::Once> {
        self.state.once.as_ref()
    }

    /// With `--once`: the connection from `peer` ended, `completed` or not. The run's result
    /// once it is over (or was already).
    pub(crate) fn once_ended(&self, peer: std::net::SocketAddr, completed: bool) -> Option<bool> {
        let once = self.once()?;
        let now = std::time::Instant::now();
        once.ended(peer, completed, now);
        once.over(now, self.cfg.policy.hello_timeout)
    }

    /// With `--once`: the run's result once it is over.
    pub(crate) fn once_over(&self) -> Option<bool> {
        self.once()?
            .over(std::time::Instant::now(), self.cfg.policy.hello_timeout)
    }

    /// Wakes the server's loops, as a stop does, without asking them to stop: a `--once` run
    /// that is over is looked at.
    pub(crate) fn wake(&self) {
        for wake in self
            .state
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            wake();
        }
    }

    /// The generated text its reverse streams send.
    pub(crate) fn text(&self) -> &Arc<Pattern> {
        &self.state.text
    }

    /// The number of a connection that begins a transfer: 1, 2, 3 ... for this server.
    pub(crate) fn next_conn(&self) -> u64 {
        self.state.next_conn.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Catches SIGINT and SIGTERM from now on, for a server to stop on once it is made
/// ([`Server::stop_on_signals`]): a signal during start-up waits for it, rather than killing
/// the process.
pub fn catch_stop_signals() -> std::io::Result<signal_hook::iterator::Signals> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
}
