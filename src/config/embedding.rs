//! Configuration of the embedding model (`[embedding]`): the local ONNX model or a remote
//! `/v1/embeddings` endpoint. Read by `embed`, which re-exports these types; they live here,
//! below it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

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
