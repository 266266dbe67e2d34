//! `memproxy agents …`: explicit-mode agents from the command line (list, show, edit a block,
//! archival memory, message queue, summary, step trace, tags, reset), on the data directory
//! directly.

use clap::{Args, Subcommand};
use serde_json::json;

use crate::agent::one_memory;
use crate::cli::memories::{print_json, Who};
use crate::config::Config;
use crate::memory::RetrievalRequest;
use crate::store::{agent_conversation, CoreBlock, Corpus, Page, UserScope, Within};

#[derive(Args)]
pub struct WhichAgent {
    #[command(flatten)]
    pub who: Who,
    /// The agent (header X-Memproxy-Agent).
    #[arg(long, default_value = "default")]
    pub agent: String,
}

#[derive(Subcommand)]
pub enum AgentsCommand {
    /// List a user's agents with their message and passage counts.
    List {
        #[command(flatten)]
        who: Who,
    },
    /// An agent's core blocks, summary, counts and compiled system message (JSON).
    Show {
        #[command(flatten)]
        which: WhichAgent,
    },
    /// Set a core memory block (created if missing).
    SetBlock {
        #[command(flatten)]
        which: WhichAgent,
        label: String,
        value: String,
        #[arg(long, default_value_t = 2000)]
        char_limit: i64,
    },
    /// List archival passages, or search them with --query.
    Archival {
        #[command(flatten)]
        which: WhichAgent,
        #[arg(long)]
        query: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Add an archival passage.
    AddPassage {
        #[command(flatten)]
        which: WhichAgent,
        text: String,
    },
    /// Delete an archival passage.
    DeletePassage {
        #[command(flatten)]
        which: WhichAgent,
        id: i64,
    },
    /// Delete a message from the agent's log (with the results of its tool calls).
    DeleteMessage {
        #[command(flatten)]
        which: WhichAgent,
        position: i64,
    },
    /// The agent's log (JSON, one message per line); --in-context for the queue only.
    Messages {
        #[command(flatten)]
        which: WhichAgent,
        #[arg(long)]
        in_context: bool,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Replace the text of the summary of evicted messages.
    SetSummary {
        #[command(flatten)]
        which: WhichAgent,
        text: String,
    },
    /// Steps of the newest turns (JSON, one per line).
    Steps {
        #[command(flatten)]
        which: WhichAgent,
        #[arg(long, default_value_t = 5)]
        turns: usize,
    },
    /// Set the agent's tags (send_message_to_agents_matching_tags); creates the agent if new.
    Tag {
        #[command(flatten)]
        which: WhichAgent,
        tags: Vec<String>,
    },
    /// Forget the agent: blocks, archive, log, summary, trace.
    Reset {
        #[command(flatten)]
        which: WhichAgent,
    },
}

fn scope_of(who: &Who) -> UserScope {
    UserScope::new(&who.tenant, &who.user)
}

pub async fn agents(config: &Config, command: AgentsCommand) -> anyhow::Result<()> {
    let memory = crate::memory::MemoryService::from_config(config).await?;
    match command {
        AgentsCommand::List { who } => {
            for (agent, counts) in memory.agent_overviews(&scope_of(&who)).await? {
                print_json(&json!({"name": agent.name, "tags": agent.tags, "counts": counts}))?;
            }
        }
        AgentsCommand::Show { which } => {
            let shown = memory
                .agent_detail(&scope_of(&which.who), &which.agent)
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!("no agent '{}' for user '{}'", which.agent, which.who.user)
                })?;
            println!("{}", serde_json::to_string_pretty(&shown)?);
        }
        AgentsCommand::Tag { which, tags } => {
            let (scope, agent) = (scope_of(&which.who), which.agent);
            let blocks = config.explicit.starting_blocks();
            let tags = crate::store::agent::normalize_tags(&tags).map_err(anyhow::Error::msg)?;
            let shown = tags.clone();
            memory
                .blocking(move |store, _| {
                    store.ensure_agent(&scope, &agent, &blocks)?;
                    Ok(store.set_agent_tags(&scope, &agent, &tags)?)
                })
                .await?;
            eprintln!("tags set: {}", shown.join(", "));
        }
        AgentsCommand::SetBlock {
            which,
            label,
            value,
            char_limit,
        } => {
            let scope = scope_of(&which.who);
            let block = CoreBlock {
                label,
                value,
                char_limit,
                read_only: false,
                updated_at_ms: 0,
                shared: None,
            };
            // What the user wrote about themselves is one of their facts too.
            one_memory::put_block(&memory, &scope, &which.agent, block, "cli", |_| Ok(())).await?;
            eprintln!("block saved");
        }
        AgentsCommand::Archival {
            which,
            query,
            limit,
        } => {
            let scope = scope_of(&which.who);
            match query {
                Some(query) => {
                    let request = RetrievalRequest {
                        query,
                        corpora: vec![Corpus::Passage],
                        top_k: limit,
                        within: Some(Within::Agent(which.agent)),
                        ..RetrievalRequest::default()
                    };
                    for hit in memory.retrieve(&scope, request).await? {
                        print_json(&hit)?;
                    }
                }
                None => {
                    let agent = which.agent;
                    let page = Page { limit, offset: 0 };
                    let rows = memory
                        .blocking(move |store, _| {
                            Ok(store.list_passages(&scope, Some(&agent), page)?)
                        })
                        .await?;
                    for row in rows {
                        print_json(&row)?;
                    }
                }
            }
        }
        AgentsCommand::AddPassage { which, text } => {
            let id = memory
                .insert_passage(&scope_of(&which.who), &which.agent, &text)
                .await?;
            print_json(&json!({"id": id}))?;
        }
        AgentsCommand::DeletePassage { which, id } => {
            memory
                .delete_passage(&scope_of(&which.who), &which.agent, id)
                .await?;
            eprintln!("passage {id} deleted");
        }
        AgentsCommand::DeleteMessage { which, position } => {
            let deleted = memory
                .delete_agent_message(&scope_of(&which.who), &which.agent, position)
                .await?;
            print_json(&json!({"deleted": deleted}))?;
        }
        AgentsCommand::Messages {
            which,
            in_context,
            limit,
        } => {
            let scope = scope_of(&which.who);
            let agent = which.agent;
            let rows = memory
                .blocking(move |store, _| {
                    if in_context {
                        return Ok(store.agent_context(&scope, &agent)?.1);
                    }
                    let page = Page { limit, offset: 0 };
                    Ok(store.list_messages(&scope, &agent_conversation(&agent), page)?)
                })
                .await?;
            for row in rows {
                print_json(&row)?;
            }
        }
        AgentsCommand::SetSummary { which, text } => {
            memory
                .rewrite_agent_summary(&scope_of(&which.who), &which.agent, &text)
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!("no agent '{}' for user '{}'", which.agent, which.who.user)
                })?;
            eprintln!("summary saved");
        }
        AgentsCommand::Steps { which, turns } => {
            let scope = scope_of(&which.who);
            let agent = which.agent;
            let steps = memory
                .blocking(move |store, _| Ok(store.agent_steps(&scope, &agent, turns)?))
                .await?;
            for step in steps {
                print_json(&step)?;
            }
        }
        AgentsCommand::Reset { which } => {
            if memory
                .reset_agent(&scope_of(&which.who), &which.agent)
                .await?
            {
                eprintln!("agent '{}' reset", which.agent);
            } else {
                anyhow::bail!("no agent '{}' for user '{}'", which.agent, which.who.user);
            }
        }
    }
    memory.flush().await?;
    Ok(())
}
