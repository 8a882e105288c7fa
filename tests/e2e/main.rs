//! tsperf's end-to-end tests: the real binaries over real sockets on port 0, one module per
//! area, one test target (so the suite links once). Every wait has a deadline.

mod common;

mod auth;
mod bounds;
mod client_log;
mod client_phases;
mod console;
mod faults;
mod first_hour;
mod grid;
mod hardening;
mod hardening3;
mod json_modes;
mod latency;
mod layout;
mod logs;
mod nonblocking;
mod package;
mod parallel;
mod peer_text;
mod report_inputs;
mod reverse;
mod save;
mod sessions;
mod shutdown;
mod steady;
mod strategies;
mod stream;
mod threads;
mod timed;
mod usage;
mod why;
