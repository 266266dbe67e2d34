//! Opening the memory layer of a configuration, for the server and every command that works on
//! the data directory (the CLI, `memproxy mcp`).

use std::sync::Arc;

use super::MemoryService;
use crate::config::Config;

impl MemoryService {
    /// Opens the memory layer of a config: database, embedder (the local model loads now, so a
    /// missing model stops start-up with the command that installs it) and vector indexes.
    pub async fn from_config(config: &Config) -> anyhow::Result<Arc<MemoryService>> {
        let config = config.clone();
        let service = tokio::task::spawn_blocking(move || -> anyhow::Result<MemoryService> {
            let embedder = crate::embed::from_config(
                &config.embedding,
                &config.data_dir,
                config.upstream.api_key.as_ref(),
            )?;
            let service =
                MemoryService::open_configured(&config.store, &config.data_dir, embedder)?
                    .with_limits(config.limits.clone());
            service
                .vectors()
                .set_open_limit(config.memory.open_vector_indexes);
            Ok(service)
        })
        .await??;
        Ok(Arc::new(service))
    }
}
