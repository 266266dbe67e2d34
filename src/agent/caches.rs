//! How many prompts the chat upstream keeps cached, asked once per upstream. A server with one
//! cache (llama.cpp with one slot, `../shared/tools/real-llm`) loses the agent's prompt to any
//! other request: that is what the re-warm, the save inside the agent's prompt and background
//! work that gives way are for (`explicit.rewarm_cache`, `save_in_prompt`, `yield_to_turns`,
//! each `auto`). A server with several keeps the agent's prompt while a background save runs
//! beside it: llama.cpp started with `--parallel N` gives each slot its own cache and sends a
//! request to the slot holding the longest common prefix; vLLM's prefix cache keeps every recent
//! prompt's blocks. There those measures only cost model time, so `auto` leaves them off.
//!
//! Told by what the server says of itself: llama.cpp's `GET /props` (`total_slots`), vLLM's model
//! list (`owned_by: "vllm"`). A server that says neither (Ollama, whose parallel requests are a
//! setting of the server that its API does not show; a server that did not answer) is taken to
//! keep one, as before there was a way to tell.

use serde_json::Value;

use super::model::UpstreamModel;

/// What an upstream says of its prompt caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptCaches {
    /// One: any other request evicts the agent's prompt.
    One,
    /// Several (llama.cpp's slots; `None`: vLLM, whose prefix cache has no fixed count).
    Several(Option<u64>),
    /// It did not say.
    Unknown,
}

impl PromptCaches {
    /// Whether the agent's prompt survives a background request beside it.
    pub fn several(self) -> bool {
        matches!(self, PromptCaches::Several(_))
    }
}

/// Asks the upstream of `model` (with the headers a turn's requests carry).
pub async fn probe(model: &UpstreamModel) -> PromptCaches {
    let props = read(model, Where::Origin("/props")).await;
    if let Some(slots) = props.as_ref().and_then(|p| p["total_slots"].as_u64()) {
        return match slots {
            0 | 1 => PromptCaches::One,
            n => PromptCaches::Several(Some(n)),
        };
    }
    let models = read(model, Where::Api("/models")).await;
    let vllm = models
        .as_ref()
        .and_then(|m| m["data"].as_array())
        .is_some_and(|data| {
            data.iter().any(|m| {
                m["owned_by"]
                    .as_str()
                    .is_some_and(|o| o.eq_ignore_ascii_case("vllm"))
            })
        });
    if vllm {
        return PromptCaches::Several(None);
    }
    PromptCaches::Unknown
}

enum Where {
    /// A route of the server's own, at the base URL's origin.
    Origin(&'static str),
    /// A route of the API, after the base URL.
    Api(&'static str),
}

/// A JSON answer of the upstream, or `None` (refused, not JSON, not there).
async fn read(model: &UpstreamModel, at: Where) -> Option<Value> {
    let upstream = &model.upstream;
    let sent = match at {
        Where::Origin(path) => upstream.get_at_origin(path, model.headers.clone()).await,
        Where::Api(path) => {
            let get = axum::http::Method::GET;
            upstream
                .send(get, path, model.headers.clone(), reqwest::Body::from(""))
                .await
        }
    };
    let response = sent.ok().filter(|r| r.status().is_success())?;
    let deadline = tokio::time::Instant::now() + upstream.config.first_byte_timeout;
    let body = upstream.whole_body(response, deadline).await.ok()?;
    serde_json::from_slice(&body).ok()
}
