//! The JSONL export format: one JSON object per line, tagged by `type`.
//!
//! ```text
//! {"type":"header","format":"memproxy-export","version":1,"tenant":"t","user":"alice"}
//! {"type":"conversation","id":"c-1","agent":"default"}
//! {"type":"message","conversation":"c-1","position":0,"role":"user","content":"…","created_at_ms":…}
//! {"type":"message",…,"superseded":true}            (a turn an edited history replaced)
//! {"type":"message",…,"search_text":"…"}            (an agent's log entry: what search reads)
//! {"type":"memory","text":"…","kind":"fact","sources":[…],"created_at_ms":…,"updated_at_ms":…,"valid_until_ms":null}
//! {"type":"core_block","agent":"default","label":"human","value":"…","char_limit":2000,"read_only":false,"updated_at_ms":…}
//! {"type":"shared_block","name":"team","label":"team","value":"…","char_limit":2000,"read_only":false,"updated_at_ms":…,"agents":["a","b"]}
//! {"type":"passage","agent":"default","text":"…","created_at_ms":…}
//! {"type":"summary","conversation":"c-1","text":"…","through_position":12,"updated_at_ms":…}
//! ```
//! No database ids and no vectors: a file imports into any memproxy, and vectors are recomputed
//! with whatever model that instance uses. The audit log stays with the instance that wrote it.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{MemoryError, MemoryResult};
use crate::store::{
    CoreBlock, PortableConversation, PortableMemory, PortableMessage, SharedBlock, Summary,
    UserBundle, UserScope,
};

const FORMAT: &str = "memproxy-export";
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Header {
        format: String,
        version: u32,
        #[serde(default)]
        tenant: String,
        #[serde(default)]
        user: String,
    },
    Conversation(PortableConversation),
    Message(PortableMessage),
    Memory(PortableMemory),
    CoreBlock {
        agent: String,
        #[serde(flatten)]
        block: CoreBlock,
    },
    SharedBlock(SharedBlock),
    Passage {
        agent: String,
        text: String,
        created_at_ms: i64,
    },
    Summary(Summary),
}

pub fn to_jsonl(scope: &UserScope, bundle: &UserBundle) -> MemoryResult<String> {
    let mut lines = vec![Line::Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        tenant: scope.tenant.clone(),
        user: scope.user.clone(),
    }];
    lines.extend(bundle.conversations.iter().cloned().map(Line::Conversation));
    lines.extend(bundle.messages.iter().cloned().map(Line::Message));
    lines.extend(bundle.memories.iter().map(|(m, _)| Line::Memory(m.clone())));
    for (agent, block) in &bundle.blocks {
        lines.push(Line::CoreBlock {
            agent: agent.clone(),
            block: block.clone(),
        });
    }
    lines.extend(bundle.shared_blocks.iter().cloned().map(Line::SharedBlock));
    for (agent, text, created_at_ms, _) in &bundle.passages {
        lines.push(Line::Passage {
            agent: agent.clone(),
            text: text.clone(),
            created_at_ms: *created_at_ms,
        });
    }
    lines.extend(bundle.summaries.iter().cloned().map(Line::Summary));
    let mut out = String::new();
    for line in lines {
        let json = serde_json::to_string(&line).map_err(|e| MemoryError::Invalid(e.to_string()))?;
        out.push_str(&json);
        out.push('\n');
    }
    Ok(out)
}

/// Parses and checks a whole file before anything is written; errors name the line.
pub fn parse_jsonl(text: &str) -> MemoryResult<UserBundle> {
    let mut bundle = UserBundle::default();
    let mut conversations = HashSet::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw)
            .map_err(|error| MemoryError::Invalid(format!("line {number}: {error}")))?;
        let invalid = |message: String| MemoryError::Invalid(format!("line {number}: {message}"));
        match line {
            Line::Header {
                format, version, ..
            } => {
                if format != FORMAT || version != VERSION {
                    return Err(invalid(format!(
                        "unsupported format {format} version {version} (expected {FORMAT} {VERSION})"
                    )));
                }
            }
            Line::Conversation(conversation) => {
                if conversation.id.is_empty() {
                    return Err(invalid("a conversation needs an id".to_owned()));
                }
                if let Some(parent) = &conversation.parent {
                    if !conversations.contains(parent) {
                        return Err(invalid(format!(
                            "branch '{}' of conversation '{parent}', which no earlier line declares",
                            conversation.id
                        )));
                    }
                }
                if conversations.insert(conversation.id.clone()) {
                    bundle.conversations.push(conversation);
                }
            }
            Line::Message(message) => {
                if !conversations.contains(&message.conversation) {
                    return Err(invalid(format!(
                        "message of conversation '{}', which no earlier line declares",
                        message.conversation
                    )));
                }
                bundle.messages.push(message);
            }
            Line::Memory(memory) => {
                if memory.text.trim().is_empty() {
                    return Err(invalid("a memory needs text".to_owned()));
                }
                bundle.memories.push((memory, None));
            }
            Line::CoreBlock { agent, block } => bundle.blocks.push((agent, block)),
            Line::SharedBlock(block) => {
                crate::store::blocks::check_shared(&block).map_err(|e| invalid(e.to_string()))?;
                bundle.shared_blocks.push(block);
            }
            Line::Passage {
                agent,
                text,
                created_at_ms,
            } => bundle.passages.push((agent, text, created_at_ms, None)),
            Line::Summary(summary) => {
                if !conversations.contains(&summary.conversation) {
                    return Err(invalid(format!(
                        "summary of conversation '{}', which no earlier line declares",
                        summary.conversation
                    )));
                }
                bundle.summaries.push(summary);
            }
        }
    }
    Ok(bundle)
}
