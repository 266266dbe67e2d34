//! `memproxy check [--repair] [--json]`: the consistency check of a data directory or database
//! (see `memory::check`), printed as a table (or JSON); the exit status is 1 while an error is
//! left. Safe beside a running server: nothing is changed without `--repair`, and a job counts as
//! abandoned only after its lease.

use crate::config::Config;
use crate::memory::check::Status;

pub async fn run(config: &Config, repair: bool, json: bool) -> anyhow::Result<()> {
    let memory = crate::memory::MemoryService::from_config(config).await?;
    let report = memory.check(repair, config.memory.job_lease).await?;
    memory.flush().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for finding in &report.findings {
            let status = match finding.status {
                Status::Ok => "ok",
                Status::Warning => "warning",
                Status::Error => "ERROR",
            };
            let repaired = if finding.repaired > 0 {
                format!(" (repaired {})", finding.repaired)
            } else {
                String::new()
            };
            println!(
                "{status:<8} {:<20} {:>6}  {}{repaired}",
                finding.check, finding.found, finding.detail
            );
        }
    }
    if !report.ok {
        anyhow::bail!(
            "the check found errors{}",
            if repair {
                " it cannot repair"
            } else {
                " (try --repair)"
            }
        );
    }
    Ok(())
}
