//! `core_memory_append` and `core_memory_replace`: edits of the agent's core blocks, each in one
//! store transaction and through core-memory hygiene ([`crate::agent::hygiene`]).

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::kit::{function, required, Effect, Tool, ToolOutcome, ToolScope};
use crate::agent::lenient::text_arg;
use crate::agent::Tools;
use crate::agent::{hygiene, one_memory};
use crate::memory::human_lines::HUMAN;
use crate::postprocess::{gates, turn_facts};

pub struct Append;
pub struct Replace;

#[async_trait]
impl Tool for Append {
    fn name(&self) -> &str {
        "core_memory_append"
    }

    fn schema(&self) -> Value {
        function(
            self.name(),
            "Add a line to a block of your core memory (always visible to you in the system message). Facts about the user go in 'human', in the third person ('The user ...'), and only what the user said; 'persona' is only about you.",
            json!({
                "label": {"type": "string", "description": "'human' for facts about the user; 'persona' only for your own character."},
                "content": {"type": "string", "description": "One short fact, in the third person for the user ('The user ...')."},
            }),
            &["label", "content"],
        )
    }

    fn writes(&self) -> bool {
        true
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let run = async {
            let label = required(arguments, "label")?;
            let content = required(arguments, "content")?;
            let (name, said) = (label.clone(), tools.user_said.to_vec());
            let names = earlier_names(tools, &label).await;
            let now = tools.clock.unwrap_or_else(crate::store::now_ms);
            edit_block(tools, &label, self.name(), move |value| {
                hygiene::append_at(&name, value, &content, &said, &names, Some(now))
                    .map_err(ToolOutcome::failed)
            })
            .await
        };
        run.await.unwrap_or_else(|failed| failed)
    }
}

#[async_trait]
impl Tool for Replace {
    fn name(&self) -> &str {
        "core_memory_replace"
    }

    fn schema(&self) -> Value {
        function(
            self.name(),
            "Replace text in a block of your core memory. old_content must match the block's text exactly; an empty new_content deletes it.",
            json!({
                "label": {"type": "string", "description": "Block to edit."},
                "old_content": {"type": "string", "description": "Exact text to replace."},
                "new_content": {"type": "string", "description": "Replacement text."},
            }),
            &["label", "old_content", "new_content"],
        )
    }

    fn writes(&self) -> bool {
        true
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let run = async {
            let label = required(arguments, "label")?;
            let old = required(arguments, "old_content")?;
            let new = text_arg(arguments, "new_content").unwrap_or_default();
            let (name, said) = (label.clone(), tools.user_said.to_vec());
            let names = earlier_names(tools, &label).await;
            let now = tools.clock.unwrap_or_else(crate::store::now_ms);
            edit_block(tools, &label, self.name(), move |value| {
                hygiene::check_replacement(&name, value, &old, &new, &said, &names)
                    .map_err(ToolOutcome::failed)?;
                // Checked as written, kept with its relative day made a date.
                let new = hygiene::dated(&name, &new, &said, now);
                replace(&name, value, &old, &new, now)
            })
            .await
        };
        run.await.unwrap_or_else(|failed| failed)
    }
}

/// For a write to `human`: the words opening the user's sentences this turn that their earlier
/// messages show to be someone else's name ("Halina switched our lessons", where an earlier
/// conversation said "my piano teacher Halina"), so that hygiene keeps that person's act off the
/// user. Read only when the agent writes about the user, as the background save reads them.
async fn earlier_names(tools: &ToolScope<'_>, label: &str) -> Vec<String> {
    if label != HUMAN || tools.read_only || tools.user_said.is_empty() {
        return Vec::new();
    }
    let turns: Vec<(&str, &str)> = tools
        .user_said
        .iter()
        .map(|text| ("user", text.as_str()))
        .collect();
    let earlier = turn_facts::earlier(tools.memory, tools.scope, &turns).await;
    gates::Evidence::names_told_earlier(tools.user_said, &earlier)
}

fn replace(
    label: &str,
    value: &str,
    old: &str,
    new: &str,
    now: i64,
) -> Result<String, ToolOutcome> {
    if old.is_empty() {
        return Err(ToolOutcome::failed(
            "'old_content' is empty; to add text use core_memory_append",
        ));
    }
    // Surrounding whitespace is the one inexactness with a single reading.
    let needle = if value.contains(old) { old } else { old.trim() };
    if needle.is_empty() || !value.contains(needle) {
        return Err(ToolOutcome::failed(format!(
            "'{old}' is not in block '{label}' (the text must match exactly). The block now reads: {value:?}"
        )));
    }
    Ok(hygiene::replaced(
        label,
        &value.replace(needle, new),
        needle,
        new,
        Some(now),
    ))
}

/// Edits a block in one store transaction (a concurrent writer, such as the background save, is
/// never overwritten): `edit` makes the new value or refuses with the tool's message. An edit of
/// `human` changes the user's facts too ([`one_memory`]); `how` names the tool in their history.
pub(crate) async fn edit_block(
    tools: &ToolScope<'_>,
    label: &str,
    how: &str,
    edit: impl FnOnce(&str) -> Result<String, ToolOutcome> + Send + 'static,
) -> Result<ToolOutcome, ToolOutcome> {
    let (scope, agent, name) = (
        tools.scope.clone(),
        tools.agent.to_owned(),
        label.to_owned(),
    );
    let set = tools.tool_set;
    let mut edit = Some(edit);
    let mut refusal: Option<ToolOutcome> = None;
    let mut before = String::new();
    let (edited, refusal, before) = tools
        .memory
        .blocking(move |store, _| {
            let edited = store.edit_core_block(&scope, &agent, &name, &mut |block| {
                if block.read_only {
                    return Err(format!("block '{}' is read-only", block.label));
                }
                let edit = edit.take().ok_or_else(|| "edited twice".to_owned())?;
                before.clone_from(&block.value);
                let value = edit(&block.value).map_err(|failed| {
                    let message = failed.message.clone();
                    refusal = Some(failed);
                    message
                })?;
                let length = value.chars().count() as i64;
                if length > block.char_limit {
                    let elsewhere = match set {
                        Tools::Full => ", or keep the details in archival memory with archival_memory_insert",
                        Tools::Compact => "",
                    };
                    return Err(format!(
                        "block '{}' would hold {length} characters, over its limit of {}. Shorten it with core_memory_replace{elsewhere}.",
                        block.label, block.char_limit
                    ));
                }
                Ok(value)
            })?;
            Ok((edited, refusal, before))
        })
        .await
        .map_err(|e| ToolOutcome::failed(e.to_string()))?;
    match edited {
        Err(labels) => Err(ToolOutcome::failed(format!(
            "there is no core memory block '{label}'; the blocks are: {}",
            labels.join(", ")
        ))),
        Ok(Err(message)) => Err(refusal.unwrap_or_else(|| ToolOutcome::failed(message))),
        Ok(Ok(block)) => {
            if block.label == HUMAN {
                let at = tools.clock.unwrap_or_else(crate::store::now_ms);
                let edit = one_memory::edit_of(&before, &block.value);
                // The block holds the line whatever happens here; start-up adoption gives a
                // line whose fact failed to be written its fact.
                if let Err(error) =
                    one_memory::human_edited(tools.memory, tools.scope, tools.agent, edit, at, how)
                        .await
                {
                    tracing::warn!(%error, "a core memory line could not be made one of the user's facts");
                }
            }
            Ok(ToolOutcome::ok(format!(
                "Block '{label}' updated ({} characters).",
                block.value.chars().count()
            ))
            .with(Effect::MemoryChanged))
        }
    }
}
