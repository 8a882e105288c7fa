//! tspeers: tsperf against iperf3 (see `tsperf::cli::tspeers`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tspeers::main()
}
