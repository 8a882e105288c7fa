//! tsperf's end-to-end tests: the real binaries over real sockets on port 0, one module per
//! area, one test target (so the suite links once). Every wait has a deadline.

mod common;

mod auth;
mod client_log;
mod client_phases;
mod cold;
mod console;
mod faults;
mod fleet;
mod grid;
mod interrupt;
mod iperf3_flags;
mod json_modes;
mod ktls;
mod ladder;
mod latency;
mod layout;
mod logs;
mod nonblocking;
mod package;
mod package_probe;
mod parallel;
mod peer_text;
mod progress;
mod prometheus;
mod pscheduler;
mod report;
mod report_inputs;
mod reverse;
mod save;
mod sending;
mod server_bounds;
mod sessions;
mod shutdown;
mod strategies;
mod stream;
mod threads;
mod timed;
mod tls;
mod untrusted_server;
mod usage;
mod why;
