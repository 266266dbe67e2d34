//! Configuration of the upstream (`[upstream]`, `[upstream.messages]`, `[upstream.responses]`):
//! where requests go, with which key and timeouts. Read by `upstream`, which re-exports the API
//! upstream types; they live here, below it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Base URL of the OpenAI-compatible API, ending in `/v1`.
    pub url: String,
    /// Key sent upstream as `Authorization: Bearer`; falls back to `OPENAI_API_KEY`.
    pub api_key: Option<Secret>,
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Until the upstream's response headers arrive (for a non-streaming call: the whole generation).
    #[serde(with = "humantime_serde")]
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks of a streaming response.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Whole request, streaming included.
    #[serde(with = "humantime_serde")]
    pub total_timeout: Duration,
    /// Ask for `stream_options.include_usage` on streams to learn token counts; the usage chunk
    /// is removed again before relaying when the client did not ask for it.
    pub observe_stream_usage: bool,
    /// With proxy keys, relay the upstream's stored resources (`/v1/files`, `batches`,
    /// `vector_stores`, …) too. They live under the one upstream key every tenant shares, so any
    /// tenant could list, read or delete another's: off by default.
    pub relay_shared_resources: bool,
    /// An upstream that speaks Anthropic's Messages API itself; unset: Messages requests are
    /// translated to Chat Completions and go to `url`.
    pub messages: Option<ApiUpstream>,
    /// An upstream that speaks the OpenAI Responses API itself; unset: translated to `url`.
    pub responses: Option<ApiUpstream>,
    /// An Ollama server (its base URL, `http://127.0.0.1:11434`): Ollama's own API (`/api/chat`,
    /// `/api/generate`) goes there in its own shape, and its model routes (`/api/tags`,
    /// `/api/show`, `/api/embed`, …) are relayed; unset: translated to `url`.
    pub ollama: Option<ApiUpstream>,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            url: "https://api.openai.com/v1".to_owned(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(1800),
            observe_stream_usage: true,
            relay_shared_resources: false,
            messages: None,
            responses: None,
            ollama: None,
        }
    }
}

/// An upstream for one API other than Chat Completions (`[upstream.messages]`,
/// `[upstream.responses]`): requests of that API go there in their own shape, with the timeouts
/// of `[upstream]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiUpstream {
    /// Base URL ending in `/v1` (`https://api.anthropic.com/v1`).
    pub url: String,
    /// The upstream's key; unset: the client's own key is forwarded when proxy auth is off.
    #[serde(default)]
    pub api_key: Option<Secret>,
    /// How the key is sent; unset: the API's own way (`x-api-key` for Messages, `authorization`
    /// as `Bearer <key>` for Responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_header: Option<AuthHeader>,
}

/// The header an upstream key goes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthHeader {
    /// `Authorization: Bearer <key>` (OpenAI and most others).
    Authorization,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
}
