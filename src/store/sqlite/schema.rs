//! The SQLite schema as an ordered list of migrations; `schema_migrations` records which ran.
//!
//! Append only: a released migration is never edited, a change is a new entry. Every table that
//! holds memory carries `uid` (the internal id of one tenant's user) so every query can be scoped.

pub const MIGRATIONS: &[&str] = &[
    // 1: everything the memory layer needs.
    r#"
CREATE TABLE users (
    id          INTEGER PRIMARY KEY,
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (tenant, name)
);

CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    external_id TEXT NOT NULL,
    agent       TEXT NOT NULL DEFAULT 'default',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    -- Newest position the fact extractor has read (post-processing progress).
    extracted_through INTEGER NOT NULL DEFAULT -1,
    UNIQUE (uid, external_id)
);

-- The recall log: every turn, deduplicated by conversation + position + content hash. A turn
-- replaced by an edit or a regeneration is kept but marked superseded (not searched).
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    uid             INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position        INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT NOT NULL,
    name            TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    created_at      INTEGER NOT NULL,
    token_count     INTEGER NOT NULL,
    content_hash    TEXT NOT NULL,
    embedding_model TEXT,
    embedding       BLOB,
    superseded      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (conversation_id, position, content_hash)
);
CREATE INDEX messages_by_user_time ON messages(uid, created_at);

-- Facts about the user. Invalidated facts keep their row with valid_until set.
CREATE TABLE memories (
    id              INTEGER PRIMARY KEY,
    uid             INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    text            TEXT NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'fact',
    sources         TEXT NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    valid_until     INTEGER,
    content_hash    TEXT NOT NULL,
    embedding_model TEXT,
    embedding       BLOB
);
CREATE INDEX memories_by_user ON memories(uid, valid_until);
CREATE UNIQUE INDEX memories_live_unique ON memories(uid, content_hash) WHERE valid_until IS NULL;

CREATE TABLE core_blocks (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    label       TEXT NOT NULL,
    value       TEXT NOT NULL,
    char_limit  INTEGER NOT NULL,
    read_only   INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL,
    UNIQUE (uid, agent, label)
);

CREATE TABLE archival_passages (
    id              INTEGER PRIMARY KEY,
    uid             INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent           TEXT NOT NULL,
    text            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    embedding_model TEXT,
    embedding       BLOB
);
CREATE INDEX passages_by_agent ON archival_passages(uid, agent);

CREATE TABLE summaries (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    uid             INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    text            TEXT NOT NULL,
    through_position INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

-- Durable work queue (post-processing); survives restarts.
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    dedupe_key  TEXT,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    run_after   INTEGER NOT NULL,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX jobs_ready ON jobs(state, run_after);
CREATE UNIQUE INDEX jobs_pending_dedupe ON jobs(dedupe_key) WHERE state = 'queued';

-- Audit log of every change to a memory.
CREATE TABLE memory_events (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id   INTEGER NOT NULL,
    action      TEXT NOT NULL CHECK (action IN ('add', 'update', 'invalidate', 'delete')),
    old_value   TEXT,
    new_value   TEXT,
    cause       TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX memory_events_by_memory ON memory_events(uid, memory_id);

-- Bumped with every change to a scope's vectors; the on-disk index records the generation it
-- holds, so a stale index (crash, another process) is detected and rebuilt.
CREATE TABLE vector_generations (
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    corpus      TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    PRIMARY KEY (uid, corpus)
);

-- Keyword search (BM25). Contentless FTS tables (the text lives in the base tables) with a
-- `scope` column holding 'u<uid>', so a search intersects the user's postings instead of
-- scanning every user's matches. Kept in step by triggers.
CREATE VIRTUAL TABLE messages_fts USING fts5(text, scope, content='', contentless_delete=1, tokenize='unicode61');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text, scope) VALUES (new.id, new.content, 'u' || new.uid);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

CREATE VIRTUAL TABLE memories_fts USING fts5(text, scope, content='', contentless_delete=1, tokenize='unicode61');
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text, scope) VALUES (new.id, new.text, 'u' || new.uid);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
    INSERT INTO memories_fts(rowid, text, scope) VALUES (new.id, new.text, 'u' || new.uid);
END;

CREATE VIRTUAL TABLE passages_fts USING fts5(text, scope, content='', contentless_delete=1, tokenize='unicode61');
CREATE TRIGGER passages_fts_insert AFTER INSERT ON archival_passages BEGIN
    INSERT INTO passages_fts(rowid, text, scope) VALUES (new.id, new.text, 'u' || new.uid);
