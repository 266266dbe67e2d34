//! How the core learns what an answer said while it relays the answer untouched: each API's
//! [`Watch`] reads its stream's events into the neutral replies for the recorder (the surfaces
//! bring theirs; the Chat Completions upstream's is here, with its whole-body reader).

use bytes::Bytes;

use crate::conversation::reply::{Reply, Usage};
use crate::error::ProxyError;
use crate::openai::accumulate::StreamAccumulator;
use crate::openai::reply::reply_of_message;
use crate::openai::CompletionView;

/// Reads a streamed answer, event by event (each event's `data:` payload), into the neutral
/// replies the recall log and hooks get, whichever API's events they are. The relay forwards the
/// events themselves; a watch only looks.
pub trait Watch: Send {
    fn observe(&mut self, data: &str);
    /// The stream reached its natural end.
    fn finished(&self) -> bool;
    /// The upstream reported an error inside the stream.
    fn error(&self) -> Option<String>;
    /// One reply per choice, in order.
    fn replies(&self) -> Vec<Reply>;
    fn usage(&self) -> Option<Usage>;
    /// The event that ends a broken stream, in this API's shape.
    fn error_event(&self, error: &ProxyError) -> Bytes;
}

impl Watch for StreamAccumulator {
    fn observe(&mut self, data: &str) {
        self.observe_data(data);
    }
    fn finished(&self) -> bool {
        StreamAccumulator::finished(self)
    }
    fn error(&self) -> Option<String> {
        self.error.as_ref().map(|error| error.to_string())
    }
    fn replies(&self) -> Vec<Reply> {
        StreamAccumulator::replies(self)
    }
    fn usage(&self) -> Option<Usage> {
        self.usage.map(Usage::from)
    }
    fn error_event(&self, error: &ProxyError) -> Bytes {
        error.sse_event()
    }
}

/// The replies of a whole Chat Completions answer; `Err` for a body that is no answer: not JSON
/// (cut off, or an event stream for a request that asked for none), or an error object where the
/// completion should be. One parse on the usual path.
pub fn completion_replies(bytes: &[u8]) -> Result<(Vec<Reply>, Option<Usage>), String> {
    let shown = |text: &str| text.chars().take(200).collect::<String>();
    let view: CompletionView = match serde_json::from_slice(bytes) {
        Ok(view) => view,
        // JSON of another shape is relayed as it is (nothing to learn from it); only a body that
        // is not JSON at all is refused.
        Err(error) => match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => CompletionView::default(),
            Err(_) => {
                let body = String::from_utf8_lossy(bytes);
                return Err(format!(
                    "its answer is not JSON ({error}): {}",
                    shown(&body)
                ));
            }
        },
    };
    if let (true, Some(error)) = (view.choices.is_empty(), &view.error) {
        let message = error["message"]
            .as_str()
            .or(error.as_str())
            .unwrap_or("no message");
        return Err(format!("it answered 200 with an error: {}", shown(message)));
    }
    let replies = view
        .choices
        .iter()
        .filter_map(|choice| {
            let message = choice.message.as_ref()?;
            Some(reply_of_message(message, choice.finish_reason.as_deref()))
        })
        .collect();
    Ok((replies, view.usage.map(Usage::from)))
}
