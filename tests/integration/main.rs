//! Integration tests: one binary (short link times), one module per feature. Every test drives the
//! real server over real sockets against the scripted upstream in `memproxy::mock`.

mod common;

mod admin;
mod agent_messaging;
mod auth;
mod backlog;
mod branches;
mod browser;
mod chat;
mod conformance;
mod conformance_agents;
mod conformance_memory;
mod conformance_transfer;
mod console;
mod consolidation;
mod errors;
mod eval;
mod explicit;
mod explicit_cache;
mod explicit_edges;
mod explicit_hygiene;
mod explicit_memory;
mod explicit_tools;
mod explicit_wire;
mod exposure;
mod implicit;
mod jobs;
mod lifecycle;
mod mcp;
mod memory;
mod memory_storage;
mod memory_transfer;
mod messages;
mod migrate;
mod native;
mod postgres_faults;
mod quality;
mod recency;
mod relay;
mod replicas;
mod responses;
mod sdk;
mod shared_blocks;
mod streaming;
mod user_keys;
