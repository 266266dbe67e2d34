//! The `memproxy` command; everything lives in the library ([`memproxy::cli`]).

/// mimalloc instead of the system allocator: under concurrent requests glibc's malloc spends its
/// time on arena locks (SQLite, JSON and hyper all allocate per request), which a profile of
/// `memproxy bench proxy` showed as the largest cost; mimalloc's per-thread heaps have none.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    memproxy::cli::main()
}
