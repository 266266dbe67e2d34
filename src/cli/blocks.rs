//! `memproxy blocks …`: a user's shared core-memory blocks from the command line (list, set,
//! delete, attach to an agent, detach), on the data directory directly. An edit reaches every
//! agent the block is attached to on its next turn, as through the API.

use clap::Subcommand;

use crate::cli::memories::{print_json, Who};
use crate::config::Config;
use crate::store::{SharedBlock, UserScope};

#[derive(Subcommand)]
pub enum BlocksCommand {
    /// List the user's shared blocks with the agents each is attached to (JSON, one per line).
    List {
        #[command(flatten)]
        who: Who,
    },
    /// Create or update a shared block.
    Set {
        #[command(flatten)]
        who: Who,
        name: String,
        value: String,
        /// What agents see it as (default: its name); fixed once the block exists.
        #[arg(long)]
        label: Option<String>,
        /// Default: the configured `explicit.block_char_limit`.
        #[arg(long)]
        char_limit: Option<i64>,
        /// Agents cannot edit it.
        #[arg(long)]
        read_only: bool,
    },
    /// Delete a shared block (detached from every agent).
    Delete {
        #[command(flatten)]
        who: Who,
        name: String,
    },
    /// Attach a shared block to an agent (created with its starting memory if new).
    Attach {
        #[command(flatten)]
        who: Who,
        name: String,
        #[arg(long)]
        agent: String,
    },
    /// Detach a shared block from an agent (an own block of its label comes back).
    Detach {
        #[command(flatten)]
        who: Who,
        name: String,
        #[arg(long)]
        agent: String,
    },
}

pub async fn blocks(config: &Config, command: BlocksCommand) -> anyhow::Result<()> {
    let memory = crate::memory::MemoryService::from_config(config).await?;
    let scope = |who: &Who| UserScope::new(&who.tenant, &who.user);
    match command {
        BlocksCommand::List { who } => {
            let scope = scope(&who);
            let rows = memory
                .blocking(move |store, _| Ok(store.shared_blocks(&scope)?))
                .await?;
            for row in rows {
                print_json(&row)?;
            }
        }
        BlocksCommand::Set {
            who,
            name,
            value,
            label,
            char_limit,
            read_only,
        } => {
            let scope = scope(&who);
            let block = SharedBlock {
                label: label.unwrap_or_else(|| name.clone()),
                name,
                value,
                char_limit: char_limit.unwrap_or(config.explicit.block_char_limit as i64),
                read_only,
                updated_at_ms: 0,
                agents: Vec::new(),
            };
            memory
                .blocking(move |store, _| Ok(store.put_shared_block(&scope, &block)?))
                .await?;
            eprintln!("shared block saved");
        }
        BlocksCommand::Delete { who, name } => {
            let (scope, block) = (scope(&who), name.clone());
            let deleted = memory
                .blocking(move |store, _| Ok(store.delete_shared_block(&scope, &block)?))
                .await?;
            anyhow::ensure!(deleted, "no shared block '{name}' for user '{}'", who.user);
            eprintln!("shared block '{name}' deleted");
        }
        BlocksCommand::Attach { who, name, agent } => {
            let (scope, starting) = (scope(&who), config.explicit.starting_blocks());
            let (block, to) = (name.clone(), agent.clone());
            memory
                .blocking(move |store, _| {
                    Ok(store.attach_shared_block(&scope, &to, &block, &starting)?)
                })
                .await?;
            eprintln!("shared block '{name}' attached to agent '{agent}'");
        }
        BlocksCommand::Detach { who, name, agent } => {
            let (scope, block, from) = (scope(&who), name.clone(), agent.clone());
            let detached = memory
                .blocking(move |store, _| Ok(store.detach_shared_block(&scope, &from, &block)?))
                .await?;
            anyhow::ensure!(
                detached,
                "shared block '{name}' is not attached to agent '{agent}'"
            );
            eprintln!("shared block '{name}' detached from agent '{agent}'");
        }
    }
    memory.flush().await?;
    Ok(())
}
