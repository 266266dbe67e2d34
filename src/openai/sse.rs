//! Server-sent events: split a byte stream into whole events without changing a byte.
//!
//! The relay forwards each event exactly as the upstream wrote it (so clients see the upstream's
//! bytes), while the tee reads the `data:` payload of the same event. Events end at a blank line;
//! all three line endings of the SSE spec (`\n`, `\r\n`, `\r`) are accepted.

use bytes::{Bytes, BytesMut};

#[derive(Default)]
pub struct SseSplitter {
    buffer: BytesMut,
    /// Bytes before this offset hold no event boundary; scanning resumes here.
    scanned: usize,
}

impl SseSplitter {
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
        let mut splitter = SseSplitter::default();
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
}
