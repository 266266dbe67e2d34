//! Starting a turn: the agent loaded (created on first use, with the client's system prompt as a
//! read-only block), or for a read-only turn an in-memory view that writes nothing; then the
//! client's new messages wrapped as the agent receives them.

use super::context::{self, CLIENT_BLOCK};
use super::state::{user_json, Turn};
use super::step::Progress;
use super::turn_types::{TurnError, TurnInput};
use super::Agents;
use crate::store::{now_ms, AgentMessage, CoreBlock};

impl Agents {
    /// Opens the turn: a paused turn this request resumes, or a new one. The progress is the
    /// paused turn's, or a fresh start.
    pub(super) async fn open_turn(&self, input: &TurnInput) -> Result<(Turn, Progress), TurnError> {
        let paused = self.take_pause(input).await?;
        let mut turn = self.load_turn(input).await?;
        turn.agents.chain = input.chain.clone();
        turn.agents.depth = input.depth;
        let mut progress = Progress::default();
        match paused {
            Some(paused) => self.resume(&mut turn, &mut progress, paused, &input.tool_results),
            None => {
                turn.recall.candidates = self.recall_before(&turn).await?;
                turn.recall.never_mentioned = self.never_mentioned(&turn).await?;
            }
        }
        Ok((turn, progress))
    }

    /// Loads (creating on first use) the agent and puts the client's messages in the buffer.
    pub(super) async fn load_turn(&self, input: &TurnInput) -> Result<Turn, TurnError> {
        let (scope, agent) = (input.scope.clone(), input.agent.clone());
        let defaults = self.default_blocks();
        let client_system = input.client_system.clone();
        let limit = self.config.block_char_limit;
        let client_block = move |text: &String| CoreBlock {
            label: CLIENT_BLOCK.to_owned(),
            value: text.clone(),
            char_limit: (text.chars().count().max(limit)) as i64,
            read_only: true,
            updated_at_ms: 0,
            shared: None,
        };
        if !input.record {
            return self.open_read_only(input, client_block).await;
        }
        let limits = self.memory.limits().clone();
        let loaded = self
            .memory
            .blocking(move |store, _| {
                // The user's agents, read once: for the limit, and the agent's peers.
                let agents = crate::memory::admit_agent(store, &limits, &scope, &agent)?;
                store.ensure_agent(&scope, &agent, &defaults)?;
                let existing = store
                    .core_blocks(&scope, &agent)?
                    .into_iter()
                    .find(|b| b.label == CLIENT_BLOCK);
                match (&client_system, existing) {
                    (Some(text), Some(block)) if block.value == *text => {}
                    (Some(text), _) => store.put_core_block(&scope, &agent, &client_block(text))?,
                    (None, Some(_)) => {
                        store.delete_core_block(&scope, &agent, CLIENT_BLOCK)?;
                    }
                    (None, None) => {}
                }
                // Reread: a block change above invalidated the compiled system message.
                let record = store.ensure_agent(&scope, &agent, &[])?;
                let (summary, queue) = store.agent_context(&scope, &agent)?;
                let peers = peers_of(agents, &agent);
                Ok(Loaded {
                    system: record
                        .system_message
                        .filter(|text| context::is_compiled_memory(text)),
                    epoch: record.memory_epoch,
                    alerted: record.pressure_alerted,
                    summary,
                    queue,
                    peers,
                })
            })
            .await?;
        Ok(self.new_turn(input, loaded))
    }

    /// A read-only turn sees the agent as it is (or a new agent's defaults) and writes nothing:
    /// the client's system prompt is applied to its own copy of the blocks.
    async fn open_read_only(
        &self,
        input: &TurnInput,
        client_block: impl Fn(&String) -> CoreBlock,
    ) -> Result<Turn, TurnError> {
        let mut view = self.view(&input.scope, &input.agent).await?;
        view.blocks.retain(|b| b.label != CLIENT_BLOCK);
        if let Some(text) = &input.client_system {
            view.blocks.push(client_block(text));
        }
        let now = input.clock.unwrap_or_else(now_ms);
        let tool_set = self.config.tools(&input.model);
        let system = context::compile_memory(&view.blocks, &view.counts, now, tool_set);
        let (scope, agent) = (input.scope.clone(), input.agent.clone());
        let peers = self
            .memory
            .blocking(move |store, _| Ok(peers_of(store.list_agents(&scope)?, &agent)))
            .await?;
        let loaded = Loaded {
            system: Some(system),
            epoch: 0,
            alerted: true,
            summary: view.summary,
            queue: view.queue,
            peers,
        };
        let mut turn = self.new_turn(input, loaded);
        turn.read_only = true;
        Ok(turn)
    }

