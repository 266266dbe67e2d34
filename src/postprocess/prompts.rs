//! The memory prompts: built in (`config/prompts/*.md`, our own words), overridable by files of the
//! same names in `memory.prompts_dir`, loaded once at start-up.

use std::path::Path;

#[derive(Clone, Debug)]
pub struct Prompts {
    pub extract: String,
    pub reconcile: String,
    pub summarize: String,
    /// Explicit mode's recursive summary, as dated notes (`agent::notes`).
    pub summarize_notes: String,
    pub consolidate: String,
    /// The change check's two questions ([`super::changed`]): the older note rewritten after the
    /// user's message, and whether two notes can both be true.
    pub changed: String,
    pub both_true: String,
}

impl Prompts {
    pub fn load(dir: Option<&Path>) -> std::io::Result<Prompts> {
        let read = |name: &str, builtin: &str| -> std::io::Result<String> {
            match dir.map(|d| d.join(name)) {
                Some(path) if path.exists() => std::fs::read_to_string(path),
                _ => Ok(builtin.to_owned()),
            }
        };
        Ok(Prompts {
            extract: read(
                "extract.md",
                include_str!("../../config/prompts/extract.md"),
            )?,
            reconcile: read(
                "reconcile.md",
                include_str!("../../config/prompts/reconcile.md"),
            )?,
            summarize: read(
                "summarize.md",
                include_str!("../../config/prompts/summarize.md"),
            )?,
            summarize_notes: read(
                "summarize-notes.md",
                include_str!("../../config/prompts/summarize-notes.md"),
            )?,
            consolidate: read(
                "consolidate.md",
                include_str!("../../config/prompts/consolidate.md"),
            )?,
            changed: read(
                "changed.md",
                include_str!("../../config/prompts/changed.md"),
            )?,
            both_true: read(
                "both-true.md",
                include_str!("../../config/prompts/both-true.md"),
            )?,
        })
    }
}
