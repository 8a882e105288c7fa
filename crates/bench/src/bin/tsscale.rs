//! tsscale: many concurrent clients against each server model (see `tsperf_bench::cli::tsscale`).

fn main() -> std::process::ExitCode {
    tsperf_bench::cli::tsscale::main()
}
