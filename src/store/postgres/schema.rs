//! The PostgreSQL schema, as versioned migrations applied in order at connect time. Replicas
//! starting together take turns under an advisory lock; a version, once released, is never
//! edited: a change is a new version.

use tokio_postgres::Client;

use crate::store::{StoreError, StoreResult};

/// Arbitrary, fixed: the advisory lock key of schema migrations.
const MIGRATION_LOCK: i64 = 0x6d65_6d70_0001;

const MIGRATIONS: [(i32, &str); 4] = [
    (1, SCHEMA_V1),
    (2, SCHEMA_V2),
    (3, SCHEMA_V3),
    (4, SCHEMA_V4),
];

/// Whom each memory is about (`Memory::subject`); NULL for the memories before it.
const SCHEMA_V2: &str = "ALTER TABLE memories ADD COLUMN subject TEXT;";

/// A past turn is also found by the words of the turn before it, at half the weight of its own:
/// an answer ("Yes, last May") carries few of the words of the question it answers, and the
/// question does. `context` is the live turn at the position before, in the same conversation,
/// when the turn is stored (a trigger, so every insert path sets it); the turn's own words have
/// weight A in `tsv` and the context's weight B (`search::RANK_WEIGHTS`), and a search for what
/// the user said matches weight A only.
const SCHEMA_V3: &str = r#"
ALTER TABLE messages ADD COLUMN context TEXT;
UPDATE messages m SET context = (
    SELECT COALESCE(p.search_text, p.content) FROM messages p
    WHERE p.conversation_id = m.conversation_id AND p.position = m.position - 1
    ORDER BY p.superseded, p.id DESC LIMIT 1);
DROP INDEX messages_fts;
ALTER TABLE messages DROP COLUMN tsv;
ALTER TABLE messages ADD COLUMN tsv tsvector GENERATED ALWAYS AS
    (setweight(to_tsvector('english', COALESCE(search_text, content)), 'A')
     || setweight(to_tsvector('english', COALESCE(context, '')), 'B')) STORED;
CREATE INDEX messages_fts ON messages USING GIN (tsv);
CREATE FUNCTION messages_context() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.context := (
        SELECT COALESCE(p.search_text, p.content) FROM messages p
        WHERE p.conversation_id = NEW.conversation_id AND p.position = NEW.position - 1
        ORDER BY p.superseded, p.id DESC LIMIT 1);
    RETURN NEW;
END $$;
CREATE TRIGGER messages_context BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_context();
"#;

/// The first turn of a branch (an edited message, a regenerated answer) has the turn before it in
/// the conversation it branched from, not in its own: its `context` is read there when its own
/// conversation has none. The branches' first turns stored before get theirs.
const SCHEMA_V4: &str = r#"
CREATE OR REPLACE FUNCTION messages_context() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.context := COALESCE(
        (SELECT COALESCE(p.search_text, p.content) FROM messages p
         WHERE p.conversation_id = NEW.conversation_id AND p.position = NEW.position - 1
         ORDER BY p.superseded, p.id DESC LIMIT 1),
        (SELECT COALESCE(p.search_text, p.content) FROM conversations b
         JOIN conversations f ON f.uid = b.uid AND f.external_id = b.parent
         JOIN messages p ON p.conversation_id = f.id
         WHERE b.id = NEW.conversation_id AND p.position = NEW.position - 1
         ORDER BY p.superseded, p.id DESC LIMIT 1));
    RETURN NEW;
END $$;
UPDATE messages m SET context = (
    SELECT COALESCE(p.search_text, p.content) FROM conversations b
    JOIN conversations f ON f.uid = b.uid AND f.external_id = b.parent
    JOIN messages p ON p.conversation_id = f.id
    WHERE b.id = m.conversation_id AND p.position = m.position - 1
    ORDER BY p.superseded, p.id DESC LIMIT 1)
WHERE m.context IS NULL AND EXISTS (
    SELECT 1 FROM conversations b
    WHERE b.id = m.conversation_id AND b.parent IS NOT NULL AND m.position = b.fork_position);
"#;

/// Every table of memory carries `uid`, so every query is scoped by (tenant, user). Vectors are
/// pgvector columns without a fixed dimension (`embedding_model` names their model: vectors of
/// different models are never compared); the HNSW index of each model is made when its first
/// vector is stored (see `search::ensure_vector_index`). Keyword search uses a generated
/// `tsvector` column with a GIN index.
const SCHEMA_V1: &str = r#"
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE users (
    id          BIGSERIAL PRIMARY KEY,
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (tenant, name)
);

CREATE TABLE jobs (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    dedupe_key  TEXT,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'merged')),
    attempts    BIGINT NOT NULL DEFAULT 0,
    run_after   BIGINT NOT NULL,
    last_error  TEXT,
    report      TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX jobs_ready ON jobs(state, run_after);
CREATE UNIQUE INDEX jobs_pending_dedupe ON jobs(dedupe_key) WHERE state = 'queued';
CREATE INDEX jobs_running_by_user ON jobs(uid) WHERE state = 'running';

CREATE TABLE conversations (
    id                BIGSERIAL PRIMARY KEY,
    uid               BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    external_id       TEXT NOT NULL,
    agent             TEXT NOT NULL DEFAULT 'default',
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    extracted_through BIGINT NOT NULL DEFAULT -1,
    parent            TEXT,
    fork_position     BIGINT NOT NULL DEFAULT 0,
    UNIQUE (uid, external_id)
);

