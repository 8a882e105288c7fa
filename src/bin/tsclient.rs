//! tsclient: send a file to a tsserver and report what both ends measured (see
//! `tsperf::cli::tsclient`).

fn main() -> std::process::ExitCode {
    tsperf::cli::tsclient::main()
}
