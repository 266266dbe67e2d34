//! Who a request is for (tenant, user, agent, conversation) and which strategy serves it.
//!
//! The scope decides whose memory a request may touch, so it is derived in one place (architecture §1):
//! tenant from the proxy key, user from `X-Memproxy-User` or the body's `user`, agent from
//! `X-Memproxy-Agent`, conversation from `X-Memproxy-Conversation` or a stable hash of the chat's
//! opening (chat apps resend the whole history, so the opening identifies the chat; two chats
//! with the same opening part where they differ, into branches). Identifiers that common clients
//! send on their own are read too: Open WebUI's `X-OpenWebUI-Chat-Id` and `X-OpenWebUI-User-Id`.

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::conversation::request::Request;
use crate::error::ProxyError;
use crate::keys::KeyGrant;
use crate::mode::Mode;

pub const USER_HEADER: &str = "x-memproxy-user";
pub const AGENT_HEADER: &str = "x-memproxy-agent";
pub const CONVERSATION_HEADER: &str = "x-memproxy-conversation";
/// Sent by Open WebUI with `ENABLE_FORWARD_USER_INFO_HEADERS=true`: its chat's id and its user's.
pub const OPEN_WEBUI_CHAT_HEADER: &str = "x-openwebui-chat-id";
pub const OPEN_WEBUI_USER_HEADER: &str = "x-openwebui-user-id";
pub const MODE_HEADER: &str = "x-memproxy-mode";
/// `false`: use memory for this request but remember nothing of it (private chats, evaluations).
pub const RECORD_HEADER: &str = "x-memproxy-record";
/// Time of the new turns (replays, imports): a date, a UTC time or epoch milliseconds.
pub const TIME_HEADER: &str = "x-memproxy-time";
pub const DEFAULT_ID: &str = "default";
const MAX_ID_LEN: usize = 256;

/// The tenant a management request acts for (set by the server's authorization, read by the
/// management API and MCP).
#[derive(Clone, Debug)]
pub struct AdminTenant(pub String);

/// The one user a key restricted to one user acts as (absent for other keys).
#[derive(Clone, Debug)]
pub struct KeyUser(pub String);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    pub tenant: String,
    pub user: String,
    pub agent: String,
    pub conversation: String,
    /// Whether this exchange may be stored and learned from.
    pub record: bool,
    /// When the new turns were said (header `X-Memproxy-Time`, for replaying or importing past
    /// conversations); `None`: now.
    pub time_ms: Option<i64>,
}

/// The store's scope of a request: its tenant and user (here, above the store, which knows
/// nothing of requests).
impl From<&Scope> for crate::store::UserScope {
    fn from(scope: &Scope) -> Self {
        crate::store::UserScope::new(&scope.tenant, &scope.user)
    }
}

impl Scope {
    /// The time of this exchange's new turns.
    pub fn now_ms(&self) -> i64 {
        self.time_ms.unwrap_or_else(crate::store::now_ms)
    }
}

impl Scope {
    /// The scope of a request admitted with `grant`: a key restricted to one user acts as that
    /// user (a header naming another is refused; the body's `user` is not read).
    pub fn identify(
        grant: &KeyGrant,
        headers: &HeaderMap,
        request: &Request,
    ) -> Result<Scope, ProxyError> {
        let named =
            header_id(headers, USER_HEADER)?.or(header_id(headers, OPEN_WEBUI_USER_HEADER)?);
        let user = match grant.user_for(named).map_err(ProxyError::Forbidden)? {
            Some(user) => user,
            None => match request.user.as_deref().filter(|u| !u.is_empty()) {
                Some(user) => checked_id(user, "user")?.to_owned(),
                None => DEFAULT_ID.to_owned(),
            },
        };
        let tenant = grant.tenant.as_str();
        let agent = header_id(headers, AGENT_HEADER)?.unwrap_or_else(|| DEFAULT_ID.to_owned());
        let conversation = match header_id(headers, CONVERSATION_HEADER)? {
            Some(conversation)
                if conversation.starts_with(crate::store::AGENT_CONVERSATION_PREFIX) =>
            {
                return Err(ProxyError::invalid(
                    format!(
                        "Header '{CONVERSATION_HEADER}' may not start with '{}' (reserved for agents' own logs).",
                        crate::store::AGENT_CONVERSATION_PREFIX
                    ),
                    Some(CONVERSATION_HEADER),
                ))
            }
            Some(conversation) => conversation,
            None => match header_id(headers, OPEN_WEBUI_CHAT_HEADER)? {
                Some(chat) => format!("owui-{chat}"),
                // Chat apps resend the whole history: its opening names the chat, and a history
                // that leaves the stored one continues in a branch (see `store::history`).
                None => conversation_fingerprint(request),
            },
        };
        let record = match header_id(headers, RECORD_HEADER)?.as_deref() {
            None | Some("true" | "1" | "on") => true,
            Some("false" | "0" | "off") => false,
            Some(other) => {
                return Err(ProxyError::invalid(
                    format!("Header '{RECORD_HEADER}' must be true or false, not '{other}'."),
                    Some(RECORD_HEADER),
                ))
            }
        };
        let time_ms = match header_id(headers, TIME_HEADER)? {
            None => None,
            Some(text) => Some(crate::dates::parse_time(&text).ok_or_else(|| {
                ProxyError::invalid(
                    format!("Header '{TIME_HEADER}' must be a date (2026-03-07), a UTC time (2026-03-07T18:30:00Z) or milliseconds since 1970, not '{text}'."),
                    Some(TIME_HEADER),
                )
            })?),
        };
        Ok(Scope {
            tenant: tenant.to_owned(),
            user,
            agent,
            conversation,
            record,
            time_ms,
        })
    }
}

