//! What the translating API surfaces share, in one place: reading a request body as a JSON
//! object ([`json_object`]), and the stream adapter ([`translate_stream`]) that feeds the neutral
//! events of an answer to a surface's [`StreamTranslator`] and ends it when the input ends. Each
//! API surface only says what its own events are.

use std::collections::VecDeque;

use axum::body::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::{Map, Value};

use crate::conversation::reply::{Event, Events};
use crate::error::ProxyError;

/// One API's view of an answer's stream.
pub trait StreamTranslator: Send + 'static {
    /// The events to send for one neutral event.
    fn on_event(&mut self, event: Event) -> Vec<Bytes>;
    /// The input ended (with or without `[DONE]`): the closing events, if any are due.
    fn end_of_input(&mut self) -> Vec<Bytes>;
    /// Work to finish before the events produced so far go out (e.g. logging the response).
    fn pending_work(&mut self) -> Option<BoxFuture<'static, ()>> {
        None
    }
}

struct State<T> {
    input: Events,
    translator: T,
    pending: VecDeque<Bytes>,
    done: bool,
}

/// An answer's neutral events as an API's stream.
pub fn translate_stream<T: StreamTranslator>(
    input: Events,
    translator: T,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    let state = State {
        input,
        translator,
        pending: VecDeque::new(),
        done: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(next) = state.pending.pop_front() {
                return Some((Ok(next), state));
            }
            if state.done {
                return None;
            }
            match state.input.next().await {
                Some(Ok(event)) => {
                    let events = state.translator.on_event(event);
                    state.pending.extend(events);
                }
                Some(Err(error)) => {
                    state.done = true;
                    return Some((Err(error), state));
                }
                None => {
                    state.done = true;
                    let events = state.translator.end_of_input();
                    state.pending.extend(events);
                }
            }
            if let Some(work) = state.translator.pending_work() {
                work.await;
            }
        }
    })
    .boxed()
}

/// A request body as a JSON object, or the 400 that says why it is not one.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, ProxyError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(request)) => Ok(request),
        Ok(_) => Err(ProxyError::invalid(
            "The request body must be a JSON object.",
            None,
        )),
        Err(error) => Err(ProxyError::invalid(
            format!("The request body is not valid JSON: {error}"),
            None,
        )),
    }
}

/// Feeds one raw Chat Completions stream event to a surface's translator, read as the core reads
/// an upstream's stream (for the surfaces' stream tests).
#[cfg(test)]
pub fn feed_chat<T: StreamTranslator>(
    translator: &mut T,
    reader: &mut super::reply::ChunkReader,
    raw: &[u8],
) -> Vec<Bytes> {
    reader
        .read(raw)
        .into_iter()
        .flat_map(|event| translator.on_event(event))
        .collect()
}
