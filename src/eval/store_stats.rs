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
    /// Memories background consolidation retired (junk, contained in another, merged away).
    #[serde(default)]
    pub consolidation_retired: u64,
    /// Memories consolidation's merges wrote.
    #[serde(default)]
    pub consolidation_added: u64,
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
        self.consolidation_retired += other.consolidation_retired;
        self.consolidation_added += other.consolidation_added;
    }

    /// Live memories before consolidation changed them: what extraction alone would have left.
    pub fn before_consolidation(&self) -> u64 {
        (self.stored + self.consolidation_retired).saturating_sub(self.consolidation_added)
    }

    /// Adds one job report ("2 added, 1 duplicate, 3 rejected (ungrounded)"; a consolidation's
    /// "1 junk retired, 2 contained retired, 3 merged into 1 (3 retired, 1 new)").
    fn count_report(&mut self, report: &str) {
        for item in report.split(", ") {
            let number = |text: &str| text.trim().parse::<u64>().ok();
            if let Some((_, inner)) = item.split_once(" merged into ") {
                let retired = inner
                    .split_once('(')
                    .and_then(|(_, r)| r.strip_suffix(" retired"));
                self.consolidation_retired += retired.and_then(number).unwrap_or(0);
                continue;
            }
            if let Some(added) = item.strip_suffix(" new)").and_then(number) {
                self.consolidation_added += added;
                continue;
            }
            if let Some(count) = item
                .strip_suffix(" junk retired")
                .or_else(|| item.strip_suffix(" contained retired"))
                .and_then(number)
            {
                self.consolidation_retired += count;
                continue;
            }
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
        stats.count_report(
            "1 junk retired, 2 contained retired, 3 merged into 1 (3 retired, 1 new)",
        );
        stats.count_report("merge of 2 rejected (loses_fact)");
        stats.stored = 10;
        assert_eq!(stats.consolidation_retired, 6);
        assert_eq!(stats.consolidation_added, 1);
        assert_eq!(stats.before_consolidation(), 15);
        assert_eq!(stats.rejected_total(), 5);
    }
}
