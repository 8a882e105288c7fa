//! tspeers: tsperf against iperf3 (see `tsperf_bench::cli::tspeers`).

fn main() -> std::process::ExitCode {
    tsperf_bench::cli::tspeers::main()
}
