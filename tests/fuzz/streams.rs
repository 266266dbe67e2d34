//! Streams: the SSE splitter, the chat stream accumulator, and the translations of a chat stream
//! into Anthropic's and the Responses API's events, fed generated upstream streams (well-formed
//! chunks, tool-call deltas, errors, `[DONE]`, comments, garbage), cut at any byte.

use memproxy::openai::accumulate::StreamAccumulator;
use memproxy::openai::sse::{event_data, SseSplitter};
use memproxy::openai::translate::StreamTranslator;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::json;

/// One upstream event as written on the wire.
fn upstream_event() -> impl Strategy<Value = String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let finish = prop_oneof![
        4 => Just(Value::Null),
        1 => prop::sample::select(vec!["stop", "length", "tool_calls", "content_filter"]).prop_map(Value::from),
    ];
    prop_oneof![
        6 => (json::text(), finish.clone()).prop_map(move |(t, f)| format!("data: {}\n\n", chunk(json!({"content": t}), f))),
        2 => (0u32..3, prop::option::of("[a-z_]{1,8}"), "\\PC{0,12}").prop_map(move |(i, name, args)| {
            let call = json!({"index": i, "id": name.as_ref().map(|n| format!("call_{n}")), "type": "function",
                "function": {"name": name, "arguments": args}});
            format!("data: {}\n\n", chunk(json!({"tool_calls": [call]}), Value::Null))
        }),
        1 => Just("data: [DONE]\n\n".to_owned()),
        1 => Just(": keep-alive\n\n".to_owned()),
        1 => json::text().prop_map(|m| format!("data: {}\n\n", json!({"error": {"message": m}}))),
        1 => Just("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n".to_owned()),
        1 => json::value().prop_map(|v| format!("data: {v}\n\n")),
        1 => "\\PC{0,20}".prop_map(|s| format!("{s}\r\n\r\n")),
    ]
}

/// A whole upstream stream, and where to cut it into network chunks.
fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    (
        prop::collection::vec(upstream_event(), 0..16),
        prop::collection::vec(any::<usize>(), 0..8),
        any::<bool>(),
    )
        .prop_map(|(events, cuts, truncate)| {
            let mut bytes = events.concat().into_bytes();
            if truncate && !bytes.is_empty() {
                let keep = cuts.first().copied().unwrap_or(0) % bytes.len();
                bytes.truncate(keep);
            }
            (bytes, cuts)
        })
}

/// The stream split at the cuts (sorted, within its length).
fn pieces(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in at.into_iter().chain([bytes.len()]) {
        out.push(bytes[start..cut].to_vec());
        start = cut;
    }
    out
}

/// Every event the splitter gives, then what is left at the end.
fn split(pieces: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut splitter = SseSplitter::default();
    let mut events = Vec::new();
    for piece in pieces {
        splitter.push(piece);
        while let Some(event) = splitter.next_event() {
            events.push(event.to_vec());
        }
    }
    events.extend(splitter.finish().map(|rest| rest.to_vec()));
    events
}

#[test]
fn the_splitter_neither_changes_nor_loses_a_byte_wherever_the_network_cuts() {
    crate::run("sse-splitter", 3_000, stream(), |(bytes, cuts)| {
        let whole = split(std::slice::from_ref(&bytes));
        let cut = split(&pieces(&bytes, &cuts));
        prop_assert_eq!(&whole, &cut, "events depend on where the network cut");
        let joined: Vec<u8> = whole.concat();
        // Only trailing whitespace without an event may be dropped at the end.
        prop_assert!(bytes.starts_with(&joined));
        prop_assert!(bytes[joined.len()..].iter().all(u8::is_ascii_whitespace));
        Ok(())
    });
}

