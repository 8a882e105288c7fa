//! tsdocs: write the man pages and shell completions (see `tsperf::cli::docs`).

fn main() -> std::process::ExitCode {
    tsperf::cli::docs::main()
}
