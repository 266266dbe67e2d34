//! `memproxy migrate --from <data dir> --to postgres://…`: copies every user of every tenant from
//! a SQLite data directory into a PostgreSQL database, vectors included (nothing is embedded
//! again), then checks that the copy exports exactly as the original.
//!
//! Each user is one export → import (all or nothing per user, see [`crate::store::Transfer`]);
//! agents' tags are copied beside. Users already in the target are refused before anything is
//! written. Queued jobs are not copied: stop memproxy and let its queue drain first.

use std::path::Path;

use anyhow::{bail, Context};

use crate::store::postgres::PostgresStore;
use crate::store::prelude::*;
use crate::store::sqlite::SqliteStore;
use crate::store::{Page, UserScope};

pub fn run(from: &Path, to: &str, pool_size: usize) -> anyhow::Result<()> {
    let file = from.join("memproxy.db");
    if !file.is_file() {
        bail!("no memproxy database at {}", file.display());
    }
    let source = SqliteStore::open(&file).context("opening the SQLite store")?;
    let target = PostgresStore::connect(to, pool_size).context("connecting to PostgreSQL")?;
    let pending: usize = ["queued", "running"]
        .iter()
        .map(|state| {
            source
                .list_jobs(Some(state), Page::default())
                .map(|j| j.len())
        })
        .sum::<Result<usize, _>>()?;
    if pending > 0 {
        eprintln!(
            "warning: {pending} post-processing jobs are not finished in {}; they are not copied \
             (their turns are, and are learned from at the conversation's next turn)",
            from.display()
        );
    }
    let mut users = Vec::new();
    for tenant in source.list_tenants()? {
        for user in source.list_users(&tenant)? {
            users.push(UserScope::new(tenant.clone(), user));
        }
    }
    let present: Vec<String> = users
        .iter()
        .filter_map(|scope| match target.find_user(scope) {
            Ok(Some(_)) => Some(Ok(format!("{}/{}", scope.tenant, scope.user))),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        })
        .collect::<Result<_, _>>()?;
    if !present.is_empty() {
        bail!(
            "the target already has {} of these users ({}); migrate copies into a database without them",
            present.len(),
            present.join(", ")
        );
    }
    let mut total = crate::store::ImportCounts::default();
    for scope in &users {
        let who = format!("{}/{}", scope.tenant, scope.user);
        let Some(bundle) = source.export_user(scope)? else {
            continue;
        };
        let counts = target
            .import_user(scope, &bundle)
            .with_context(|| format!("copying {who}"))?;
        for agent in source.list_agents(scope)? {
            target.ensure_agent(scope, &agent.name, &[])?;
            target.set_agent_tags(scope, &agent.name, &agent.tags)?;
        }
        let copied = target.export_user(scope)?;
        if copied.as_ref() != Some(&bundle) {
            bail!("{who}: the copy does not export as the original did");
        }
        println!(
            "{who}: {} conversations, {} messages, {} memories, {} blocks, {} passages, {} summaries",
            counts.conversations,
            counts.messages,
            counts.memories,
            counts.blocks,
            counts.passages,
            counts.summaries
        );
        total.add(&counts);
    }
    println!(
        "migrated {} users: {} messages, {} memories, {} blocks, {} passages; each copy verified",
        users.len(),
        total.messages,
        total.memories,
        total.blocks,
        total.passages
    );
    Ok(())
}
