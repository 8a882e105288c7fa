//! tsverdicts: the verdict's truth table (see `tsperf::cli::tsverdicts`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsverdicts::main()
}