END;
CREATE TRIGGER passages_fts_delete AFTER DELETE ON archival_passages BEGIN
    DELETE FROM passages_fts WHERE rowid = old.id;
END;
"#,
    // 2: explicit-mode agents (one row per user and agent, with the compiled system message kept
    // for prompt caching), the step trace of their turns, and a separate search text for turns
    // whose wire form is not what should be searched (an agent's JSON-wrapped user messages).
    r#"
CREATE TABLE agents (
    id               INTEGER PRIMARY KEY,
    uid              INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    system_message   TEXT,
    pressure_alerted INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (uid, name)
);

CREATE TABLE agent_steps (
    id                INTEGER PRIMARY KEY,
    uid               INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent             TEXT NOT NULL,
    turn              TEXT NOT NULL,
    step              INTEGER NOT NULL,
    tool              TEXT NOT NULL,
    arguments         TEXT NOT NULL,
    status            TEXT NOT NULL,
    result            TEXT NOT NULL,
    heartbeat         INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_ms        REAL NOT NULL,
    created_at        INTEGER NOT NULL
);
CREATE INDEX agent_steps_by_agent ON agent_steps(uid, agent, id);

ALTER TABLE messages ADD COLUMN search_text TEXT;
DROP TRIGGER messages_fts_insert;
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text, scope)
    VALUES (new.id, COALESCE(new.search_text, new.content), 'u' || new.uid);
END;
"#,
    // 3: a job that must go back to the queue while a newer one with its key is queued merges
    // into that one (state `merged`) instead of colliding with the one-queued-job-per-key index.
    r#"
CREATE TABLE jobs_v3 (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    dedupe_key  TEXT,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'merged')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    run_after   INTEGER NOT NULL,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
INSERT INTO jobs_v3 SELECT id, uid, kind, dedupe_key, payload, state, attempts, run_after,
    last_error, created_at, updated_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v3 RENAME TO jobs;
CREATE INDEX jobs_ready ON jobs(state, run_after);
CREATE UNIQUE INDEX jobs_pending_dedupe ON jobs(dedupe_key) WHERE state = 'queued';
CREATE INDEX jobs_running_by_user ON jobs(uid) WHERE state = 'running';
"#,
    // 4: branches. A history that leaves a conversation's log (another chat with the same
    // opening, an edit, a regeneration) continues in a conversation of its own that names its
    // parent and the position it leaves it at; nothing is superseded any more.
    r#"
ALTER TABLE conversations ADD COLUMN parent TEXT;
ALTER TABLE conversations ADD COLUMN fork_position INTEGER NOT NULL DEFAULT 0;
"#,
    // 5: what a finished job did ("2 added, 1 rejected (question)"), for the console.
    r#"
ALTER TABLE jobs ADD COLUMN report TEXT;
"#,
    // 6: keyword search finds a word's other forms ("live" finds "lives", "moving" finds
    // "moved"): the full-text indexes use the Porter stemmer, rebuilt from their rows. And a turn
    // whose facts were since replaced by newer ones (a reconcile update or retirement, or an edit)
    // is marked `outdated_at`: implicit mode no longer injects it beside the newer fact.
    r#"
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5(text, scope, content='', contentless_delete=1, tokenize='porter unicode61');
INSERT INTO memories_fts(rowid, text, scope) SELECT id, text, 'u' || uid FROM memories;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(text, scope, content='', contentless_delete=1, tokenize='porter unicode61');
INSERT INTO messages_fts(rowid, text, scope)
    SELECT id, COALESCE(search_text, content), 'u' || uid FROM messages;
DROP TABLE passages_fts;
CREATE VIRTUAL TABLE passages_fts USING fts5(text, scope, content='', contentless_delete=1, tokenize='porter unicode61');
INSERT INTO passages_fts(rowid, text, scope) SELECT id, text, 'u' || uid FROM archival_passages;
ALTER TABLE messages ADD COLUMN outdated_at INTEGER;
"#,
    // 7: a retired memory can be made live again (`restore`, audited like every change).
    r#"
