//! Search on PostgreSQL: vectors in pgvector (an HNSW index per embedding model, cosine) and
//! keywords in a generated `tsvector` column (GIN). The fusion of the two stays in
//! [`crate::memory::retrieval`], as with SQLite.
//!
//! Isolation: every query filters by the user's id in its `WHERE` clause, so whatever plan the
//! server picks (the user's rows by B-tree then an exact sort, or the shared HNSW index then a
//! filter), no other user's row can come back. With the HNSW index, pgvector's iterative scan
//! (`strict_order`) keeps scanning until `k` of the user's rows are found, so a small user among
//! many big ones still gets their nearest rows.

use std::collections::HashSet;
use std::sync::Mutex;

use tokio_postgres::GenericClient;

use super::{bump_generation, find_uid, PostgresStore};
use crate::store::keywords::{self, query_words};
use crate::store::{
    content_hash, previous_turn_columns, Corpus, Document, Embedding, Search, StoreError,
    StoreResult, UserScope, Within, AGENT_CONVERSATION_PREFIX,
};

/// Arbitrary, fixed: the advisory lock key of vector index creation.
const INDEX_LOCK: i64 = 0x6d65_6d70_0003;

// Vectors travel as `REAL[]` in the binary protocol (cast to and from pgvector's `vector` in
// SQL): no text formatting or parsing of 384 floats per row.

/// Table, text expression (on the table aliased `t`) and live-row condition of each corpus.
fn corpus_table(corpus: Corpus) -> (&'static str, &'static str, &'static str) {
    match corpus {
        Corpus::Memory => ("memories", "t.text", "t.valid_until IS NULL"),
        Corpus::Message => (
            "messages",
            "COALESCE(t.search_text, t.content)",
            "NOT t.superseded",
        ),
        Corpus::Passage => ("archival_passages", "t.text", "TRUE"),
    }
}

/// `ts_rank_cd`'s weights of the labels D, C, B, A: memories and passages are all D (so the
/// weight only scales their scores); a past turn's own words are A and the words of the turn
/// before it B, at half the weight, as in SQLite's bm25 column weights.
const RANK_WEIGHTS: &str = "{0.1, 0.2, 0.5, 1.0}";

/// The condition restricting a corpus to one agent or conversation (its key bound at
/// `placeholder`).
fn within_condition(corpus: Corpus, within: &Within, placeholder: &str) -> StoreResult<String> {
    match (corpus, within) {
        (Corpus::Passage, Within::Agent(_)) => Ok(format!("t.agent = {placeholder}")),
        (Corpus::Message, Within::Conversation(_)) => Ok(format!(
            "t.conversation_id = (SELECT c.id FROM conversations c
             WHERE c.uid = t.uid AND c.external_id = {placeholder})"
        )),
        (Corpus::Message, Within::Recall(_)) => Ok(format!(
            "t.conversation_id IN (SELECT c.id FROM conversations c
             WHERE c.uid = t.uid AND (c.external_id = {placeholder}
             OR c.external_id NOT LIKE '{AGENT_CONVERSATION_PREFIX}%'))"
        )),
        (corpus, within) => Err(StoreError::Invalid(format!(
            "cannot restrict {} search to {within:?}",
            corpus.as_str()
        ))),
    }
}

fn within_key(within: &Within) -> &str {
    match within {
        Within::Agent(key) | Within::Conversation(key) | Within::Recall(key) => key,
    }
}

/// SQL string literal (model names come from configuration, but are quoted all the same).
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The HNSW index of one corpus and model: a partial index on the vectors of that model cast to
/// their dimension (the column holds vectors of any dimension; each model has one).
fn index_name(corpus: Corpus, model: &str, dimensions: usize) -> String {
    let (table, _, _) = corpus_table(corpus);
    format!("{table}_hnsw_{}_{dimensions}", &content_hash(model)[..12])
}

/// Vector indexes this process has made sure exist.
#[derive(Default)]
pub(super) struct KnownIndexes(Mutex<HashSet<String>>);

