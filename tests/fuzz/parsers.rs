//! The request parsers of the three chat APIs, in-process: any bytes either parse or are refused
//! with a well-formed error of the API's shape and a 4xx status; nothing panics.

use memproxy::error::ProxyError;
use proptest::prelude::*;
use serde_json::Value;

use crate::json;

/// An error memproxy would send on an OpenAI surface: 400 or 413, OpenAI's shape.
fn openai_refusal(error: &ProxyError) -> Result<(), TestCaseError> {
    let (status, _, _) = error.catalogue();
    prop_assert!(
        status == 400 || status == 413,
        "a parser refused with {status}: {error}"
    );
    let body = error.body();
    prop_assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "no message: {body}"
    );
    prop_assert!(body["error"]["type"].is_string(), "no type: {body}");
    Ok(())
}

#[test]
fn chat_completions_bodies() {
    crate::run(
        "chat-completions-parser",
        2_000,
        json::bytes(json::chat_seeds()),
        |raw| {
            match memproxy::openai::ChatRequest::parse(&raw) {
                Ok(request) => {
                    // A parsed request answers the questions the proxy asks of it.
                    let _ = (request.is_stream(), request.client_wants_usage());
                    for message in &request.messages {
                        let _ = message.text();
                    }
                }
                Err(error) => openai_refusal(&error)?,
            }
            Ok(())
        },
    );
}

#[test]
fn responses_bodies() {
    crate::run(
        "responses-parser",
        2_000,
        json::bytes(json::responses_seeds()),
        |raw| {
            match memproxy::server::responses::parse(&raw) {
                Ok(request) => match memproxy::server::responses::translate(&request, Vec::new()) {
                    Ok(translated) => written_request_parses(&translated.request)?,
                    Err(error) => openai_refusal(&error)?,
                },
                Err(error) => openai_refusal(&error)?,
            }
            Ok(())
        },
    );
}

#[test]
fn anthropic_messages_bodies() {
    crate::run(
        "messages-parser",
        2_000,
        json::bytes(json::messages_seeds()),
        |raw| {
            let translated = memproxy::server::messages::translate(&raw);
            if let Ok(translated) = &translated {
                written_request_parses(&translated.request)?;
            }
            if let Err(error) = translated {
                let (status, _, _) = error.catalogue();
                prop_assert!(
                    status == 400 || status == 413,
                    "refused with {status}: {error}"
                );
                let body =
                    memproxy::server::messages::error_body(status.as_u16(), &error.to_string());
                prop_assert_eq!(&body["type"], "error");
                prop_assert!(body["error"]["type"].is_string(), "no type: {}", body);
                prop_assert!(
                    body["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "no message: {}",
                    body
                );
            }
            Ok(())
        },
    );
}

/// A stored chain (the chat messages memproxy kept for earlier responses: messages it parsed)
/// before any body.
#[test]
fn responses_with_any_stored_history() {
    let strategy = (
        json::body(json::responses_seeds()),
        prop::collection::vec(json::body(json::chat_seeds()), 0..3),
    );
    crate::run("responses-history", 1_000, strategy, |(body, history)| {
        let Value::Object(request) = body else {
            return Ok(());
        };
        let history: Vec<_> = history
            .into_iter()
            .filter_map(|b| memproxy::openai::ChatRequest::parse(b.to_string().as_bytes()).ok())
            .flat_map(|request| request.messages)
            .map(|message| message.neutral())
            .collect();
        match memproxy::server::responses::translate(&request, history) {
            Ok(translated) => written_request_parses(&translated.request)?,
            Err(error) => openai_refusal(&error)?,
        }
        Ok(())
    });
}

/// What memproxy sends a Chat Completions upstream for a translated request is a request its own
/// Chat Completions parser takes.
fn written_request_parses(
    request: &memproxy::conversation::request::Request,
) -> Result<(), TestCaseError> {
    let written = memproxy::openai::neutral::chat_request(request);
    let bytes = serde_json::to_vec(&written).map_err(|e| TestCaseError::fail(e.to_string()))?;
    if let Err(error) = memproxy::openai::ChatRequest::parse(&bytes) {
        // A translation with no messages is refused by the core (`check_built`), not sent.
        prop_assert!(
            request.messages.is_empty(),
            "memproxy would send a request it refuses itself: {error}"
        );
    }
    Ok(())
}
