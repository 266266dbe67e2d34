//! The `memproxy` command; everything lives in the library ([`memproxy::cli`]).

fn main() -> std::process::ExitCode {
    memproxy::cli::main()
}
