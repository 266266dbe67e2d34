//! Token counting with a real BPE tokenizer (tiktoken's `cl100k_base`), for budgets.
//!
//! Exact counts depend on the upstream model's tokenizer; cl100k is the OpenAI chat encoding and
//! within a few percent of Llama/Qwen tokenizers on English text, far closer than characters / 4.
//! The encoder is built once per process (it takes ~100 ms).

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

static ENCODER: OnceLock<Option<CoreBPE>> = OnceLock::new();

fn encoder() -> Option<&'static CoreBPE> {
    ENCODER
        .get_or_init(|| match tiktoken_rs::cl100k_base() {
            Ok(encoder) => Some(encoder),
            Err(error) => {
                tracing::warn!(%error, "tokenizer unavailable; estimating tokens from characters");
                None
            }
        })
        .as_ref()
}

/// Tokens in `text`.
pub fn count(text: &str) -> usize {
    match encoder() {
        Some(encoder) => encoder.encode_ordinary(text).len(),
        None => text.chars().count().div_ceil(4),
    }
}

/// Tokens of a chat message as the upstream bills it: content plus ~4 tokens of framing.
pub fn count_message(role: &str, content: &str) -> usize {
    count(role) + count(content) + 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_cl100k() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        // Known cl100k count for this sentence.
        assert_eq!(count("The quick brown fox jumps over the lazy dog."), 10);
        assert!(count("Ünïcödé and emoji 😀") > 4);
    }
}
