//! tscipher: the cipher's own cost beside tsperf over TLS (see `tsperf_bench::cli::tscipher`).

fn main() -> std::process::ExitCode {
    tsperf_bench::cli::tscipher::main()
}
