//! Fuzzing on stable Rust (issue 14): property tests that throw generated and mutated inputs at
//! every parser memproxy has, in-process and over real HTTP, and at the memory gates.
//!
//! Each target runs `MEMPROXY_FUZZ_CASES` cases (its default when unset: a bounded run for CI) and
//! prints how many it ran. A long run on demand:
//!
//! ```sh
//! MEMPROXY_FUZZ_CASES=20000 cargo test --release --test fuzz -- --nocapture --test-threads 2
//! ```
//!
//! A failing case is shrunk to the smallest input that still fails, and its seed is saved under
//! `tests/fuzz/regressions/` (commit it: it is replayed first on every later run).

mod config_file;
mod gates;
mod http;
mod json;
mod parsers;
mod repair;
mod streams;
mod transfer;

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

/// Runs one target: `MEMPROXY_FUZZ_CASES` cases, else `default` (sized for CI); prints how many
/// ran; on a failure, panics with the smallest failing input proptest found and saves its seed
/// under `tests/fuzz/regressions/` (commit it: it is replayed first on every later run).
pub fn run<S: Strategy>(
    name: &'static str,
    default: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let cases = std::env::var("MEMPROXY_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default);
    let file: &'static str =
        Box::leak(format!("tests/fuzz/regressions/{name}.txt").into_boxed_str());
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 2_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..Config::default()
    });
    let count = AtomicU64::new(0);
    let result = runner.run(&strategy, |input| {
        count.fetch_add(1, Ordering::Relaxed);
        test(input)
    });
    eprintln!("fuzz {name}: {} cases", count.load(Ordering::Relaxed));
    if let Err(error) = result {
        panic!("fuzz {name}: {error}");
    }
}
