//! The local embedder: all-MiniLM-L6-v2 (int8 ONNX, 384 dims) run by fastembed on onnxruntime,
//! both loaded from the data directory where `scripts/fetch-model` installs them (architecture §6).
//!
//! Embedding is CPU-bound and `TextEmbedding::embed` needs `&mut self`, so the model sits behind a
//! mutex and runs on the blocking pool, never on the async runtime's threads.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};

use super::{normalize, EmbedError, Embedder, EmbeddingConfig};

pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
const ORT_LIBRARY: &str = "libonnxruntime.so.1.24.4";
const DIMENSIONS: usize = 384;

pub struct LocalEmbedder {
    /// A fair (first come, first served) lock: bulk work embeds a batch per call, and every
    /// other caller waits for at most the batch in progress, never for a run of them.
    model: Arc<tokio::sync::Mutex<TextEmbedding>>,
    model_id: String,
}

/// onnxruntime can be loaded once per process; later loads reuse (or report) the first outcome.
static RUNTIME: OnceLock<Result<PathBuf, String>> = OnceLock::new();

fn init_runtime(path: &Path) -> Result<(), EmbedError> {
    let outcome = RUNTIME.get_or_init(|| {
        if !path.is_file() {
            return Err("the file does not exist".to_owned());
        }
        // Loads the library only; fastembed creates the environment on first use.
        ort::init_from(path)
            .map(|_environment_builder| path.to_owned())
            .map_err(|error| error.to_string())
    });
    outcome
        .as_ref()
        .map(|_| ())
        .map_err(|reason| EmbedError::Runtime {
            path: path.display().to_string(),
            reason: reason.clone(),
        })
}

impl LocalEmbedder {
    pub fn load(config: &EmbeddingConfig, data_dir: &Path) -> Result<LocalEmbedder, EmbedError> {
        let model_dir = config
            .model_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("models").join(MODEL_NAME));
        let runtime = config
            .onnxruntime
            .clone()
            .or_else(|| std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from))
            .unwrap_or_else(|| data_dir.join("lib").join(ORT_LIBRARY));
        let read = |name: &str| {
            std::fs::read(model_dir.join(name)).map_err(|_| EmbedError::ModelMissing {
                missing: model_dir.join(name).display().to_string(),
                data_dir: data_dir.display().to_string(),
            })
        };
        let onnx = read("model.onnx")?;
        let tokenizer = TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: read("config.json")?,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        };
        init_runtime(&runtime)?;
        // sentence-transformers MiniLM is trained with mean pooling (fastembed defaults to CLS).
        let model = UserDefinedEmbeddingModel::new(onnx, tokenizer).with_pooling(Pooling::Mean);
        let options = InitOptionsUserDefined::new()
            .with_max_length(256)
            .with_intra_threads(config.threads.max(1))
            .with_session_config("session.intra_op.allow_spinning", "0");
        let embedding = TextEmbedding::try_new_from_user_defined(model, options)
            .map_err(|error| EmbedError::Failed(format!("loading {MODEL_NAME}: {error}")))?;
        Ok(LocalEmbedder {
            model: Arc::new(tokio::sync::Mutex::new(embedding)),
            model_id: format!("local:{MODEL_NAME}"),
        })
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        DIMENSIONS
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut model = Arc::clone(&self.model).lock_owned().await;
        tokio::task::spawn_blocking(move || {
            let mut vectors = model
                .embed(&texts, Some(32))
                .map_err(|error| EmbedError::Failed(error.to_string()))?;
            vectors.iter_mut().for_each(|v| normalize(v));
            Ok(vectors)
        })
        .await
        .map_err(|error| EmbedError::Failed(error.to_string()))?
    }

    async fn warm_up(&self) -> Result<(), EmbedError> {
        self.embed(vec!["warm up".to_owned()]).await.map(|_| ())
    }
}
