//! tsgen: write the deterministic test file (see `tsperf::cli::tsgen`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsgen::main()
}
