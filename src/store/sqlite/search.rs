//! The search-side queries shared by all corpora (facts, turns, passages): keyword search with a
//! bounded cost, documents by id, embeddings for index rebuilds and the background embedder.
//!
//! Queries that start from a few rows (a full-text match, a list of ids) write the user condition
//! as `+t.uid`: the unary plus keeps SQLite from driving the query by the user's index instead,
//! which reads every row of a big user (100,000 turns: about 40 ms per search instead of a few).

use super::SqliteStore;
use crate::store::Search;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction};

use super::{
    bump_generation, corpus_tables, find_uid, from_blob, live_condition, to_blob, within_condition,
};
use crate::store::keywords::{query_words, within_budget, CommonTerms, ROWS_PER_TERM};
use crate::store::{
    previous_turn_columns, Corpus, Document, Embedding, StoreError, StoreResult, UserScope, Within,
};

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

/// The FTS columns a keyword search matches, and the bm25 weights of all the columns in order.
/// The text counts; the scope tag (the same for all the user's rows) does not; a past turn's
/// `context` (the words of the turn before it, schema 15) counts half, so that an answer is found
/// by the words of the question it answers without outranking a turn that has them itself.
fn searched_columns(corpus: Corpus) -> (&'static str, &'static str) {
    match corpus {
        Corpus::Message => ("{text context}", "1.0, 0.0, 0.5"),
        Corpus::Memory | Corpus::Passage => ("text", "1.0, 0.0"),
    }
}

