//! Streamed answers split into whole events without changing a byte: server-sent events, or
//! newline-delimited JSON (Ollama's streams).
//!
//! The relay forwards each event exactly as the upstream wrote it (so clients see the upstream's
//! bytes), while the tee reads the payload of the same event ([`Framing::payload`]). SSE events
//! end at a blank line; all three line endings of the SSE spec (`\n`, `\r\n`, `\r`) are
//! accepted. An NDJSON event is one line.

use bytes::{Bytes, BytesMut};

/// How a stream's bytes divide into events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events (`text/event-stream`): the payload is the `data:` lines.
    #[default]
    Events,
    /// Newline-delimited JSON (`application/x-ndjson`): the payload is the line.
    Lines,
}

impl Framing {
    /// The content type a stream of this framing is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            Framing::Events => "text/event-stream",
            Framing::Lines => "application/x-ndjson",
        }
    }

    /// The payload of one raw event, if it has any.
    pub fn payload(self, raw: &[u8]) -> Option<String> {
        match self {
            Framing::Events => event_data(raw),
            Framing::Lines => {
                let line = String::from_utf8_lossy(raw);
                let line = line.trim();
                (!line.is_empty()).then(|| line.to_owned())
            }
        }
    }
}

#[derive(Default)]
pub struct SseSplitter {
    buffer: BytesMut,
    /// Bytes before this offset hold no event boundary; scanning resumes here.
    scanned: usize,
    framing: Framing,
}

impl SseSplitter {
    /// A splitter for a stream of the given framing.
    pub fn new(framing: Framing) -> SseSplitter {
        SseSplitter {
            framing,
            ..SseSplitter::default()
        }
    }

    /// The framing it splits by.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete event, terminator included, if the buffer holds one.
    pub fn next_event(&mut self) -> Option<Bytes> {
        let end = self.find_boundary()?;
        self.scanned = 0;
        Some(self.buffer.split_to(end).freeze())
    }

    /// Whatever is left when the stream ends (an event without its blank line).
    pub fn finish(&mut self) -> Option<Bytes> {
        self.scanned = 0;
        let rest = self.buffer.split().freeze();
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }

    fn find_boundary(&mut self) -> Option<usize> {
        if self.framing == Framing::Lines {
            let found = self.buffer[self.scanned..].iter().position(|b| *b == b'\n');
            return match found {
                Some(at) => Some(self.scanned + at + 1),
                None => {
                    self.scanned = self.buffer.len();
                    None
                }
            };
        }
        let bytes = &self.buffer[..];
        let mut index = self.scanned;
        while index < bytes.len() {
            let next = bytes.get(index + 1).copied();
            match (bytes[index], next) {
                (b'\n', Some(b'\n')) => return Some(index + 2),
                (b'\n', Some(b'\r')) => match bytes.get(index + 2) {
                    Some(b'\n') => return Some(index + 3),
                    Some(_) => return Some(index + 2),
                    None => break,
                },
                (b'\r', Some(b'\r')) => return Some(index + 2),
                (b'\n' | b'\r', None) => break,
                _ => {}
            }
            index += 1;
        }
        self.scanned = index;
        None
    }
}

/// The `data:` payload of one raw event (several data lines joined by `\n`), if it has any.
pub fn event_data(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let mut data: Option<String> = None;
    for line in text.split(['\n', '\r']) {
        let Some(value) = line.strip_prefix("data:") else {
            continue;
        };
        let value = value.strip_prefix(' ').unwrap_or(value);
        match &mut data {
            Some(joined) => {
                joined.push('\n');
                joined.push_str(value);
            }
            None => data = Some(value.to_owned()),
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&str]) -> Vec<String> {
        split_framed(Framing::Events, chunks)
    }

    fn split_framed(framing: Framing, chunks: &[&str]) -> Vec<String> {
        let mut splitter = SseSplitter::new(framing);
        let mut events = Vec::new();
        for chunk in chunks {
            splitter.push(chunk.as_bytes());
            while let Some(event) = splitter.next_event() {
                events.push(String::from_utf8(event.to_vec()).expect("utf8"));
            }
        }
        if let Some(rest) = splitter.finish() {
            events.push(String::from_utf8(rest.to_vec()).expect("utf8"));
        }
        events
    }

    #[test]
    fn splits_across_chunk_boundaries_and_keeps_bytes() {
        let events = split_all(&["data: {\"a\":1}\n", "\ndata: [DO", "NE]\n\n"]);
        assert_eq!(events, ["data: {\"a\":1}\n\n", "data: [DONE]\n\n"]);
        let events = split_all(&["data: x\r\n\r", "\ndata: y\r\n", "\r\n", ": keep-alive\n\n"]);
        assert_eq!(
            events,
            ["data: x\r\n\r\n", "data: y\r\n\r\n", ": keep-alive\n\n"]
        );
        let events = split_all(&["data: tail-without-blank-line"]);
        assert_eq!(events, ["data: tail-without-blank-line"]);
        assert!(split_all(&["\n"]).is_empty());
    }

    #[test]
    fn reads_data_lines() {
        assert_eq!(
            event_data(b"data: {\"a\":1}\n\n").as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(
            event_data(b"event: x\ndata:a\ndata: b\n\n").as_deref(),
            Some("a\nb")
        );
        assert_eq!(event_data(b": comment\n\n"), None);
    }

    #[test]
    fn splits_lines_across_chunk_boundaries_and_keeps_bytes() {
        let lines = split_framed(
            Framing::Lines,
            &["{\"a\":", "1}\n{\"b\":2}\r\n", "\n{\"c\"", ":3}"],
        );
        assert_eq!(lines, ["{\"a\":1}\n", "{\"b\":2}\r\n", "\n", "{\"c\":3}"]);
        assert_eq!(
            Framing::Lines.payload(b"{\"b\":2}\r\n").as_deref(),
            Some("{\"b\":2}")
        );
        assert_eq!(Framing::Lines.payload(b"\n"), None);
    }
}
