//! tsscale: many concurrent clients against each server model (see `tsperf::cli::tsscale`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsscale::main()
}