CREATE TABLE memory_events_v7 (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id   INTEGER NOT NULL,
    action      TEXT NOT NULL CHECK (action IN ('add', 'update', 'invalidate', 'delete', 'restore')),
    old_value   TEXT,
    new_value   TEXT,
    cause       TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
INSERT INTO memory_events_v7 SELECT id, uid, memory_id, action, old_value, new_value, cause,
    created_at FROM memory_events;
DROP TABLE memory_events;
ALTER TABLE memory_events_v7 RENAME TO memory_events;
CREATE INDEX memory_events_by_memory ON memory_events(uid, memory_id);
"#,
    // 8: an agent step notes how many of its prompt tokens the upstream served from its prompt
    // cache, where the upstream says so (NULL: not reported).
    r#"
ALTER TABLE agent_steps ADD COLUMN cached_tokens INTEGER;
"#,
    // 9: the Responses API's response log (`previous_response_id` against an upstream that keeps
    // no state; `GET`/`DELETE /v1/responses/{id}`).
    r#"
CREATE TABLE responses (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    response_id TEXT NOT NULL,
    previous    TEXT,
    messages    TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (uid, response_id)
);
"#,
    // 10: an agent turn paused on the client's tool calls (explicit mode with client tools): the
    // turn's state until the client's next request brings the results. One per agent.
    r#"
CREATE TABLE agent_pauses (
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    turn        TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (uid, agent)
);
"#,
    // 11: agent tags (`send_message_to_agents_matching_tags`), a JSON array of strings.
    r#"
ALTER TABLE agents ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
"#,
    // 12: shared core-memory blocks (one block attached to several agents of a user; an edit by
    // one is in the others' next context), and an agent's memory epoch: bumped by every change to
    // what its system message shows, so a turn that compiled an older memory does not store its
    // system message over a newer change.
    r#"
CREATE TABLE shared_blocks (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    label       TEXT NOT NULL,
    value       TEXT NOT NULL,
    char_limit  INTEGER NOT NULL,
    read_only   INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL,
    UNIQUE (uid, name)
);
CREATE TABLE block_attachments (
    id          INTEGER PRIMARY KEY,
    uid         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    block_id    INTEGER NOT NULL REFERENCES shared_blocks(id) ON DELETE CASCADE,
    UNIQUE (uid, agent, block_id)
);
CREATE INDEX block_attachments_by_block ON block_attachments(block_id);
ALTER TABLE agents ADD COLUMN memory_epoch INTEGER NOT NULL DEFAULT 0;
"#,
    // 13: deleted entries leave no tokens in the full-text indexes (FTS5's `secure-delete`;
    // `secure_delete` on every connection does the same for table pages): a deleted user, memory
    // or message is gone from the file, not only from the listings.
    r#"
INSERT INTO memories_fts(memories_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO passages_fts(passages_fts, rank) VALUES ('secure-delete', 1);
"#,
    // 14: whom each memory is about (`Memory::subject`); NULL for the memories before it.
    r#"
ALTER TABLE memories ADD COLUMN subject TEXT;
"#,
    // 15: a past turn is also found by the words of the turn before it (its `context` column,
    // ranked at half the weight of its own words): an answer ("Yes, last May") carries few of the
    // words of the question it answers, and the question that asked it does. The previous turn is
    // the live one at the position before, in the same conversation, when the turn is stored.
    r#"
DROP TRIGGER messages_fts_insert;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(text, scope, context, content='', contentless_delete=1, tokenize='porter unicode61');
INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO messages_fts(rowid, text, scope, context)
    SELECT m.id, COALESCE(m.search_text, m.content), 'u' || m.uid,
           COALESCE((SELECT COALESCE(p.search_text, p.content) FROM messages p
                     WHERE p.conversation_id = m.conversation_id AND p.position = m.position - 1
                     ORDER BY p.superseded, p.id DESC LIMIT 1), '')
    FROM messages m;
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text, scope, context)
    VALUES (new.id, COALESCE(new.search_text, new.content), 'u' || new.uid,
            COALESCE((SELECT COALESCE(p.search_text, p.content) FROM messages p
                      WHERE p.conversation_id = new.conversation_id
                        AND p.position = new.position - 1
                      ORDER BY p.superseded, p.id DESC LIMIT 1), ''));
END;
"#,
    // 16: the first turn of a branch (an edited message, a regenerated answer) has the turn
    // before it in the conversation it branched from, not in its own: its keyword context is
    // read there when its own conversation has none. The branches' first turns stored before are
    // indexed again.
    r#"
DROP TRIGGER messages_fts_insert;
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text, scope, context)
    VALUES (new.id, COALESCE(new.search_text, new.content), 'u' || new.uid,
            COALESCE((SELECT COALESCE(p.search_text, p.content) FROM messages p
                      WHERE p.conversation_id = new.conversation_id
                        AND p.position = new.position - 1
                      ORDER BY p.superseded, p.id DESC LIMIT 1),
                     (SELECT COALESCE(p.search_text, p.content) FROM conversations b
                      JOIN conversations f ON f.uid = b.uid AND f.external_id = b.parent
                      JOIN messages p ON p.conversation_id = f.id
                      WHERE b.id = new.conversation_id AND p.position = new.position - 1
                      ORDER BY p.superseded, p.id DESC LIMIT 1), ''));
