//! `memproxy memories …` and `memproxy reindex`: the memory layer from the command line, working on
//! the data directory directly (safe beside a running proxy: SQLite arbitrates, and the proxy
//! notices changed vector generations and reloads).

use std::io::Read;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::config::Config;
use crate::memory::RetrievalRequest;
use crate::store::{Corpus, Inserted, Page, UserScope};

#[derive(Args)]
pub struct Who {
    /// The user whose memory to work on.
    #[arg(long)]
    pub user: String,
    /// The tenant (the proxy key's tenant; `default` when auth is off).
    #[arg(long, default_value = "default")]
    pub tenant: String,
}

#[derive(Subcommand)]
pub enum MemoriesCommand {
    /// List a user's memories (JSON, one per line).
    List {
        #[command(flatten)]
        who: Who,
        /// Include invalidated memories.
        #[arg(long)]
        include_invalid: bool,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Hybrid search over a user's memories (and past turns with --messages).
    Search {
        #[command(flatten)]
        who: Who,
        query: String,
        #[arg(long, default_value_t = 10)]
        top_k: usize,
        /// Search past turns too.
        #[arg(long)]
        messages: bool,
    },
    /// Add a memory.
    Add {
        #[command(flatten)]
        who: Who,
        text: String,
        #[arg(long, default_value = "fact")]
        kind: String,
    },
    /// Delete a memory (or keep it as history with --invalidate).
    Delete {
        #[command(flatten)]
        who: Who,
        id: i64,
        #[arg(long)]
        invalidate: bool,
    },
    /// Export a user's whole memory as JSONL (to stdout, or --output FILE).
    Export {
        #[command(flatten)]
        who: Who,
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Import a JSONL export into a user (FILE, or - for stdin); checked whole before any write.
    Import {
        #[command(flatten)]
        who: Who,
        file: PathBuf,
    },
    /// Delete the user and everything memproxy holds about them.
    Forget {
        #[command(flatten)]
        who: Who,
    },
}

pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

pub async fn memories(config: &Config, command: MemoriesCommand) -> anyhow::Result<()> {
    let memory = crate::memory::MemoryService::from_config(config).await?;
    let scope = |who: &Who| UserScope::new(&who.tenant, &who.user);
    match command {
        MemoriesCommand::List {
            who,
            include_invalid,
            limit,
        } => {
            let page = Page { limit, offset: 0 };
            for item in memory
                .list_memories(&scope(&who), include_invalid, page)
                .await?
            {
                print_json(&item)?;
            }
        }
        MemoriesCommand::Search {
            who,
            query,
            top_k,
            messages,
        } => {
            let mut corpora = vec![Corpus::Memory];
            if messages {
                corpora.push(Corpus::Message);
            }
            let request = RetrievalRequest {
                query,
                top_k,
                corpora,
                ..RetrievalRequest::default()
            };
            for hit in memory.retrieve(&scope(&who), request).await? {
                print_json(&hit)?;
            }
        }
        MemoriesCommand::Add { who, text, kind } => {
            match memory.add_memory(&scope(&who), &text, &kind, "cli").await? {
                Inserted::New { id, .. } => println!("added memory {id}"),
                Inserted::Duplicate { id } => println!("already known as memory {id}"),
            }
        }
        MemoriesCommand::Delete {
            who,
            id,
            invalidate,
        } => {
            memory
                .retire_memory(&scope(&who), id, !invalidate, "cli")
                .await?;
            println!(
                "{} memory {id}",
                if invalidate { "invalidated" } else { "deleted" }
            );
        }
        MemoriesCommand::Export { who, output } => {
            let jsonl = memory.export(&scope(&who)).await?;
            match output {
                Some(path) => std::fs::write(&path, jsonl)?,
                None => print!("{jsonl}"),
            }
        }
        MemoriesCommand::Import { who, file } => {
            let mut text = String::new();
            if file.as_os_str() == "-" {
                std::io::stdin().read_to_string(&mut text)?;
            } else {
                text = std::fs::read_to_string(&file)?;
            }
            let counts = memory.import(&scope(&who), &text).await?;
            print_json(&counts)?;
        }
        MemoriesCommand::Forget { who } => {
            if memory.delete_user(&scope(&who)).await? {
                println!("deleted user '{}' of tenant '{}'", who.user, who.tenant);
            } else {
                anyhow::bail!("no user '{}' in tenant '{}'", who.user, who.tenant);
            }
        }
    }
    memory.flush().await?;
    Ok(())
}

pub async fn reindex(config: &Config) -> anyhow::Result<()> {
    let memory = crate::memory::MemoryService::from_config(config).await?;
    let model = memory.embedder().model_id().to_owned();
    let count = memory.reindex().await?;
    println!("re-embedded {count} rows with {model}");
    Ok(())
}

/// `memproxy jobs list`: the post-processing queue (failed jobs show their last error).
pub async fn jobs(config: &Config, state: Option<String>, limit: usize) -> anyhow::Result<()> {
    let memory = crate::memory::MemoryService::from_config(config).await?;
    let page = Page { limit, offset: 0 };
    let jobs = memory
        .blocking(move |store, _| Ok(store.list_jobs(state.as_deref(), page)?))
        .await?;
    for job in jobs {
        print_json(&job)?;
    }
    Ok(())
}
