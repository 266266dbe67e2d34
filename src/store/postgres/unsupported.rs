//! What the PostgreSQL backend does not have yet: explicit-mode agents (with their shared
//! blocks) and export/import. Writes answer [`StoreError::Unsupported`] with what to do instead;
//! reads answer what is true of this backend (it holds no agents), so listings stay usable.

use super::PostgresStore;
use crate::store::{
    AgentCounts, AgentMessage, AgentRecord, Agents, CoreBlock, Embedding, ImportCounts, Page,
    Passage, SharedBlock, SharedBlocks, StepRecord, StoreError, StoreResult, StoredMessage,
    Summary, Transfer, UserBundle, UserScope,
};

fn agents() -> StoreError {
    StoreError::Unsupported(
        "explicit-mode agents are not available on the PostgreSQL store yet; use implicit mode, \
         or the SQLite store for explicit mode"
            .to_owned(),
    )
}

fn transfer() -> StoreError {
    StoreError::Unsupported(
        "export and import are not available on the PostgreSQL store yet".to_owned(),
    )
}

impl Agents for PostgresStore {
    fn core_blocks(&self, _scope: &UserScope, _agent: &str) -> StoreResult<Vec<CoreBlock>> {
        Ok(Vec::new())
    }

    fn put_core_block(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _block: &CoreBlock,
    ) -> StoreResult<()> {
        Err(agents())
    }

    fn edit_core_block(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _label: &str,
        _edit: &mut dyn FnMut(&CoreBlock) -> Result<String, String>,
    ) -> StoreResult<Result<Result<CoreBlock, String>, Vec<String>>> {
        Err(agents())
    }

    fn insert_passage(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _text: &str,
        _created_at_ms: i64,
        _embedding: Option<&Embedding>,
    ) -> StoreResult<(i64, u64)> {
        Err(agents())
    }

    fn list_passages(
        &self,
        _scope: &UserScope,
        _agent: Option<&str>,
        _page: Page,
    ) -> StoreResult<Vec<Passage>> {
        Ok(Vec::new())
    }

    fn delete_passage(&self, _scope: &UserScope, _agent: &str, _id: i64) -> StoreResult<u64> {
        Err(agents())
    }

    fn delete_core_block(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _label: &str,
    ) -> StoreResult<bool> {
        Err(agents())
    }

    fn ensure_agent(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _blocks: &[CoreBlock],
    ) -> StoreResult<AgentRecord> {
        Err(agents())
    }

    fn list_agents(&self, _scope: &UserScope) -> StoreResult<Vec<AgentRecord>> {
        Ok(Vec::new())
    }

    fn agent_memory_epoch(&self, _scope: &UserScope, _agent: &str) -> StoreResult<i64> {
        Ok(0)
    }

    fn set_agent_state(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _system: Option<(&str, i64)>,
        _pressure_alerted: bool,
    ) -> StoreResult<()> {
        Err(agents())
    }

    fn reset_agent(&self, _scope: &UserScope, _agent: &str) -> StoreResult<bool> {
        Err(agents())
    }

    fn paused_turn(&self, _scope: &UserScope, _agent: &str) -> StoreResult<Option<String>> {
        Ok(None)
    }

    fn set_paused_turn(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _paused: Option<(&str, &str)>,
    ) -> StoreResult<()> {
        Err(agents())
    }

    fn delete_agent_message(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _position: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, u64)> {
        Err(agents())
    }

    #[allow(clippy::type_complexity)]
    fn append_agent_messages(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _messages: &[(AgentMessage, Option<Embedding>)],
        _end_pause: bool,
    ) -> StoreResult<(Vec<StoredMessage>, Option<(i64, u64)>)> {
        Err(agents())
    }

    fn set_agent_tags(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _tags: &[String],
    ) -> StoreResult<bool> {
        Err(agents())
    }

    fn agent_context(
        &self,
        _scope: &UserScope,
        _agent: &str,
    ) -> StoreResult<(Option<Summary>, Vec<StoredMessage>)> {
        Err(agents())
    }

    fn agent_counts(&self, _scope: &UserScope, _agent: &str) -> StoreResult<AgentCounts> {
        Err(agents())
    }

    fn messages_between(
        &self,
        _scope: &UserScope,
        _conversation: &str,
        _from_ms: i64,
        _to_ms: i64,
        _page: Page,
    ) -> StoreResult<(usize, Vec<StoredMessage>)> {
        Err(agents())
    }

    fn record_steps(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _steps: &[StepRecord],
        _keep_turns: usize,
    ) -> StoreResult<()> {
        Err(agents())
    }

    fn agent_steps(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _turns: usize,
    ) -> StoreResult<Vec<StepRecord>> {
        Ok(Vec::new())
    }
}

impl SharedBlocks for PostgresStore {
    fn shared_blocks(&self, _scope: &UserScope) -> StoreResult<Vec<SharedBlock>> {
        Ok(Vec::new())
    }

    fn put_shared_block(&self, _scope: &UserScope, _block: &SharedBlock) -> StoreResult<()> {
        Err(agents())
    }

    fn delete_shared_block(&self, _scope: &UserScope, _name: &str) -> StoreResult<bool> {
        Ok(false)
    }

    fn attach_shared_block(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _name: &str,
        _starting: &[CoreBlock],
    ) -> StoreResult<()> {
        Err(agents())
    }

    fn detach_shared_block(
        &self,
        _scope: &UserScope,
        _agent: &str,
        _name: &str,
    ) -> StoreResult<bool> {
        Ok(false)
    }
}

impl Transfer for PostgresStore {
    fn export_user(&self, _scope: &UserScope) -> StoreResult<Option<UserBundle>> {
        Err(transfer())
    }

    fn import_user(&self, _scope: &UserScope, _bundle: &UserBundle) -> StoreResult<ImportCounts> {
        Err(transfer())
    }
}
