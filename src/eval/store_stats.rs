//! What a replay left in the memory store, beside the scores: facts stored and retired, updates,
//! exact duplicates skipped and facts the gates refused (by reason), read from the store and from
//! the finished jobs' reports once the queue is drained.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::{Page, Store, StoreResult, UserScope};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreStats {
    /// Live memories at the end.
    pub stored: u64,
    /// Memories retired as no longer true (kept as history).
    pub retired: u64,
    /// Memories rewritten in place by an update.
    pub updated: u64,
    /// Extracted facts skipped as exact duplicates of one stored or of one in the same answer.
    pub duplicates: u64,
    /// Extracted facts the gates refused, by reason.
    pub rejected: BTreeMap<String, u64>,
}

impl StoreStats {
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    pub fn add(&mut self, other: &StoreStats) {
        self.stored += other.stored;
        self.retired += other.retired;
        self.updated += other.updated;
        self.duplicates += other.duplicates;
        for (reason, count) in &other.rejected {
            *self.rejected.entry(reason.clone()).or_default() += count;
        }
    }

    /// Adds one job report ("2 added, 1 duplicate, 3 rejected (ungrounded)").
    fn count_report(&mut self, report: &str) {
        for item in report.split(", ") {
            let Some((count, label)) = item.split_once(' ') else {
                continue;
            };
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            if label == "duplicate" {
                self.duplicates += count;
            } else if let Some(reason) = label
                .strip_prefix("rejected (")
                .and_then(|r| r.strip_suffix(')'))
            {
                *self.rejected.entry(reason.to_owned()).or_default() += count;
            }
        }
    }
}

/// The stats of `scope`'s memory in a store whose every job was `scope`'s (one replay).
pub fn read(store: &dyn Store, scope: &UserScope) -> StoreResult<StoreStats> {
    let all = Page {
        limit: 100_000,
        offset: 0,
    };
    let mut stats = StoreStats::default();
    for memory in store.list_memories(scope, true, all)? {
        if memory.valid_until_ms.is_some() {
            stats.retired += 1;
        } else {
            stats.stored += 1;
        }
    }
    stats.updated = store
        .memory_events(scope)?
        .iter()
        .filter(|e| e.action == "update")
        .count() as u64;
    for state in ["done", "failed"] {
        for job in store.list_jobs(Some(state), all)? {
            if let Some(report) = &job.report {
                stats.count_report(report);
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::StoreStats;

    #[test]
    fn reads_job_reports() {
        let mut stats = StoreStats::default();
        stats.count_report("2 added, 1 duplicate, 3 rejected (ungrounded), 1 rejected (question)");
        stats.count_report("no new facts");
        stats.count_report("1 rejected (ungrounded)");
        assert_eq!(stats.duplicates, 1);
        assert_eq!(stats.rejected["ungrounded"], 4);
        assert_eq!(stats.rejected["question"], 1);
        assert_eq!(stats.rejected_total(), 5);
    }
}
