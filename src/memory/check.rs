//! The consistency check (`memproxy check`, `GET /memproxy/v1/check`): what a crash, a full disk
//! or a bug could have left behind, and the repairs that lose nothing (`--repair`).
//!
//! A check is an **error** when memory is wrong until someone acts (a damaged database, rows that
//! belong to nothing, extraction that would skip turns, a blank memory), and a **warning** when
//! memproxy puts it right by itself while serving (an index file rebuilt when next used, a job
//! taken again when its lease ends, rows embedded by the backlog): the repair just does it now.

use schemars::JsonSchema;
use serde::Serialize;

use super::{MemoryResult, MemoryService};
use crate::store::{now_ms, Corpus};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Warning,
    Error,
}

/// One check: what it looked at, what it found, what the repair did.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Finding {
    pub check: String,
    pub status: Status,
    /// How many things were found wrong (0 when the check is ok); rows without a vector are
    /// counted after the repair embedded what it could.
    pub found: u64,
    pub detail: String,
    /// How many of them the repair put right (0 without `repair`).
    pub repaired: u64,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CheckReport {
    /// No error is left (warnings allowed).
    pub ok: bool,
    pub repair: bool,
    pub findings: Vec<Finding>,
}

/// Rows counted at most per corpus when looking for missing vectors.
const COUNT_LIMIT: usize = 100_000;

fn finding(check: &str, bad: Status, found: u64, detail: String, repaired: u64) -> Finding {
    Finding {
        check: check.to_owned(),
        status: if found == 0 { Status::Ok } else { bad },
        found,
        detail,
        repaired,
    }
}

impl MemoryService {
    /// Runs every check; with `repair`, puts right what can be without losing anything. `lease`:
    /// how long a running job may go without a sign of life before it counts as abandoned.
    pub async fn check(
        &self,
        repair: bool,
        lease: std::time::Duration,
    ) -> MemoryResult<CheckReport> {
        let before = now_ms() - lease.as_millis() as i64;
        // Rows without a vector are embedded first, so the finding counts what is still missing
        // (the backlog embedder may take some of them meanwhile).
        let embedded = if repair {
            self.reindex().await? as u64
        } else {
            0
        };
        let (mut out, stalled, states) = self
            .blocking(move |store, vectors| {
                let mut out = Vec::new();
                let problems = store.storage_problems()?;
                out.push(finding(
                    "database",
                    Status::Error,
                    problems.len() as u64,
                    if problems.is_empty() { "the database finds its storage intact".to_owned() } else { problems.join("; ") },
                    0,
                ));
                let orphans = store.orphan_rows(repair)?;
                let count: u64 = orphans.iter().map(|(_, n)| n).sum();
                let tables: Vec<String> = orphans.iter().map(|(t, n)| format!("{t}: {n}")).collect();
                out.push(finding(
                    "orphan rows",
                    Status::Error,
                    count,
                    if count == 0 { "every row belongs to a user, conversation or block that exists".to_owned() } else { format!("rows whose parent is gone ({}){}", tables.join(", "), if repair { "; deleted" } else { "" }) },
                    if repair { count } else { 0 },
                ));
                let past = store.progress_past_end(repair)?;
                out.push(finding(
                    "extraction progress",
                    Status::Error,
                    past,
                    if past == 0 { "no conversation's progress is past its last turn".to_owned() } else { format!("conversations whose extraction progress is past their last turn: their next turns would not be learned from{}", if repair { "; set back to the last turn" } else { "" }) },
                    if repair { past } else { 0 },
                ));
                let blank = store.blank_memories()?;
                out.push(finding(
                    "blank memories",
                    Status::Error,
                    blank,
                    if blank == 0 { "every live memory has text".to_owned() } else { "live memories without text (delete them in the console or the management API)".to_owned() },
                    0,
                ));
                let mut missing = Vec::new();
                for corpus in Corpus::ALL {
                    let rows = store.rows_to_embed(corpus, vectors.model(), COUNT_LIMIT)?.len();
                    if rows > 0 {
                        missing.push((corpus, rows as u64));
                    }
                }
                let total: u64 = missing.iter().map(|(_, n)| n).sum();
                let listed: Vec<String> = missing.iter().map(|(c, n)| format!("{}: {n}", c.as_str())).collect();
                out.push(finding(
                    "vectors",
                    Status::Warning,
                    total,
                    if total == 0 { format!("every live row has a vector of {}", vectors.model()) } else { format!("rows without a vector of {} ({}), found by keywords until the backlog embeds them", vectors.model(), listed.join(", ")) },
                    embedded,
                ));
                let files = vectors.check_files(repair)?;
                let wrong = (files.stale.len() + files.stray.len()) as u64;
                out.push(finding(
                    "vector index files",
                    Status::Warning,
                    wrong,
                    if wrong == 0 { format!("{} index files match the database", files.indexes) } else { format!("stale (rebuilt when next used): {:?}; stray: {:?}", files.stale, files.stray) },
                    if repair { wrong } else { 0 },
                ));
                let stalled = store.stalled_jobs(before)?;
                let states = store.job_states()?;
                Ok((out, stalled, states))
            })
            .await?;
        // Abandoned jobs go back to the queue as a failed attempt (the way a worker's death is
        // counted), so a job that kills its worker every time ends up failed, not looping.
        let mut requeued = 0;
        if repair {
            for id in &stalled {
                let error = "its worker stopped (no sign of life for a lease); queued again by memproxy check";
                self.blocking({
                    let id = *id;
                    move |store, _| Ok(store.fail_job(id, error, Some(now_ms()))?)
                })
                .await?;
                requeued += 1;
            }
        }
        out.push(finding(
            "running jobs",
            Status::Warning,
            stalled.len() as u64,
            if stalled.is_empty() { "every running job has shown a sign of life within its lease".to_owned() } else { format!("jobs running with no sign of life for a lease (ids {stalled:?}): a worker takes them again") },
            requeued,
        ));
        let failed = states
            .iter()
            .find(|(s, _)| s == "failed")
            .map_or(0, |(_, n)| *n);
        let summary: Vec<String> = states.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        out.push(finding(
            "failed jobs",
            Status::Warning,
            failed,
            format!(
                "jobs by state: {}",
                if summary.is_empty() {
                    "none".to_owned()
                } else {
                    summary.join(", ")
                }
            ),
            0,
        ));
        Ok(CheckReport {
            ok: out
                .iter()
                .all(|f| f.status != Status::Error || f.repaired >= f.found),
            repair,
            findings: out,
        })
    }
}
