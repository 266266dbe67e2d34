//! Facts (`memories`) with their audit log, plus the search-side queries shared by all corpora:
//! keyword search, documents by id, embeddings for index rebuilds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction};

use super::{
    bump_generation, corpus_tables, ensure_uid, find_uid, from_blob, live_condition, require_uid,
    to_blob, within_condition,
};
use crate::store::{
    content_hash, now_ms, Corpus, Document, Embedding, Inserted, Memory, MemoryEvent, NewMemory,
    Page, Source, StoreError, StoreResult, UserScope, Within,
};

fn log_event(
    tx: &Transaction,
    uid: i64,
    memory_id: i64,
    action: &str,
    old: Option<&str>,
    new: Option<&str>,
    cause: &str,
) -> StoreResult<()> {
    tx.execute(
        "INSERT INTO memory_events (uid, memory_id, action, old_value, new_value, cause, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![uid, memory_id, action, old, new, cause, now_ms()],
    )?;
    Ok(())
}

/// The text of the user's memory `id` that meets `condition` (on its `valid_until`).
fn text_of(
    tx: &Transaction,
    uid: i64,
    id: i64,
    condition: &str,
    what: &str,
) -> StoreResult<String> {
    tx.query_row(
        &format!("SELECT text FROM memories WHERE id = ?1 AND uid = ?2 AND {condition}"),
        params![id, uid],
        |row| row.get(0),
    )
    .optional()?
    .ok_or_else(|| StoreError::NotFound(format!("{what} {id}")))
}

fn live_text(tx: &Transaction, uid: i64, id: i64) -> StoreResult<String> {
    text_of(tx, uid, id, "valid_until IS NULL", "memory")
}

/// A write that would make two live memories say the same.
fn duplicate_text(error: rusqlite::Error) -> StoreError {
    match error {
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::DuplicateText
        }
        other => other.into(),
    }
}

fn sources_of(tx: &Transaction, uid: i64, id: i64) -> StoreResult<Vec<Source>> {
    let sources: Option<String> = tx
        .query_row(
            "SELECT sources FROM memories WHERE id = ?1 AND uid = ?2",
            params![id, uid],
            |row| row.get(0),
        )
        .optional()?;
    Ok(sources
        .and_then(|s| serde_json::from_str::<Vec<Source>>(&s).ok())
        .unwrap_or_default())
}

/// The turns a memory was drawn from (except `keep`, which say its new version) are outdated from
/// now on: what they said was replaced, and injecting them beside the newer fact would contradict
/// it. They stay in the recall log and in search.
fn outdate_sources(
    tx: &Transaction,
    uid: i64,
    sources: &[Source],
    keep: &[Source],
) -> StoreResult<()> {
    let mut statement = tx.prepare_cached(
        "UPDATE messages SET outdated_at = ?1
         WHERE uid = ?2 AND position = ?3 AND outdated_at IS NULL
           AND conversation_id = (SELECT id FROM conversations WHERE uid = ?2 AND external_id = ?4)",
    )?;
    let now = now_ms();
    for source in sources.iter().filter(|s| !keep.contains(s)) {
        statement.execute(params![now, uid, source.position, source.conversation])?;
    }
    Ok(())
}

pub fn insert(
    tx: &Transaction,
    scope: &UserScope,
    memory: &NewMemory,
    cause: &str,
) -> StoreResult<Inserted> {
    let text = memory.text.trim();
    if text.is_empty() {
        return Err(StoreError::Invalid("a memory needs text".to_owned()));
    }
    let uid = ensure_uid(tx, scope)?;
    let hash = content_hash(text);
    let existing: Option<i64> = tx
        .query_row(
            "SELECT id FROM memories WHERE uid = ?1 AND content_hash = ?2 AND valid_until IS NULL",
            params![uid, hash],
            |row| row.get(0),
        )
        .optional()?;
    if let Some(id) = existing {
        return Ok(Inserted::Duplicate { id });
    }
    let sources = serde_json::to_string(&memory.sources)
        .map_err(|error| StoreError::Invalid(error.to_string()))?;
    let now = now_ms();
    tx.execute(
        "INSERT INTO memories (uid, text, kind, sources, created_at, updated_at, content_hash,
             embedding_model, embedding)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            uid,
            text,
            memory.kind,
            sources,
            memory.created_at_ms,
            now,
            hash,
            memory.embedding.as_ref().map(|e| e.model.as_str()),
            memory.embedding.as_ref().map(|e| to_blob(&e.vector)),
        ],
    )?;
    let id = tx.last_insert_rowid();
    log_event(tx, uid, id, "add", None, Some(text), cause)?;
    let generation = bump_generation(tx, uid, Corpus::Memory)?;
    Ok(Inserted::New { id, generation })
}

