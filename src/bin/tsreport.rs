//! tsreport: render a grid's tables and charts again (see `tsperf::cli::tsreport`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsreport::main()
}
