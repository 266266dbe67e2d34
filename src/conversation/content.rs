//! What a message says, in no API's shape: text, or parts (text, images, and parts memproxy does
//! not read, kept as the client wrote them). Memory reads only the text; it adds its block as
//! text ([`Content::add_text`]), the one rule every API's request follows.
//!
//! Content has one JSON form ([`Content::to_json`], read back losslessly by
//! [`Content::from_json`]): a string, or a list of parts `{"type": "text", "text"}` and
//! `{"type": "image_url", "image_url": {"url", "detail"}}`. It is the form conversation ids were
//! hashed from and response chains were logged in before content was typed, so that what is
//! stored keeps meaning the same; it is also the Chat Completions part form, which the Chat
//! Completions writer uses as it is.

use serde_json::{json, Map, Value};

/// What a message says.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// A part of a message's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    /// An image by URL (a `data:` URL carries the image itself), with the detail asked for.
    Image {
        url: String,
        detail: Option<String>,
    },
    /// A part memproxy does not read (a client's audio or file part, or a text part with settings
    /// of its own such as a cache hint), kept as the client wrote it.
    Other(Value),
}

impl Content {
    /// The text: the string, or the text parts one per line.
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    Part::Text(text) => Some(text.as_str()),
                    Part::Other(other) => other.get("text").and_then(Value::as_str),
                    Part::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// Adds `text` before or after what `content` says: a new first or last part of parts, a
    /// paragraph of a text, or the whole content of an empty one.
    pub fn add_text(content: &mut Option<Content>, text: &str, before: bool) {
        match content {
            Some(Content::Parts(parts)) => {
                let part = Part::Text(text.to_owned());
                if before {
                    parts.insert(0, part);
                } else {
                    parts.push(part);
                }
            }
            Some(Content::Text(existing)) if !existing.is_empty() => {
                *existing = if before {
                    format!("{text}\n\n{existing}")
                } else {
                    format!("{existing}\n\n{text}")
                };
            }
            _ => *content = Some(Content::Text(text.to_owned())),
        }
    }

    /// The content's JSON form (see the module's comment).
    pub fn to_json(&self) -> Value {
        match self {
            Content::Text(text) => Value::String(text.clone()),
            Content::Parts(parts) => Value::Array(parts.iter().map(Part::to_json).collect()),
        }
    }

    /// Content read from its JSON form; a part of another shape is kept whole as
    /// [`Part::Other`], so that writing it again gives the same JSON. `None`: no content (`null`,
    /// or a value that is neither a string nor a list).
    pub fn from_json(value: &Value) -> Option<Content> {
        match value {
            Value::String(text) => Some(Content::Text(text.clone())),
            Value::Array(parts) => {
                Some(Content::Parts(parts.iter().map(Part::from_json).collect()))
            }
            _ => None,
        }
    }
}

impl Part {
    fn to_json(&self) -> Value {
        match self {
            Part::Text(text) => json!({"type": "text", "text": text}),
            Part::Image { url, detail } => {
                let mut image = json!({"url": url});
                if let Some(detail) = detail {
                    image["detail"] = json!(detail);
                }
                json!({"type": "image_url", "image_url": image})
            }
            Part::Other(other) => other.clone(),
        }
    }

    /// A text or image part when writing it again gives the same JSON, keys in the same order
    /// (the JSON form is hashed, see the module's comment); any other part as it is.
    fn from_json(value: &Value) -> Part {
        fn keys(fields: &Map<String, Value>) -> Vec<&str> {
            fields.keys().map(String::as_str).collect()
        }
        let Value::Object(fields) = value else {
            return Part::Other(value.clone());
        };
        match (
            keys(fields).as_slice(),
            fields.get("type").and_then(Value::as_str),
        ) {
            (["type", "text"], Some("text")) => {
                if let Some(text) = fields.get("text").and_then(Value::as_str) {
                    return Part::Text(text.to_owned());
                }
            }
            (["type", "image_url"], Some("image_url")) => {
                if let Some(Value::Object(image)) = fields.get("image_url") {
                    let url = image.get("url").and_then(Value::as_str);
                    let detail = image.get("detail").and_then(Value::as_str);
                    match (keys(image).as_slice(), url, detail) {
                        (["url"], Some(url), _) => {
                            return Part::Image {
                                url: url.to_owned(),
                                detail: None,
                            }
                        }
                        (["url", "detail"], Some(url), Some(detail)) => {
                            return Part::Image {
                                url: url.to_owned(),
                                detail: Some(detail.to_owned()),
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        Part::Other(value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_read_from_json_is_written_back_the_same() {
        let forms = [
            json!("plain"),
            json!([{"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
                {"type": "text", "text": "cached", "cache_control": {"type": "ephemeral"}},
                {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}},
                {"type": "image_url", "image_url": {"url": "u", "detail": 3}},
                {"text": "keys in another order", "type": "text"},
                {"type": "image_url", "image_url": {"detail": "high", "url": "u"}},
                "a bare string part"]),
            json!([]),
        ];
        for form in forms {
            let content = Content::from_json(&form).expect("content");
            // The same text, keys in the same order: what a conversation id is hashed from.
            assert_eq!(content.to_json().to_string(), form.to_string());
        }
        assert_eq!(Content::from_json(&Value::Null), None);
    }

    #[test]
    fn text_reads_strings_and_text_parts() {
        let parts = Content::from_json(&json!([{"type": "text", "text": "a"},
            {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "text", "text": "b", "cache_control": {}}]))
        .expect("parts");
        assert_eq!(parts.text(), "a\nb");
        assert_eq!(Content::Text("hi".into()).text(), "hi");
    }

    #[test]
    fn added_text_is_a_paragraph_of_a_text_or_a_part_of_parts() {
        let mut text = Some(Content::Text("question".into()));
        Content::add_text(&mut text, "memory", true);
        assert_eq!(text, Some(Content::Text("memory\n\nquestion".into())));
        let mut parts = Some(Content::Parts(vec![Part::Text("q".into())]));
        Content::add_text(&mut parts, "memory", false);
        assert_eq!(
            parts.map(|p| p.to_json()),
            Some(json!([{"type": "text", "text": "q"}, {"type": "text", "text": "memory"}]))
        );
        for mut empty in [None, Some(Content::Text(String::new()))] {
            Content::add_text(&mut empty, "memory", true);
            assert_eq!(empty, Some(Content::Text("memory".into())));
        }
    }
}