    fn new_turn(&self, input: &TurnInput, loaded: Loaded) -> Turn {
        let Loaded {
            system,
            epoch,
            alerted,
            summary,
            queue,
            peers,
        } = loaded;
        let now = input.clock.unwrap_or_else(now_ms);
        let app_reply = input
            .app_reply
            .as_ref()
            .filter(|text| input.record && !gave(&queue, text))
            .map(|text| AgentMessage {
                role: "assistant".to_owned(),
                content: text.clone(),
                tool_calls: None,
                tool_call_id: None,
                search_text: text.clone(),
                created_at_ms: now,
            });
        let buffer = app_reply
            .into_iter()
            .chain(input.user_messages.iter().map(|text| {
                AgentMessage {
                    role: "user".to_owned(),
                    content: match &input.from_agent {
                        // A message from another agent shows as such, with its sender.
                        Some(from) => serde_json::json!({"type": "agent_message", "from": from,
                        "message": text, "time": crate::dates::timestamp(now)})
                        .to_string(),
                        None => user_json("user_message", "message", text, now),
                    },
                    tool_calls: None,
                    tool_call_id: None,
                    search_text: text.clone(),
                    created_at_ms: now,
                }
            }))
            .collect();
        // With other agents of the user, the turn offers the messaging tools too.
        let tool_set = self.config.tools(&input.model);
        let (tools, client) = super::tools::for_request(&input.client_tools, &peers, tool_set);
        let tools_tokens = if client.is_empty() && peers.is_empty() {
            context::tools_tokens(tool_set)
        } else {
            crate::tokens::count(&serde_json::Value::Array(tools.schemas()).to_string())
        };
        Turn {
            id: uuid::Uuid::new_v4().to_string(),
            said: input.user_messages.clone(),
            offered: super::state::Offered {
                registry: tools,
                client,
                tokens: tools_tokens,
            },
            resumed: false,
            agents: super::state::Among {
                peers,
                ..Default::default()
            },
            scope: input.scope.clone(),
            agent: input.agent.clone(),
            model: input.model.clone(),
            view: super::state::InView {
                system,
                epoch,
                memory_at: self.config.core_memory_at,
                tool_set,
                alerted,
                replies_as_text: self.config.replies_as_text,
                summary,
                earlier: queue.len(),
                queue,
            },
            recall: Default::default(),
            read_only: false,
            buffer,
            transient: Vec::new(),
            clock: input.clock,
            steps: Vec::new(),
            llm_ms: 0.0,
        }
    }
}

/// What a turn starts from: the compiled memory if still current (and the memory epoch it is
/// of), the alert state, the summary and message queue, and the user's other agents.
struct Loaded {
    system: Option<String>,
    epoch: i64,
    alerted: bool,
    summary: Option<crate::store::Summary>,
    queue: Vec<crate::store::StoredMessage>,
    peers: Vec<crate::store::AgentRecord>,
}

/// Whether `text` is one of the agent's last three replies in `queue` (spacing and case aside):
/// the client's copy of what the agent said. Anything else the app shows as the assistant's (an
/// edited reply, a conversation it replays) the agent did not say, and records as said.
fn gave(queue: &[crate::store::StoredMessage], text: &str) -> bool {
    super::unusable::among_last_replies(queue, text)
}

fn peers_of(all: Vec<crate::store::AgentRecord>, agent: &str) -> Vec<crate::store::AgentRecord> {
    all.into_iter().filter(|a| a.name != agent).collect()
}