/// The FTS query for one search: the rarest words within the budget, restricted to the user's
/// scope tag when the user is small (the join on `uid` keeps only their rows in any case).
fn keyword_query(
    connection: &Connection,
    cache: &CommonTerms,
    fts: &str,
    columns: &str,
    uid: i64,
    words: &[String],
) -> StoreResult<Option<String>> {
    let mut counted = Vec::with_capacity(words.len());
    for word in words {
        let rows = bounded_count(
            connection,
            cache,
            fts,
            &format!("{columns}:\"{word}\""),
            ROWS_PER_TERM,
        )?;
        if rows > 0 && rows <= ROWS_PER_TERM {
            counted.push((rows, word));
        }
    }
    let kept = within_budget(counted);
    if kept.is_empty() {
        return Ok(None);
    }
    let any = format!("{columns}:({})", quoted_any(&kept));
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
    let (columns, weights) = searched_columns(corpus);
    let Some(matching) = keyword_query(connection, cache, fts, columns, uid, &words)? else {
        return Ok(Vec::new());
    };
    let live = live_condition(corpus);
    let (inside, key) = match within {
        Some(within) => within_condition(corpus, within, "?4")?,
        None => ("TRUE".to_owned(), String::new()),
    };
    let sql = format!(
        "SELECT f.rowid, -bm25({fts}, {weights}) AS score FROM {fts} f JOIN {table} t ON t.id = f.rowid
         WHERE {fts} MATCH ?1 AND +t.uid = ?2 AND {live} AND {inside}
         ORDER BY bm25({fts}, {weights}) LIMIT ?3"
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

/// [`crate::store::Search::texts_with`]: the user's scope tag and the words in one FTS query,
/// with no cap on common words (the scope bounds the rows).
pub fn texts_with(
    connection: &Connection,
    scope: &UserScope,
    corpus: Corpus,
    words: &[String],
    limit: usize,
) -> StoreResult<Vec<String>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let words = query_words(&words.join(" "));
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let (table, text, fts) = corpus_tables(corpus);
    let live = live_condition(corpus);
    let own = if corpus == Corpus::Message {
        "AND t.role = 'user'"
    } else {
        ""
    };
    let matching = format!("scope:u{uid} AND text:({})", quoted_any(&words));
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {text} FROM {fts} f JOIN {table} t ON t.id = f.rowid
         WHERE {fts} MATCH ?1 AND +t.uid = ?2 AND {live} {own} ORDER BY t.id DESC LIMIT ?3"
    ))?;
    let texts = statement
        .query_map(params![matching, uid, limit as i64], |row| row.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(texts)
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

pub fn message_neighbours(
    connection: &Connection,
    scope: &UserScope,
    ids: &[i64],
    window: i64,
) -> StoreResult<Vec<(i64, i64, i64)>> {
    if ids.is_empty() || window <= 0 {
        return Ok(Vec::new());
    }
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let placeholders = vec!["?"; ids.len()].join(",");
    let sql = format!(
        "SELECT a.id, t.id, ABS(t.position - a.position) FROM messages a
         JOIN messages t ON t.conversation_id = a.conversation_id AND t.uid = a.uid
             AND t.position BETWEEN a.position - ?2 AND a.position + ?2 AND t.id <> a.id
         WHERE +a.uid = ?1 AND t.superseded = 0 AND a.id IN ({placeholders})"
    );
    let mut statement = connection.prepare(&sql)?;
    let values = [uid, window].into_iter().chain(ids.iter().copied());
    let rows = statement
        .query_map(params_from_iter(values), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
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
    let subject = match corpus {
        Corpus::Memory => "t.subject",
        _ => "NULL",
    };
    let author = match corpus {
        Corpus::Message => "t.name",
        _ => "NULL",
    };
    let (previous_role, previous_text) = previous_turn_columns(corpus, "NULL");
    let sql = format!(
        "SELECT t.id, {text}, t.created_at, {conversation}, {role}, t.embedding_model, t.embedding,
             {outdated}, {subject}, {author}, {previous_role}, {previous_text}
         FROM {table} t WHERE +t.uid = ? AND {live} AND t.id IN ({placeholders})"
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
                subject: row.get(8)?,
                author: row.get(9)?,
                replies_to: row.get::<_, Option<String>>(10)?.zip(row.get(11)?),
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

impl Search for SqliteStore {
    fn keyword_search(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        query: &str,
        limit: usize,
        within: Option<&Within>,
    ) -> StoreResult<Vec<(i64, f64)>> {
        self.read(|c| keyword_search(c, &self.common_terms, scope, corpus, query, limit, within))
    }

    fn texts_with(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        words: &[String],
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        self.read(|c| texts_with(c, scope, corpus, words, limit))
    }

    fn ids_within(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        within: &Within,
    ) -> StoreResult<Vec<i64>> {
        self.read(|c| ids_within(c, scope, corpus, within))
    }

    fn documents(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        ids: &[i64],
    ) -> StoreResult<Vec<crate::store::Document>> {
        self.read(|c| documents(c, scope, corpus, ids))
    }

    fn message_neighbours(
        &self,
        scope: &UserScope,
        ids: &[i64],
        window: i64,
    ) -> StoreResult<Vec<(i64, i64, i64)>> {
        self.read(|c| message_neighbours(c, scope, ids, window))
    }

    fn embeddings(
        &self,
        uid: i64,
        corpus: Corpus,
        model: &str,
    ) -> StoreResult<Vec<(i64, Vec<f32>)>> {
        self.read(|c| embeddings(c, uid, corpus, model))
    }

    fn vector_generation(&self, uid: i64, corpus: Corpus) -> StoreResult<u64> {
        self.read(|c| {
            let generation: Option<i64> = c
                .query_row(
                    "SELECT generation FROM vector_generations WHERE uid = ?1 AND corpus = ?2",
                    params![uid, corpus.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            Ok(generation.unwrap_or(0) as u64)
        })
    }

    fn indexed_users(&self) -> StoreResult<Vec<i64>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT DISTINCT uid FROM vector_generations ORDER BY uid")?;
            let uids = statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(uids)
        })
    }

    fn rows_to_embed(
        &self,
        corpus: Corpus,
        model: &str,
        limit: usize,
    ) -> StoreResult<Vec<(i64, i64, String)>> {
        self.read(|c| rows_to_embed(c, corpus, model, limit))
    }

    fn set_embeddings(
        &self,
        corpus: Corpus,
        rows: &[(i64, crate::store::Embedding)],
    ) -> StoreResult<Vec<(i64, i64, u64)>> {
        self.write(|tx| {
            rows.iter()
                .map(|(id, embedding)| {
                    let (uid, generation) = set_embedding(tx, corpus, *id, embedding)?;
                    Ok((*id, uid, generation))
                })
                .collect()
        })
    }
}
