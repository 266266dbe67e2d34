//! Memory strategies behind one interface: given the client's request, produce what the upstream
//! sees. `passthrough` forwards as is; `window` keeps the newest turns within a token budget;
//! `summary` adds the conversation's rolling summary of the dropped turns; `implicit` adds
//! retrieved memories too (architecture §2). `explicit` runs an agent loop instead (not here).

pub mod compact;
pub mod inject;
mod plan;
mod preprocess;
mod tasks;

pub use crate::config::memory::{MemoryConfig, MemoryLlmConfig};
pub use inject::Placement;
pub use plan::{cut_keeps, Plan};
pub use preprocess::{prepare, turns_of, Rewrite};
pub use tasks::is_client_task;