pub fn update(
    tx: &Transaction,
    scope: &UserScope,
    id: i64,
    text: &str,
    embedding: Option<&Embedding>,
    new_sources: &[Source],
    cause: &str,
) -> StoreResult<u64> {
    let text = text.trim();
    if text.is_empty() {
        return Err(StoreError::Invalid("a memory needs text".to_owned()));
    }
    let uid = require_uid(tx, scope)?;
    let old = live_text(tx, uid, id)?;
    let mut sources = sources_of(tx, uid, id)?;
    if old != text {
        outdate_sources(tx, uid, &sources, new_sources)?;
    }
    for source in new_sources {
        if !sources.contains(source) {
            sources.push(source.clone());
        }
    }
    let sources =
        serde_json::to_string(&sources).map_err(|error| StoreError::Invalid(error.to_string()))?;
    tx.execute(
        "UPDATE memories SET text = ?1, content_hash = ?2, updated_at = ?3,
             embedding_model = ?4, embedding = ?5, sources = ?6
         WHERE id = ?7 AND uid = ?8",
        params![
            text,
            content_hash(text),
            now_ms(),
            embedding.map(|e| e.model.as_str()),
            embedding.map(|e| to_blob(&e.vector)),
            sources,
            id,
            uid
        ],
    )
    .map_err(duplicate_text)?;
    log_event(tx, uid, id, "update", Some(&old), Some(text), cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

pub fn invalidate(tx: &Transaction, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
    let uid = require_uid(tx, scope)?;
    let old = live_text(tx, uid, id)?;
    outdate_sources(tx, uid, &sources_of(tx, uid, id)?, &[])?;
    let now = now_ms();
    tx.execute(
        "UPDATE memories SET valid_until = ?1, updated_at = ?1 WHERE id = ?2 AND uid = ?3",
        params![now, id, uid],
    )?;
    log_event(tx, uid, id, "invalidate", Some(&old), None, cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

pub fn restore(tx: &Transaction, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
    let uid = require_uid(tx, scope)?;
    let text = text_of(tx, uid, id, "valid_until IS NOT NULL", "retired memory")?;
    tx.execute(
        "UPDATE memories SET valid_until = NULL, updated_at = ?1 WHERE id = ?2 AND uid = ?3",
        params![now_ms(), id, uid],
    )
    .map_err(duplicate_text)?;
    log_event(tx, uid, id, "restore", None, Some(&text), cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

pub fn delete(tx: &Transaction, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
    let uid = require_uid(tx, scope)?;
    let old = text_of(tx, uid, id, "TRUE", "memory")?;
    tx.execute(
        "DELETE FROM memories WHERE id = ?1 AND uid = ?2",
        params![id, uid],
    )?;
    log_event(tx, uid, id, "delete", Some(&old), None, cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

fn memory_row(row: &rusqlite::Row) -> rusqlite::Result<Memory> {
    let sources: String = row.get(3)?;
    Ok(Memory {
        id: row.get(0)?,
        text: row.get(1)?,
        kind: row.get(2)?,
        sources: serde_json::from_str::<Vec<Source>>(&sources).unwrap_or_default(),
        created_at_ms: row.get(4)?,
        updated_at_ms: row.get(5)?,
        valid_until_ms: row.get(6)?,
        embedding_model: row.get(7)?,
    })
}

pub fn list(
    connection: &Connection,
    scope: &UserScope,
    include_invalid: bool,
    page: Page,
) -> StoreResult<Vec<Memory>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT id, text, kind, sources, created_at, updated_at, valid_until, embedding_model
         FROM memories WHERE uid = ?1 AND (?2 OR valid_until IS NULL)
         ORDER BY id LIMIT ?3 OFFSET ?4",
    )?;
    let rows = statement
        .query_map(
            params![uid, include_invalid, page.limit as i64, page.offset as i64],
            memory_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn events(connection: &Connection, scope: &UserScope) -> StoreResult<Vec<MemoryEvent>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT memory_id, action, old_value, new_value, cause, created_at FROM memory_events
         WHERE uid = ?1 ORDER BY id",
    )?;
    let rows = statement
        .query_map([uid], |row| {
            Ok(MemoryEvent {
                memory_id: row.get(0)?,
                action: row.get(1)?,
                old_value: row.get(2)?,
                new_value: row.get(3)?,
                cause: row.get(4)?,
                created_at_ms: row.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Words too common to help a keyword search (they would match nearly every row).
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not",
    "of", "on", "or", "our", "she", "so", "some", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "to", "up", "us", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// The meaningful words of `text`: lower-cased, deduplicated, without stopwords.
pub fn query_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() > 1 && !STOPWORDS.contains(&w.as_str()))
    {
        if !words.contains(&word) && words.len() < 32 {
            words.push(word);
        }
    }
    words
}

/// BM25 costs about a microsecond per matching row, so a keyword search bounds the rows it
/// scores: words matching more rows than this (across all users) are skipped. Such words carry
/// almost no information (FTS5's IDF is computed over the whole table) and would dominate the cost.
const ROWS_PER_TERM: i64 = 500;
/// Upper bound on rows one search scores; the rarest words are kept first.
const ROWS_BUDGET: i64 = 1_500;

/// FTS queries recently found to match more rows than the cap. Only those are remembered: a word
/// that is common stays common (skipping it is the point), while a rare word's count must be fresh
/// (a memory added a moment ago has to be findable by its words at once).
#[derive(Default)]
pub struct CommonTerms(std::sync::Mutex<HashMap<String, Instant>>);

const COMMON_TTL: Duration = Duration::from_secs(60);
const COMMON_ENTRIES: usize = 50_000;

impl CommonTerms {
    fn known(&self, key: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|common| common.get(key).is_some_and(|at| at.elapsed() < COMMON_TTL))
    }

    fn remember(&self, key: String) {
        if let Ok(mut common) = self.0.lock() {
            if common.len() >= COMMON_ENTRIES {
                common.clear();
            }
            common.insert(key, Instant::now());
        }
    }
}

/// How many rows match an FTS query, counting at most `cap + 1` (cheap: no scoring).
fn bounded_count(
    connection: &Connection,
    common: &CommonTerms,
    fts: &str,
    query: &str,
    cap: i64,
) -> StoreResult<i64> {
    let key = format!("{fts}\u{0}{query}");
    if common.known(&key) {
        return Ok(cap + 1);
    }
    let mut statement = connection.prepare_cached(&format!(
        "SELECT COUNT(*) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ?1 LIMIT ?2)"
    ))?;
    let rows: i64 = statement.query_row(params![query, cap + 1], |row| row.get(0))?;
    if rows > cap {
        common.remember(key);
    }
    Ok(rows)
}

fn quoted_any(words: &[String]) -> String {
    // Quoted: user text is never FTS syntax.
    words
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The FTS query for one search: the rarest words within the budget, restricted to the user's
/// scope tag when the user is small (the join on `uid` keeps only their rows in any case).
fn keyword_query(
    connection: &Connection,
    cache: &CommonTerms,
    fts: &str,
    uid: i64,
    words: &[String],
) -> StoreResult<Option<String>> {
    let mut counted = Vec::with_capacity(words.len());
    for word in words {
        let rows = bounded_count(
            connection,
            cache,
            fts,
            &format!("text:\"{word}\""),
            ROWS_PER_TERM,
        )?;
        if rows > 0 && rows <= ROWS_PER_TERM {
            counted.push((rows, word));
        }
    }
    counted.sort();
    let mut kept = Vec::new();
    let mut spent = 0;
    for (rows, word) in counted {
        if spent + rows > ROWS_BUDGET {
            break;
        }
        spent += rows;
        kept.push(word.clone());
    }
    if kept.is_empty() {
        return Ok(None);
    }
    let any = format!("text:({})", quoted_any(&kept));
    let scope = format!("scope:u{uid}");
    if bounded_count(connection, cache, fts, &scope, ROWS_PER_TERM)? <= ROWS_PER_TERM {
        return Ok(Some(format!("{scope} AND {any}")));
    }
    Ok(Some(any))
}

pub fn keyword_search(
    connection: &Connection,
    cache: &CommonTerms,
    scope: &UserScope,
    corpus: Corpus,
    query: &str,
    limit: usize,
    within: Option<&Within>,
) -> StoreResult<Vec<(i64, f64)>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let words = query_words(query);
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let (table, _, fts) = corpus_tables(corpus);
    let Some(matching) = keyword_query(connection, cache, fts, uid, &words)? else {
        return Ok(Vec::new());
    };
    let live = live_condition(corpus);
    let (inside, key) = match within {
        Some(within) => within_condition(corpus, within, "?4")?,
        None => ("TRUE".to_owned(), String::new()),
    };
    // Column weights: the text counts, the scope tag (same for all the user's rows) does not.
    let sql = format!(
        "SELECT f.rowid, -bm25({fts}, 1.0, 0.0) AS score FROM {fts} f JOIN {table} t ON t.id = f.rowid
         WHERE {fts} MATCH ?1 AND t.uid = ?2 AND {live} AND {inside}
         ORDER BY bm25({fts}, 1.0, 0.0) LIMIT ?3"
    );
    let mut statement = connection.prepare_cached(&sql)?;
    let map = |row: &rusqlite::Row| Ok((row.get(0)?, row.get(1)?));
    let rows = if within.is_some() {
        statement
            .query_map(params![matching, uid, limit as i64, key], map)?
            .collect::<Result<Vec<_>, _>>()?
    } else {
        statement
            .query_map(params![matching, uid, limit as i64], map)?
            .collect::<Result<Vec<_>, _>>()?
    };
    Ok(rows)
}

/// Ids of the searchable rows of one agent or conversation.
pub fn ids_within(
    connection: &Connection,
    scope: &UserScope,
    corpus: Corpus,
    within: &Within,
) -> StoreResult<Vec<i64>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let (table, _, _) = corpus_tables(corpus);
    let live = live_condition(corpus);
    let (inside, key) = within_condition(corpus, within, "?2")?;
    let mut statement = connection.prepare_cached(&format!(
        "SELECT t.id FROM {table} t WHERE t.uid = ?1 AND {live} AND {inside}"
    ))?;
    let ids = statement
        .query_map(params![uid, key], |row| row.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ids)
}

pub fn documents(
    connection: &Connection,
    scope: &UserScope,
    corpus: Corpus,
    ids: &[i64],
) -> StoreResult<Vec<Document>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let (table, text, _) = corpus_tables(corpus);
    let live = live_condition(corpus);
    let placeholders = vec!["?"; ids.len()].join(",");
    let (conversation, role, outdated) = match corpus {
        Corpus::Message => (
            "(SELECT external_id FROM conversations c WHERE c.id = t.conversation_id)",
            "t.role",
            "t.outdated_at IS NOT NULL",
        ),
        _ => ("NULL", "NULL", "FALSE"),
    };
    let sql = format!(
        "SELECT t.id, {text}, t.created_at, {conversation}, {role}, t.embedding_model, t.embedding,
             {outdated}
         FROM {table} t WHERE t.uid = ? AND {live} AND t.id IN ({placeholders})"
    );
    let mut statement = connection.prepare(&sql)?;
    let values = std::iter::once(uid).chain(ids.iter().copied());
    let rows = statement
        .query_map(params_from_iter(values), |row| {
            let model: Option<String> = row.get(5)?;
            let blob: Option<Vec<u8>> = row.get(6)?;
            Ok(Document {
                corpus,
                id: row.get(0)?,
                text: row.get(1)?,
                created_at_ms: row.get(2)?,
                conversation: row.get(3)?,
                role: row.get(4)?,
                outdated: row.get(7)?,
                embedding: model.zip(blob).map(|(model, blob)| Embedding {
                    model,
                    vector: from_blob(&blob),
                }),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn embeddings(
    connection: &Connection,
    uid: i64,
    corpus: Corpus,
    model: &str,
) -> StoreResult<Vec<(i64, Vec<f32>)>> {
    let (table, _, _) = corpus_tables(corpus);
    let live = live_condition(corpus);
    let mut statement = connection.prepare(&format!(
        "SELECT t.id, t.embedding FROM {table} t
         WHERE t.uid = ?1 AND t.embedding_model = ?2 AND t.embedding IS NOT NULL AND {live}"
    ))?;
    let rows = statement
        .query_map(params![uid, model], |row| {
            let blob: Vec<u8> = row.get(1)?;
            Ok((row.get(0)?, from_blob(&blob)))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn rows_to_embed(
    connection: &Connection,
    corpus: Corpus,
    model: &str,
    limit: usize,
) -> StoreResult<Vec<(i64, i64, String)>> {
    let (table, text, _) = corpus_tables(corpus);
    let live = live_condition(corpus);
    let mut statement = connection.prepare(&format!(
        "SELECT t.id, t.uid, {text} FROM {table} t
         WHERE (t.embedding_model IS NULL OR t.embedding_model != ?1) AND {live}
           AND length(trim({text})) > 0 ORDER BY t.id LIMIT ?2"
    ))?;
    let rows = statement
        .query_map(params![model, limit as i64], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn set_embedding(
    tx: &Transaction,
    corpus: Corpus,
    id: i64,
    embedding: &Embedding,
) -> StoreResult<(i64, u64)> {
    let (table, _, _) = corpus_tables(corpus);
    let uid: i64 = tx
        .query_row(
            &format!("SELECT uid FROM {table} WHERE id = ?1"),
            [id],
            |row| row.get(0),
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("{} {id}", corpus.as_str())))?;
    tx.execute(
        &format!("UPDATE {table} SET embedding_model = ?1, embedding = ?2 WHERE id = ?3"),
        params![embedding.model, to_blob(&embedding.vector), id],
    )?;
    Ok((uid, bump_generation(tx, uid, corpus)?))
}

#[cfg(test)]
mod tests {
    use super::query_words;

    #[test]
    fn query_words_drop_stopwords_and_syntax() {
        assert_eq!(
            query_words("What is my dog's name? \"NEAR\" OR *"),
            ["dog", "name", "near"]
        );
        assert!(query_words("is it?").is_empty());
    }
}
