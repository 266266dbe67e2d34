//! memproxy: an OpenAI-compatible proxy that gives any chat app long-term memory.
//!
//! A chat app points at memproxy instead of its LLM; memproxy forwards to any OpenAI-compatible
//! upstream and manages memory on the way (see `docs/architecture.md`). This crate is both the
//! `memproxy` binary and a library, so tests and benchmarks drive the real server in-process.

pub mod agent;
pub mod bench;
pub mod cli;
pub mod config;
pub mod conversation;
pub mod dates;
pub mod embed;
pub mod error;
pub mod eval;
pub mod hooks;
pub mod identity;
pub mod keys;
pub mod language;
pub mod limits;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod mock;
pub mod mode;
pub mod openai;
pub mod postprocess;
pub mod secret;
pub mod server;
pub mod store;
pub mod strategy;
pub mod text;
pub mod tokens;
pub mod upstream;
pub mod vector;
