//! The client's own tools inside the agent loop. The functions the client's request offers (read
//! from the neutral request, whichever API it came in on) are
//! offered to the agent beside the memory tools; calling one pauses the turn, and the client gets
//! an ordinary tool-call answer. The client's next request carries the results and resumes the
//! turn ([`crate::agent::pause`]).
//!
//! A client tool keeps its own name unless that name is one of memproxy's tools (or taken by an
//! earlier client tool after renaming): then it is offered as `app_<name>` (`app_<name>_2`, ...),
//! so a client tool can never shadow a memory tool, and the client always sees its own name.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use crate::agent::turn_types::ClientCall;
use crate::agent::turn_types::ClientToolsAsked;
use crate::conversation::request::ToolChoice;

use super::kit::{Effect, Tool, ToolOutcome, ToolScope};
use super::registry::Registry;

/// One client function as the agent sees it.
pub struct ClientTool {
    /// The name offered to the agent.
    exposed: String,
    /// The client's name.
    client_name: String,
    schema: Value,
}

#[async_trait]
impl Tool for ClientTool {
    fn name(&self) -> &str {
        &self.exposed
    }

    fn schema(&self) -> Value {
        self.schema.clone()
    }

    async fn execute(&self, _: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        ToolOutcome::ok("The app runs this function; its result follows.").with(Effect::Client(
            ClientCall {
                id: String::new(),
                name: self.client_name.clone(),
                arguments: Value::Object(arguments.clone()).to_string(),
            },
        ))
    }
}

/// The client's tools of one request, with what its `tool_choice` and `parallel_tool_calls`
/// ask.
#[derive(Clone, Default)]
pub struct ClientTools {
    /// The tools offered (after `tool_choice`).
    offered: Vec<Arc<ClientTool>>,
    /// `tool_choice` is `required` or names a function: the turn may not reply before calling
    /// a client tool.
    pub must_call: bool,
    /// `parallel_tool_calls: false`: at most one client call per step.
    pub one_at_a_time: bool,
    /// `tool_choice` named one function.
    named: bool,
}

impl ClientTools {
    /// Reads the client's tools, tool choice and whether it allows several calls at once, as
    /// the neutral request has them (only functions: the agent cannot call another kind).
    pub fn from_request(asked: &ClientToolsAsked) -> ClientTools {
        if asked.tools.is_empty() {
            return ClientTools::default();
        }
        let mut taken: HashSet<String> = Registry::memory()
            .with(Registry::messaging(&[]))
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut all = Vec::new();
        for tool in asked.tools.iter().filter(|t| !t.name.is_empty()) {
            let exposed = free_name(&tool.name, &taken);
            taken.insert(exposed.clone());
            let mut schema = crate::openai::neutral::tool(tool);
            schema["function"]["name"] = Value::String(exposed.clone());
            all.push(Arc::new(ClientTool {
                exposed,
                client_name: tool.name.clone(),
                schema,
            }));
        }
        let named = match &asked.choice {
            Some(ToolChoice::Named(name)) => Some(name.clone()),
            _ => None,
        };
        let offered: Vec<Arc<ClientTool>> = match (&asked.choice, &named) {
            (Some(ToolChoice::None), _) => Vec::new(),
            (_, Some(name)) => all.into_iter().filter(|t| t.client_name == *name).collect(),
            _ => all,
        };
        ClientTools {
            named: named.is_some() && !offered.is_empty(),
            must_call: !offered.is_empty()
                && (named.is_some() || asked.choice == Some(ToolChoice::Required)),
            one_at_a_time: asked.parallel == Some(false),
            offered,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.offered.is_empty()
    }

    /// The offered tools for a registry.
    pub fn tools(&self) -> impl Iterator<Item = Arc<dyn Tool>> + '_ {
        self.offered.iter().map(|t| Arc::clone(t) as Arc<dyn Tool>)
    }

    /// The function `tool_choice` named, as offered to the agent.
    pub fn only_choice(&self) -> Option<&str> {
        self.offered
            .first()
            .filter(|_| self.named)
            .map(|t| t.exposed.as_str())
    }

    /// The names offered to the agent.
    pub fn exposed_names(&self) -> Vec<&str> {
        self.offered.iter().map(|t| t.exposed.as_str()).collect()
    }

    /// Whether `name` (as offered to the agent) is a client tool.
    pub fn offers(&self, exposed: &str) -> bool {
        self.offered.iter().any(|t| t.exposed == exposed)
    }
}

/// The client's name if it is free, else `app_<name>`, then `app_<name>_2`, ...
fn free_name(name: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(name) {
        return name.to_owned();
    }
    let base = format!("app_{name}");
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    candidate
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The tools of a Chat Completions request's fields, read as the neutral request reads them.
    fn tools(value: Value) -> ClientTools {
        let mut request = json!({"messages": []});
        for (key, field) in value.as_object().into_iter().flatten() {
            request[key] = field.clone();
        }
        let neutral = serde_json::from_value::<crate::openai::ChatRequest>(request)
            .map(|r| r.neutral())
            .unwrap_or_default();
        ClientTools::from_request(&ClientToolsAsked {
            tools: neutral.tools,
            choice: neutral.tool_choice,
            parallel: neutral.parameters.parallel_tool_calls,
        })
    }

    fn function(name: &str) -> Value {
        json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}})
    }

    #[test]
    fn a_client_tool_never_shadows_a_memory_tool() {
        let client = tools(json!({"tools": [
            function("get_weather"), function("send_message"), function("app_send_message"),
            function("core_memory_append"),
        ]}));
        let names: Vec<&str> = client.offered.iter().map(|t| t.exposed.as_str()).collect();
        assert_eq!(
            names,
            [
                "get_weather",
                "app_send_message",
                "app_app_send_message",
                "app_core_memory_append"
            ]
        );
        let registry = Registry::memory().with(client.tools());
        assert_eq!(registry.names().last(), Some(&"send_message"));
        assert_eq!(
            registry
                .names()
                .iter()
                .filter(|n| **n == "send_message")
                .count(),
            1
        );
        assert_eq!(
            registry
                .get("app_send_message")
                .map(|t| t.schema()["function"]["name"].clone()),
            Some(json!("app_send_message"))
        );
    }

    #[test]
    fn tool_choice_and_parallel_calls_are_read() {
        let all =
            json!([function("a"), function("b"), {"type": "custom", "custom": {"name": "c"}}]);
        assert_eq!(tools(json!({"tools": all})).offered.len(), 2);
        assert!(tools(json!({"tools": all, "tool_choice": "none"})).is_empty());
        let required = tools(json!({"tools": all, "tool_choice": "required"}));
        assert!(required.must_call && required.offered.len() == 2);
        let named = tools(
            json!({"tools": all, "tool_choice": {"type": "function", "function": {"name": "b"}}}),
        );
        assert!(named.must_call && named.offers("b") && !named.offers("a"));
        assert!(!tools(json!({"tools": all})).one_at_a_time);
        assert!(tools(json!({"tools": all, "parallel_tool_calls": false})).one_at_a_time);
    }
}
