//! What the translating API surfaces (`messages`, `responses`, `ollama`) share: reading a numeric
//! setting ([`number_setting`]), and once they have the core's answer ([`super::Answer`]):
//! building their own answer (a stream, a JSON body), naming
//! the tools that were left out, reading an upstream error's message, and asking the upstream on
//! a client's behalf.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::stream::BoxStream;

pub use super::answer::build;
use super::answer::Answer;

/// An SSE answer with the kept headers.
pub fn event_stream(
    status: StatusCode,
    headers: HeaderMap,
    events: BoxStream<'static, Result<Bytes, std::io::Error>>,
) -> Response {
    let answer = Answer {
        status,
        ..Answer::event_stream(headers, events)
    };
    answer.into_response()
}

/// A JSON answer with the kept headers.
pub fn json(status: StatusCode, mut headers: HeaderMap, value: &serde_json::Value) -> Response {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    build(status, headers, Body::from(value.to_string()))
}

/// `x-memproxy-dropped-tools`: the offered tools a Chat Completions upstream cannot run.
pub fn name_dropped_tools(headers: &mut HeaderMap, names: &[String]) {
    if names.is_empty() {
        return;
    }
    let printable: String = names
        .join(", ")
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .take(500)
        .collect();
    if let Ok(value) = HeaderValue::from_str(&printable) {
        headers.insert("x-memproxy-dropped-tools", value);
    }
}

/// The message of an upstream error body, whatever its shape (OpenAI's `error.message`, a bare
/// `message` or `error` string, or the text itself).
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let parsed: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    let found = parsed.as_ref().and_then(|value| {
        value["error"]["message"]
            .as_str()
            .or_else(|| value["message"].as_str())
            .or_else(|| value["error"].as_str())
            .map(str::to_owned)
    });
    found.unwrap_or_else(|| text.chars().take(500).collect())
}

/// A request of a translating surface's own to the Chat Completions upstream on a client's
/// behalf (a model list, embeddings), with the credentials a chat request of that client would
/// carry: the upstream's status and whole body.
pub async fn ask_upstream(
    state: &crate::server::SharedState,
    context: &crate::server::auth::RequestContext,
    headers: &HeaderMap,
    request: (axum::http::Method, &str, Option<&serde_json::Value>),
) -> Result<(StatusCode, Bytes), crate::error::ProxyError> {
    let (method, path, body) = request;
    let authorization = state.upstream.authorization(
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    let mut headers = crate::upstream::request_headers(headers, authorization, false);
    let body = match body {
        Some(body) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Bytes::from(body.to_string())
        }
        None => Bytes::new(),
    };
    let response = state
        .upstream
        .send(method, path, headers, body.into())
        .await?;
    let status = response.status();
    let deadline = tokio::time::Instant::now() + state.upstream.config.total_timeout;
    let body = state.upstream.whole_body(response, deadline).await?;
    Ok((status, body))
}

/// A setting that must be a number, if given (`null`: not given).
pub fn number_setting(
    fields: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> Result<Option<serde_json::Number>, String> {
    use serde_json::Value;
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => Ok(Some(number.clone())),
        Some(_) => Err(format!("'{name}' must be a number.")),
    }
}

/// Stop sequences, if given (`null`: none): a list of strings, or one string where the API
/// allows it (`one`). `None`: neither, for the caller's error in its API's shape.
pub fn stop_setting(value: Option<&serde_json::Value>, one: bool) -> Option<Vec<String>> {
    use serde_json::Value;
    match value {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::String(stop)) if one => Some(vec![stop.clone()]),
        Some(Value::Array(stops)) => stops
            .iter()
            .map(|stop| stop.as_str().map(str::to_owned))
            .collect(),
        Some(_) => None,
    }
}