#[test]
fn the_accumulator_keeps_exactly_the_streamed_text() {
    let strategy = (prop::collection::vec(json::text(), 0..12), stream());
    crate::run(
        "stream-accumulator",
        3_000,
        strategy,
        |(texts, (noise, cuts))| {
            // Any upstream stream, garbage included, folds in without a panic.
            let mut any = StreamAccumulator::default();
            for event in split(&pieces(&noise, &cuts)) {
                if let Some(data) = event_data(&event) {
                    any.observe_data(&data);
                }
            }
            let _ = (any.finished(), any.replies());
            // A well-formed stream of text deltas adds up to exactly its text.
            let mut acc = StreamAccumulator::default();
            for text in &texts {
                let data =
                    json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string();
                acc.observe_data(&data);
            }
            acc.observe_data("[DONE]");
            prop_assert!(acc.finished());
            let replies = acc.replies();
            let content = replies.first().map(|r| r.text.clone()).unwrap_or_default();
            prop_assert_eq!(content, texts.concat());
            Ok(())
        },
    );
}

/// The events a translator writes for a stream, fed as the network cut it and read as the core
/// reads an upstream's stream.
fn translated(mut translator: impl StreamTranslator, bytes: &[u8], cuts: &[usize]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut reader = memproxy::openai::reply::ChunkReader::default();
    for event in split(&pieces(bytes, cuts)) {
        for neutral in reader.read(&event) {
            out.extend(translator.on_event(neutral));
        }
    }
    out.extend(translator.end_of_input());
    out.iter()
        .filter_map(|event| event_data(event))
        .map(|data| serde_json::from_str(&data).unwrap_or(Value::Null))
        .collect()
}

#[test]
fn anthropic_streams_are_well_formed_whatever_the_upstream_sends() {
    crate::run("messages-stream", 2_000, stream(), |(bytes, cuts)| {
        let events = translated(
            memproxy::server::messages::events::Translator::new("m"),
            &bytes,
            &cuts,
        );
        prop_assert!(
            events.iter().all(|e| e["type"].is_string()),
            "unreadable event in {events:?}"
        );
        let last = events
            .last()
            .map(|e| e["type"].clone())
            .unwrap_or(Value::Null);
        prop_assert!(
            last == "message_stop" || last == "error",
            "the stream ends with {last}: {events:?}"
        );
        // Content blocks open and close in order, one at a time.
        let mut open: Option<u64> = None;
        for event in &events {
            match event["type"].as_str() {
                Some("content_block_start") => {
                    prop_assert!(open.is_none(), "a block opened inside another: {events:?}");
                    open = event["index"].as_u64();
                }
                Some("content_block_delta") => prop_assert_eq!(open, event["index"].as_u64()),
                Some("content_block_stop") => {
                    prop_assert_eq!(open, event["index"].as_u64());
                    open = None;
                }
                _ => {}
            }
        }
        Ok(())
    });
}

#[test]
fn responses_streams_are_well_formed_whatever_the_upstream_sends() {
    crate::run("responses-stream", 2_000, stream(), |(bytes, cuts)| {
        let skeleton = json!({"id": "resp_1", "object": "response", "model": "m", "output": []});
        let translator = memproxy::server::responses::events::Translator::new(skeleton, None);
        let events = translated(translator, &bytes, &cuts);
        prop_assert!(
            events.iter().all(|e| e["type"].is_string()),
            "unreadable event in {events:?}"
        );
        let sequence: Vec<u64> = events
            .iter()
            .filter_map(|e| e["sequence_number"].as_u64())
            .collect();
        prop_assert!(
            sequence.windows(2).all(|w| w[1] == w[0] + 1),
            "sequence numbers {sequence:?}"
        );
        let last = events
            .last()
            .map(|e| e["type"].clone())
            .unwrap_or(Value::Null);
        prop_assert!(
            [
                "response.completed",
                "response.failed",
                "response.incomplete",
                "error"
            ]
            .iter()
            .any(|t| last == *t),
            "the stream ends with {last}: {events:?}"
        );
        Ok(())
    });
}