END;
DELETE FROM messages_fts WHERE rowid IN (
    SELECT m.id FROM messages m JOIN conversations b ON b.id = m.conversation_id
    WHERE b.parent IS NOT NULL AND m.position = b.fork_position);
INSERT INTO messages_fts(rowid, text, scope, context)
    SELECT m.id, COALESCE(m.search_text, m.content), 'u' || m.uid,
           COALESCE((SELECT COALESCE(p.search_text, p.content) FROM conversations f
                     JOIN messages p ON p.conversation_id = f.id
                     WHERE f.uid = b.uid AND f.external_id = b.parent
                       AND p.position = m.position - 1
                     ORDER BY p.superseded, p.id DESC LIMIT 1), '')
    FROM messages m JOIN conversations b ON b.id = m.conversation_id
    WHERE b.parent IS NOT NULL AND m.position = b.fork_position;
"#,
];

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::MIGRATIONS;

    /// The rows of `messages_fts` whose keyword context matches `word`.
    fn context_matches(db: &Connection, word: &str) -> Vec<i64> {
        let mut statement = db
            .prepare("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?1 ORDER BY rowid")
            .expect("prepare");
        let rows = statement
            .query_map([format!("context: {word}")], |row| row.get(0))
            .expect("query");
        rows.collect::<Result<_, _>>().expect("rows")
    }

    #[test]
    fn migration_16_gives_a_branchs_first_turn_the_question_before_the_fork() {
        let db = Connection::open_in_memory().expect("db");
        for migration in &MIGRATIONS[..15] {
            db.execute_batch(migration).expect("migration up to 15");
        }
        db.execute_batch(
            "INSERT INTO users (id, tenant, name, created_at) VALUES (1, 't', 'u', 0);
             INSERT INTO conversations (id, uid, external_id, created_at, updated_at)
                 VALUES (1, 1, 'c', 0, 0);
             INSERT INTO conversations (id, uid, external_id, created_at, updated_at, parent, fork_position)
                 VALUES (2, 1, 'c-b', 0, 0, 'c', 2);
             INSERT INTO messages (id, uid, conversation_id, position, role, content, created_at, token_count, content_hash)
                 VALUES (1, 1, 1, 0, 'user', 'I am planning a weekend.', 0, 5, 'a'),
                        (2, 1, 1, 1, 'assistant', 'Have you seen the lighthouse?', 0, 5, 'b'),
                        (3, 1, 1, 2, 'user', 'Not yet.', 0, 2, 'c'),
                        (4, 1, 2, 2, 'user', 'Yes, last May.', 0, 3, 'd');",
        )
        .expect("rows at version 15");
        // Before: the branch's first turn has no context (its conversation has no turn before).
        assert_eq!(context_matches(&db, "lighthouse"), [3]);
        db.execute_batch(MIGRATIONS[15]).expect("migration 16");
        assert_eq!(context_matches(&db, "lighthouse"), [3, 4]);
        // A turn stored after it gets the same from the trigger, and the others keep theirs.
        db.execute_batch(
            "INSERT INTO conversations (id, uid, external_id, created_at, updated_at, parent, fork_position)
                 VALUES (3, 1, 'c-c', 0, 0, 'c', 2);
             INSERT INTO messages (id, uid, conversation_id, position, role, content, created_at, token_count, content_hash)
                 VALUES (5, 1, 3, 2, 'user', 'Twice, with my cousin.', 0, 4, 'e'),
                        (6, 1, 3, 3, 'assistant', 'Lovely.', 0, 1, 'f');",
        )
        .expect("a branch stored after");
        assert_eq!(context_matches(&db, "lighthouse"), [3, 4, 5]);
        assert_eq!(context_matches(&db, "cousin"), [6]);
        assert_eq!(context_matches(&db, "planning"), [2]);
    }
}