async fn ensure_vector_index(
    client: &mut tokio_postgres::Client,
    known: &KnownIndexes,
    corpus: Corpus,
    model: &str,
    dimensions: usize,
) -> StoreResult<()> {
    let name = index_name(corpus, model, dimensions);
    if known.0.lock().is_ok_and(|known| known.contains(&name)) {
        return Ok(());
    }
    let (table, _, _) = corpus_table(corpus);
    // One replica creates it; the others wait on the lock and then find it.
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INDEX_LOCK])
        .await?;
    tx.batch_execute(&format!(
        "CREATE INDEX IF NOT EXISTS {name} ON {table}
         USING hnsw ((embedding::vector({dimensions})) vector_cosine_ops)
         WHERE embedding_model = {}",
        quoted(model)
    ))
    .await?;
    tx.commit().await?;
    if let Ok(mut known) = known.0.lock() {
        known.insert(name);
    }
    Ok(())
}

/// The words worth searching ([`keywords::within_budget`], the rule SQLite follows too): each
/// word's rows are counted (across all users, at most `ROWS_PER_TERM + 1`, through the GIN index)
/// in one round trip; words known to be common are not counted again for a while.
async fn rare_words(
    client: &impl GenericClient,
    common: &keywords::CommonTerms,
    table: &str,
    words: &[String],
) -> StoreResult<Vec<String>> {
    let key = |word: &str| format!("{table}\u{0}{word}");
    let unknown: Vec<&String> = words.iter().filter(|w| !common.known(&key(w))).collect();
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            &format!(
                "SELECT w, (SELECT count(*) FROM (SELECT 1 FROM {table} t
                            WHERE t.tsv @@ plainto_tsquery('english', w) LIMIT $2) s)
                 FROM unnest($1::TEXT[]) AS w"
            ),
            &[&unknown, &(keywords::ROWS_PER_TERM + 1)],
        )
        .await?;
    let mut counted = Vec::with_capacity(rows.len());
    for row in &rows {
        let (word, count): (String, i64) = (row.get(0), row.get(1));
        if count > keywords::ROWS_PER_TERM {
            common.remember(key(&word));
        }
        if let Some(word) = unknown.iter().find(|w| ***w == word) {
            counted.push((count, *word));
        }
    }
    Ok(keywords::within_budget(counted))
}

/// Sets one row's embedding; returns its user and the new vector generation.
pub(super) async fn set_embedding(
    client: &impl GenericClient,
    corpus: Corpus,
    id: i64,
    embedding: &Embedding,
) -> StoreResult<(i64, u64)> {
    let (table, _, _) = corpus_table(corpus);
    let row = client
        .query_opt(
            &format!(
                "UPDATE {table} SET embedding_model = $1, embedding = $2::REAL[]::vector
                 WHERE id = $3 RETURNING uid"
            ),
            &[&embedding.model, &embedding.vector.as_slice(), &id],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("{} {id}", corpus.as_str())))?;
    let uid: i64 = row.get(0);
    Ok((uid, bump_generation(client, uid, corpus).await?))
}

