//! tsperf's binaries and their command-line front ends: the flags of each program, their
//! checks, and the run that calls into the library crates (`tsperf-client`, `tsperf-server`,
//! `tsperf-lab`). Nothing depends on this crate.

pub mod cli;