/// Strategy for the request: header, else route prefix, else the configured default.
pub fn resolve_mode(
    headers: &HeaderMap,
    route_mode: Option<Mode>,
    default: Mode,
) -> Result<Mode, ProxyError> {
    match header_id(headers, MODE_HEADER)? {
        Some(name) => name.parse().map_err(|error: crate::mode::UnknownMode| {
            ProxyError::invalid(error.to_string(), Some(MODE_HEADER))
        }),
        None => Ok(route_mode.unwrap_or(default)),
    }
}

/// An id from a header (trimmed; `None` when absent or empty), checked like every id.
pub fn header_id(headers: &HeaderMap, name: &str) -> Result<Option<String>, ProxyError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| {
        ProxyError::invalid(
            format!("Header '{name}' must be visible ASCII."),
            Some(name),
        )
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    checked_id(text, name).map(|id| Some(id.to_owned()))
}

fn checked_id<'a>(id: &'a str, param: &str) -> Result<&'a str, ProxyError> {
    if id.len() > MAX_ID_LEN || id.chars().any(char::is_control) {
        return Err(ProxyError::invalid(
            format!("'{param}' must be at most {MAX_ID_LEN} bytes without control characters."),
            Some(param),
        ));
    }
    Ok(id)
}

/// A stable id for a chat that did not name itself: the hash of its system prompt and first user
/// message, which stay the same while the app resends a growing history.
fn conversation_fingerprint(request: &Request) -> String {
    let opening = |role: &str| {
        request
            .messages
            .iter()
            .find(|m| m.role == role || (role == "system" && m.role == "developer"))
            .and_then(|m| m.content.as_ref())
            // The content's JSON form, which the ids of stored conversations were made from.
            .map(|content| content.to_json().to_string())
            .unwrap_or_default()
    };
    let mut hasher = Sha256::new();
    hasher.update(b"memproxy-conversation-v1\0");
    hasher.update(opening("system").as_bytes());
    hasher.update(b"\0");
    hasher.update(opening("user").as_bytes());
    format!("c-{}", &hex::encode(hasher.finalize())[..24])
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn request(body: &str) -> Request {
        crate::openai::ChatRequest::parse(body.as_bytes())
            .expect("valid")
            .neutral()
    }

    #[test]
    fn header_beats_body_and_defaults_apply() {
        let body = r#"{"user":"body-user","messages":[{"role":"user","content":"hi"}]}"#;
        let mut headers = HeaderMap::new();
        let scope =
            Scope::identify(&KeyGrant::tenant("t"), &headers, &request(body)).expect("scope");
        assert_eq!(
            (scope.user.as_str(), scope.agent.as_str()),
            ("body-user", "default")
        );
        headers.insert(USER_HEADER, HeaderValue::from_static("alice"));
        headers.insert(AGENT_HEADER, HeaderValue::from_static("helper"));
        let scope =
            Scope::identify(&KeyGrant::tenant("t"), &headers, &request(body)).expect("scope");
        assert_eq!(
            (scope.user.as_str(), scope.agent.as_str()),
            ("alice", "helper")
        );
        let anonymous = request(r#"{"messages":[{"role":"user","content":"hi"}]}"#);
        let scope =
            Scope::identify(&KeyGrant::tenant("t"), &HeaderMap::new(), &anonymous).expect("scope");
        assert_eq!(scope.user, "default");
    }

    #[test]
    fn conversation_is_stable_as_history_grows() {
        let first = request(
            r#"{"messages":[{"role":"system","content":"be kind"},{"role":"user","content":"hi"}]}"#,
        );
        let later = request(
            r#"{"messages":[{"role":"system","content":"be kind"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}"#,
        );
        let other = request(
            r#"{"messages":[{"role":"system","content":"be kind"},{"role":"user","content":"hey"}]}"#,
        );
        let id = |r: &Request| {
            Scope::identify(&KeyGrant::tenant("t"), &HeaderMap::new(), r)
                .expect("scope")
                .conversation
        };
        assert_eq!(id(&first), id(&later));
        assert_ne!(id(&first), id(&other));
    }

    /// Stored conversations are found again by their id: the hash stays what it was when content
    /// was kept as JSON (the values here are the ones that code gave), parts in any key order.
    #[test]
    fn a_conversations_id_is_the_one_stored_conversations_have() {
        let id = |body: &str| {
            Scope::identify(&KeyGrant::tenant("t"), &HeaderMap::new(), &request(body))
                .expect("scope")
                .conversation
        };
        assert_eq!(
            id(
                r#"{"messages":[{"role":"system","content":"be kind"},{"role":"user","content":"hi"}]}"#
            ),
            "c-f735c68eaa309cd1a5ac162a"
        );
        assert_eq!(
            id(
                r#"{"messages":[{"role":"system","content":"be kind"},{"role":"user","content":[
                {"text":"Look at this","type":"text"},
                {"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}},
                {"type":"text","text":"café"}]}]}"#
            ),
            "c-21f9f194849efa4b490670b0"
        );
    }

    #[test]
    fn mode_header_route_and_default() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            resolve_mode(&headers, None, Mode::Passthrough).ok(),
            Some(Mode::Passthrough)
        );
        assert_eq!(
            resolve_mode(&headers, Some(Mode::Window), Mode::Passthrough).ok(),
            Some(Mode::Window)
        );
        headers.insert(MODE_HEADER, HeaderValue::from_static("implicit"));
        assert_eq!(
            resolve_mode(&headers, Some(Mode::Window), Mode::Passthrough).ok(),
            Some(Mode::Implicit)
        );
        headers.insert(MODE_HEADER, HeaderValue::from_static("memgpt"));
        assert!(resolve_mode(&headers, None, Mode::Passthrough).is_err());
    }
}