impl Search for PostgresStore {
    fn keyword_search(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        query: &str,
        limit: usize,
        within: Option<&Within>,
    ) -> StoreResult<Vec<(i64, f64)>> {
        let words = query_words(query);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let (table, _, live) = corpus_table(corpus);
        let inside = match within {
            Some(within) => within_condition(corpus, within, "$4")?,
            None => "$4::TEXT IS NULL".to_owned(),
        };
        let key = within.map(within_key);
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let kept = rare_words(&**client, &self.common_terms, table, &words).await?;
            if kept.is_empty() {
                return Ok(Vec::new());
            }
            // Words are letters and digits only: never tsquery syntax.
            let any = kept.join(" | ");
            let rows = client
                .query(
                    &format!(
                        "SELECT t.id, ts_rank_cd('{RANK_WEIGHTS}', t.tsv, q)::FLOAT8
                         FROM {table} t, to_tsquery('english', $2) q
                         WHERE t.uid = $1 AND t.tsv @@ q AND {live} AND {inside}
                         ORDER BY 2 DESC, t.id LIMIT $3"
                    ),
                    &[&uid, &any, &(limit as i64), &key],
                )
                .await?;
            Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
        })
    }

    fn texts_with(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        words: &[String],
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let words = query_words(&words.join(" "));
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let (table, text, live) = corpus_table(corpus);
        let own = if corpus == Corpus::Message {
            "AND t.role = 'user'"
        } else {
            ""
        };
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            // Words are letters and digits only: never tsquery syntax. A past turn's own words
            // have weight A (its context, the turn before it, weight B: schema 3).
            let any = words
                .iter()
                .map(|w| {
                    if corpus == Corpus::Message {
                        format!("{w}:A")
                    } else {
                        w.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" | ");
            let rows = client
                .query(
                    &format!(
                        "SELECT {text} FROM {table} t
                         WHERE t.uid = $1 AND t.tsv @@ to_tsquery('english', $2) AND {live} {own}
                         ORDER BY t.id DESC LIMIT $3"
                    ),
                    &[&uid, &any, &(limit as i64)],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn ids_within(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        within: &Within,
    ) -> StoreResult<Vec<i64>> {
        let (table, _, live) = corpus_table(corpus);
        let inside = within_condition(corpus, within, "$2")?;
        let key = within_key(within);
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    &format!("SELECT t.id FROM {table} t WHERE t.uid = $1 AND {live} AND {inside}"),
                    &[&uid, &key],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn message_neighbours(
        &self,
        scope: &UserScope,
        ids: &[i64],
        window: i64,
    ) -> StoreResult<Vec<(i64, i64, i64)>> {
        if ids.is_empty() || window <= 0 {
            return Ok(Vec::new());
        }
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    "SELECT a.id, t.id, ABS(t.position - a.position)::BIGINT FROM messages a
                     JOIN messages t ON t.conversation_id = a.conversation_id AND t.uid = a.uid
                         AND t.position BETWEEN a.position - $2 AND a.position + $2
                         AND t.id <> a.id
                     WHERE a.uid = $1 AND NOT t.superseded AND a.id = ANY($3)",
                    &[&uid, &window, &ids],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get(2)))
                .collect())
        })
    }

    fn documents(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        ids: &[i64],
    ) -> StoreResult<Vec<Document>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (table, text, live) = corpus_table(corpus);
        let (conversation, role, outdated) = match corpus {
            Corpus::Message => (
                "(SELECT external_id FROM conversations c WHERE c.id = t.conversation_id)",
                "t.role",
                "t.outdated_at IS NOT NULL",
            ),
            _ => ("NULL::TEXT", "NULL::TEXT", "FALSE"),
        };
        let subject = match corpus {
            Corpus::Memory => "t.subject",
            _ => "NULL::TEXT",
        };
        let author = match corpus {
            Corpus::Message => "t.name",
            _ => "NULL::TEXT",
        };
        let (previous_role, previous_text) = previous_turn_columns(corpus, "NULL::TEXT");
        let (previous_role, previous_text) = (&previous_role, &previous_text);
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    &format!(
                        "SELECT t.id, {text}, t.created_at, {conversation}, {role},
                             t.embedding_model, t.embedding::REAL[], {outdated}, {subject}, {author},
                             {previous_role}, {previous_text}
                         FROM {table} t WHERE t.uid = $1 AND {live} AND t.id = ANY($2)"
                    ),
                    &[&uid, &ids],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| {
                    let model: Option<String> = row.get(5);
                    let vector: Option<Vec<f32>> = row.get(6);
                    Document {
                        corpus,
                        id: row.get(0),
                        text: row.get(1),
                        created_at_ms: row.get(2),
                        conversation: row.get(3),
                        role: row.get(4),
                        outdated: row.get(7),
                        subject: row.get(8),
                        author: row.get(9),
                        replies_to: row.get::<_, Option<String>>(10).zip(row.get(11)),
                        embedding: model
                            .zip(vector)
                            .map(|(model, vector)| Embedding { model, vector }),
                    }
                })
                .collect())
        })
    }

    fn embeddings(
        &self,
        uid: i64,
        corpus: Corpus,
        model: &str,
    ) -> StoreResult<Vec<(i64, Vec<f32>)>> {
        let (table, _, live) = corpus_table(corpus);
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    &format!(
                        "SELECT t.id, t.embedding::REAL[] FROM {table} t
                         WHERE t.uid = $1 AND t.embedding_model = $2
                           AND t.embedding IS NOT NULL AND {live}"
                    ),
                    &[&uid, &model],
                )
                .await?;
            Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
        })
    }

    fn vector_generation(&self, uid: i64, corpus: Corpus) -> StoreResult<u64> {
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT generation FROM vector_generations WHERE uid = $1 AND corpus = $2",
                    &[&uid, &corpus.as_str()],
                )
                .await?;
            Ok(row.map_or(0, |row| row.get::<_, i64>(0) as u64))
        })
    }

    fn indexed_users(&self) -> StoreResult<Vec<i64>> {
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT DISTINCT uid FROM vector_generations ORDER BY uid",
                    &[],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn rows_to_embed(
        &self,
        corpus: Corpus,
        model: &str,
        limit: usize,
    ) -> StoreResult<Vec<(i64, i64, String)>> {
        let (table, text, live) = corpus_table(corpus);
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    &format!(
                        "SELECT t.id, t.uid, {text} FROM {table} t
                         WHERE (t.embedding_model IS NULL OR t.embedding_model != $1) AND {live}
                           AND length(trim({text})) > 0 ORDER BY t.id LIMIT $2"
                    ),
                    &[&model, &(limit as i64)],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get(2)))
                .collect())
        })
    }

    fn set_embeddings(
        &self,
        corpus: Corpus,
        rows: &[(i64, Embedding)],
    ) -> StoreResult<Vec<(i64, i64, u64)>> {
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            let mut changed = Vec::with_capacity(rows.len());
            for (id, embedding) in rows {
                match set_embedding(&*tx, corpus, *id, embedding).await {
                    Ok((uid, generation)) => changed.push((*id, uid, generation)),
                    // Deleted since it was read: nothing to embed.
                    Err(StoreError::NotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
            tx.commit().await?;
            Ok(changed)
        })
    }

    fn keeps_vectors(&self) -> bool {
        true
    }

    /// The HNSW index of each corpus for this model, made now rather than by the first search
    /// (building it over existing rows takes a while, once).
    fn prepare_vectors(&self, model: &str, dimensions: usize) -> StoreResult<()> {
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            for corpus in Corpus::ALL {
                ensure_vector_index(&mut client, &self.indexes, corpus, model, dimensions).await?;
            }
            Ok(())
        })
    }

    fn nearest(
        &self,
        uid: i64,
        corpus: Corpus,
        model: &str,
        query: &[f32],
        k: usize,
        among: Option<&[i64]>,
    ) -> StoreResult<Vec<(i64, f32)>> {
        if query.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let (table, _, live) = corpus_table(corpus);
        let dimensions = query.len();
        let query = query.to_vec();
        let model_literal = quoted(model);
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            ensure_vector_index(&mut client, &self.indexes, corpus, model, dimensions).await?;
            let tx = client.transaction().await?;
            // Every connection scans iteratively (see `PostgresStore::connect`); a search for
            // more rows than the default candidate list widens it.
            if k > 40 {
                tx.batch_execute(&format!("SET LOCAL hnsw.ef_search = {}", k.min(1000)))
                    .await?;
            }
            let distance =
                format!("t.embedding::vector({dimensions}) <=> $2::REAL[]::vector({dimensions})");
            let rows = tx
                .query(
                    &format!(
                        "SELECT t.id, (1 - ({distance}))::FLOAT4 FROM {table} t
                         WHERE t.uid = $1 AND t.embedding_model = {model_literal} AND {live}
                           AND ($4::BIGINT[] IS NULL OR t.id = ANY($4))
                         ORDER BY {distance} LIMIT $3"
                    ),
                    &[&uid, &query, &(k as i64), &among],
                )
                .await?;
            tx.commit().await?;
            Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
        })
    }
}
