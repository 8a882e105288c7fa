//! tsmatrix: run the comparison grid (see `tsperf::cli::tsmatrix`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsmatrix::main()
}
