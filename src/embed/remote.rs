//! The `openai` embedder: any OpenAI-compatible `POST {url}/embeddings` endpoint, batched.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{normalize, EmbedError, Embedder};
use crate::secret::Secret;

pub struct OpenAiEmbedder {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<Secret>,
    dimensions: usize,
    model_id: String,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    #[serde(default)]
    index: usize,
    embedding: Vec<f32>,
}

/// Inputs per request: OpenAI accepts 2048; smaller batches keep one failure cheap.
const BATCH: usize = 256;

impl OpenAiEmbedder {
    pub fn new(
        url: &str,
        model: &str,
        api_key: Option<Secret>,
        dimensions: usize,
    ) -> Result<OpenAiEmbedder, EmbedError> {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|error| EmbedError::Remote(error.to_string()))?;
        Ok(OpenAiEmbedder {
            client,
            url: format!("{}/embeddings", url.trim_end_matches('/')),
            model: model.to_owned(),
            api_key,
            dimensions,
            model_id: format!("openai:{model}"),
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        // Errors name no URL: a query string may carry a key.
        let response = request
            .send()
            .await
            .map_err(|error| EmbedError::Remote(error.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            return Err(EmbedError::Remote(format!("{status}: {body}")));
        }
        let mut parsed: EmbeddingsResponse = response
            .json()
            .await
            .map_err(|error| EmbedError::Remote(format!("unexpected answer: {error}")))?;
        if parsed.data.len() != texts.len() {
            return Err(EmbedError::Remote(format!(
                "asked for {} embeddings, got {}",
                texts.len(),
                parsed.data.len()
            )));
        }
        parsed.data.sort_by_key(|item| item.index);
        parsed
            .data
            .into_iter()
            .map(|item| {
                if item.embedding.len() != self.dimensions {
                    return Err(EmbedError::Remote(format!(
                        "expected {} dimensions, got {} (set embedding.dimensions)",
                        self.dimensions,
                        item.embedding.len()
                    )));
                }
                let mut vector = item.embedding;
                normalize(&mut vector);
                Ok(vector)
            })
            .collect()
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }
}