CREATE TABLE messages (
    id              BIGSERIAL PRIMARY KEY,
    uid             BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id BIGINT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position        BIGINT NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT NOT NULL,
    name            TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    created_at      BIGINT NOT NULL,
    token_count     BIGINT NOT NULL,
    content_hash    TEXT NOT NULL,
    search_text     TEXT,
    superseded      BOOLEAN NOT NULL DEFAULT FALSE,
    outdated_at     BIGINT,
    embedding_model TEXT,
    embedding       vector,
    tsv             tsvector GENERATED ALWAYS AS
                        (to_tsvector('english', COALESCE(search_text, content))) STORED,
    UNIQUE (conversation_id, position, content_hash)
);
CREATE INDEX messages_by_user_time ON messages(uid, created_at);
CREATE INDEX messages_fts ON messages USING GIN (tsv);

CREATE TABLE memories (
    id              BIGSERIAL PRIMARY KEY,
    uid             BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    text            TEXT NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'fact',
    sources         TEXT NOT NULL DEFAULT '[]',
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    valid_until     BIGINT,
    content_hash    TEXT NOT NULL,
    embedding_model TEXT,
    embedding       vector,
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE INDEX memories_by_user ON memories(uid, valid_until);
CREATE UNIQUE INDEX memories_live_unique ON memories(uid, content_hash) WHERE valid_until IS NULL;
CREATE INDEX memories_fts ON memories USING GIN (tsv);

CREATE TABLE memory_events (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id   BIGINT NOT NULL,
    action      TEXT NOT NULL
                CHECK (action IN ('add', 'update', 'invalidate', 'delete', 'restore')),
    old_value   TEXT,
    new_value   TEXT,
    cause       TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX memory_events_by_memory ON memory_events(uid, memory_id);

CREATE TABLE archival_passages (
    id              BIGSERIAL PRIMARY KEY,
    uid             BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent           TEXT NOT NULL,
    text            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    embedding_model TEXT,
    embedding       vector,
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE INDEX passages_by_agent ON archival_passages(uid, agent);
CREATE INDEX passages_fts ON archival_passages USING GIN (tsv);

CREATE TABLE summaries (
    conversation_id  BIGINT PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    uid              BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    text             TEXT NOT NULL,
    through_position BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);

CREATE TABLE vector_generations (
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    corpus      TEXT NOT NULL,
    generation  BIGINT NOT NULL,
    PRIMARY KEY (uid, corpus)
);

CREATE TABLE core_blocks (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    label       TEXT NOT NULL,
    value       TEXT NOT NULL,
    char_limit  BIGINT NOT NULL,
    read_only   BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at  BIGINT NOT NULL,
    UNIQUE (uid, agent, label)
);

CREATE TABLE agents (
    id               BIGSERIAL PRIMARY KEY,
    uid              BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    system_message   TEXT,
    pressure_alerted BOOLEAN NOT NULL DEFAULT FALSE,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    tags             TEXT NOT NULL DEFAULT '[]',
    memory_epoch     BIGINT NOT NULL DEFAULT 0,
    UNIQUE (uid, name)
);

CREATE TABLE agent_steps (
    id                BIGSERIAL PRIMARY KEY,
    uid               BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent             TEXT NOT NULL,
    turn              TEXT NOT NULL,
    step              BIGINT NOT NULL,
    tool              TEXT NOT NULL,
    arguments         TEXT NOT NULL,
    status            TEXT NOT NULL,
    result            TEXT NOT NULL,
    heartbeat         BOOLEAN NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    latency_ms        DOUBLE PRECISION NOT NULL,
    created_at        BIGINT NOT NULL,
    cached_tokens     BIGINT
);
CREATE INDEX agent_steps_by_agent ON agent_steps(uid, agent, id);

CREATE TABLE agent_pauses (
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    turn        TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (uid, agent)
);

CREATE TABLE shared_blocks (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    label       TEXT NOT NULL,
    value       TEXT NOT NULL,
    char_limit  BIGINT NOT NULL,
    read_only   BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at  BIGINT NOT NULL,
    UNIQUE (uid, name)
);

CREATE TABLE block_attachments (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    block_id    BIGINT NOT NULL REFERENCES shared_blocks(id) ON DELETE CASCADE,
    UNIQUE (uid, agent, block_id)
);
CREATE INDEX block_attachments_by_block ON block_attachments(block_id);

CREATE TABLE responses (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    response_id TEXT NOT NULL,
    previous    TEXT,
    messages    TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (uid, response_id)
);
"#;

pub async fn migrate(client: &mut Client) -> StoreResult<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version     INTEGER PRIMARY KEY,
             applied_at  TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .await?;
    let current: Option<i32> = tx
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await?
        .get(0);
    for (version, sql) in MIGRATIONS {
        if current.is_some_and(|current| version <= current) {
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    let version: Option<String> = tx
        .query_opt(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
            &[],
        )
        .await?
        .map(|row| row.get(0));
    tx.commit().await?;
    check_pgvector(version.as_deref())
}

/// pgvector 0.8 or newer: its iterative index scans keep a search filtered by user complete
/// (an older HNSW scan stops at `ef_search` candidates, too few when they are other users' rows).
fn check_pgvector(version: Option<&str>) -> StoreResult<()> {
    let parsed: Option<(u32, u32)> = version.and_then(|v| {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
        Some((parts.next()??, parts.next()??))
    });
    match parsed {
        Some(found) if found >= (0, 8) => Ok(()),
        _ => Err(StoreError::Invalid(format!(
            "the database has pgvector {}; memproxy needs pgvector 0.8 or newer",
            version.unwrap_or("(none)")
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pgvector_before_0_8_is_refused() {
        assert!(super::check_pgvector(Some("0.8.2")).is_ok());
        assert!(super::check_pgvector(Some("1.0")).is_ok());
        assert!(super::check_pgvector(Some("0.7.4")).is_err());
        assert!(super::check_pgvector(None).is_err());
    }
}
