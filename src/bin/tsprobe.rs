//! tsprobe: a Prometheus exporter that runs one verified tsclient transfer per scrape (see
//! `tsperf::cli::tsprobe`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsprobe::main()
}
