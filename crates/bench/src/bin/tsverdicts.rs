//! tsverdicts: the verdict's truth table (see `tsperf_bench::cli::tsverdicts`).

fn main() -> std::process::ExitCode {
    tsperf_bench::cli::tsverdicts::main()
}
