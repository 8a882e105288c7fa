//! tsserver: receive tsclient transfers, verify every byte, and report back (see
//! `tsperf::cli::tsserver`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsserver::main()
}
