//! tsperf-bench's end-to-end tests: its programs (tspeers, tsscale, tsverdicts) run as processes
//! against the real tsserver and tsclient, which `cargo test --workspace` builds beside them.
//! The harness is the root package's (tests/e2e/common.rs). Every wait has a deadline.

#[path = "../../../../tests/e2e/common.rs"]
mod common;

mod peers;
mod render;
mod scale;
mod usage;
mod verdicts;
