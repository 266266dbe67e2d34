//! Hybrid retrieval: vector similarity and BM25 keyword search, fused by reciprocal rank, with an
//! optional recency weight, a relevance threshold and a token budget.
//!
//! Either signal alone misses things: embeddings miss rare exact tokens (a part number, a name they
//! never saw), keywords miss paraphrases. Reciprocal rank fusion (Cormack et al., 2009) combines
//! ranked lists without having to calibrate cosine against BM25 scores.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::embed::cosine;
use crate::store::{Corpus, Document, Store, StoreResult, UserScope, Within};
use crate::vector::VectorIndexes;

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct RetrievalRequest {
    pub query: String,
    pub corpora: Vec<Corpus>,
    /// Results to return (before the token budget).
    pub top_k: usize,
    /// Candidates taken from each of vector and keyword search, per corpus.
    pub candidates: usize,
    /// Minimum cosine similarity for a result found only by vector search.
    pub min_similarity: f32,
    /// Keep results (best first) while their text fits this many tokens.
    pub token_budget: Option<usize>,
    /// Weight (0..1) of recency; 0 disables it.
    pub recency_weight: f64,
    /// Age at which the recency bonus halves.
    pub recency_half_life_days: f64,
    /// Use vector search (turn off to measure keywords alone).
    pub vector: bool,
    /// Use keyword search (turn off to measure vectors alone).
    pub keyword: bool,
    /// Weight of the vector ranking in the fusion.
    pub vector_weight: f64,
    /// Weight of the keyword ranking in the fusion.
    pub keyword_weight: f64,
    /// Reciprocal rank fusion constant: a rank r scores weight / (k + r + 1). Smaller k lets the
    /// top of each list count more against items that are merely present in both.
    pub rrf_k: f64,
    /// Only this agent's passages or this conversation's messages.
    pub within: Option<Within>,
    /// Leave out past turns whose facts were since replaced by newer ones (what implicit mode
    /// injects must never say both the old and the new value as current).
    pub current_only: bool,
    /// Share of a found past turn's score given to its neighbours (divided by the distance); 0
    /// disables it (see `neighbours`).
    pub neighbour_weight: f64,
    /// How many positions either side of a found past turn count as its neighbours.
    pub neighbour_window: i64,
    /// Factor on the past turns of the one participant the query names; 1 disables it.
    pub author_weight: f64,
    /// Weight of the best past turns' mean vector added to the query's for a second vector
    /// search (`feedback`); 0 disables it.
    pub feedback_weight: f64,
    /// How many of the best past turns lend their vectors to that second search.
    pub feedback_docs: usize,
}

impl Default for RetrievalRequest {
    fn default() -> Self {
        RetrievalRequest {
            query: String::new(),
            corpora: vec![Corpus::Memory],
            top_k: 10,
            candidates: 40,
            min_similarity: 0.25,
            token_budget: None,
            recency_weight: 0.0,
            recency_half_life_days: 30.0,
            vector: true,
            keyword: true,
            vector_weight: 1.0,
            keyword_weight: 1.0,
            rrf_k: 5.0,
            within: None,
            current_only: false,
            neighbour_weight: 0.3,
            neighbour_window: 2,
            author_weight: 2.0,
            feedback_weight: 1.0,
            feedback_docs: 3,
        }
    }
}

/// The query's vectors: as asked (for past turns, said in the user's words) and, for a
/// first-person question, asked about "the user" (for facts and passages, written that way; see
/// `perspective`).
#[derive(Clone, Debug, Default)]
pub struct QueryVectors {
    pub asked: Option<Vec<f32>>,
    pub about_user: Option<Vec<f32>>,
}

impl QueryVectors {
    fn of(&self, corpus: Corpus) -> Option<&[f32]> {
        match corpus {
            Corpus::Message => self.asked.as_deref(),
            Corpus::Memory | Corpus::Passage => {
                self.about_user.as_deref().or(self.asked.as_deref())
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Hit {
    pub corpus: Corpus,
    pub id: i64,
    pub text: String,
    pub created_at_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A past turn's author as the client named them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_rank: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword_rank: Option<usize>,
    pub tokens: usize,
    /// Whom a memory is about ([`crate::store::Memory::subject`]; `None` for other corpora).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The turn before a past turn, as (role, text): what it may reply to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replies_to: Option<(String, String)>,
}

#[derive(Default)]
struct Ranks {
    vector: Option<usize>,
    keyword: Option<usize>,
}

/// Runs the whole retrieval for an already embedded query (blocking: call off the runtime).
pub fn retrieve(
    store: &dyn Store,
    vectors: &VectorIndexes,
    scope: &UserScope,
    request: &RetrievalRequest,
    query: &QueryVectors,
    now_ms: i64,
) -> StoreResult<Vec<Hit>> {
    let Some(uid) = store.find_user(scope)? else {
        return Ok(Vec::new());
    };
    let mut hits = Vec::new();
    for &corpus in &request.corpora {
        let query_vector = query.of(corpus);
        let allowed: Option<HashSet<i64>> = match &request.within {
            Some(within) => Some(
                store
                    .ids_within(scope, corpus, within)?
                    .into_iter()
                    .collect(),
            ),
            None => None,
        };
        if allowed.as_ref().is_some_and(|ids| ids.is_empty()) {
            continue;
        }
        let search = |vector: &[f32]| -> StoreResult<Vec<i64>> {
            Ok(vectors
                .search_among(uid, corpus, vector, request.candidates, allowed.as_ref())?
                .into_iter()
                .map(|(id, _)| id)
                .collect())
        };
        let searched = query_vector.filter(|_| request.vector);
        let by_vector = match searched {
            Some(vector) => search(vector)?,
            None => Vec::new(),
        };
        let by_keyword: Vec<i64> = if request.keyword {
            store
                .keyword_search(
                    scope,
                    corpus,
                    &request.query,
                    request.candidates,
                    request.within.as_ref(),
                )?
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        } else {
            Vec::new()
        };
        let mut read = Read {
            store,
            scope,
            corpus,
            request,
            query_vector,
            model: vectors.model(),
            documents: HashMap::new(),
            asked: HashSet::new(),
        };
        let mut found = read.fuse(&by_vector, &by_keyword, now_ms)?;
        if let Some(expanded) = searched
            .filter(|_| corpus == Corpus::Message)
            .and_then(|vector| read.feedback(vector, &found))
        {
            found = read.fuse(&search(&expanded)?, &by_keyword, now_ms)?;
        }
        if corpus == Corpus::Message {
            read.spread_to_neighbours(&mut found, allowed.as_ref())?;
            prefer_named_author(&mut found, request);
        }
        hits.extend(found);
    }
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.created_at_ms.cmp(&a.created_at_ms))
    });
    hits.truncate(request.top_k);
    for hit in &mut hits {
        hit.tokens = crate::tokens::count(&hit.text);
    }
    if let Some(budget) = request.token_budget {
        let mut used = 0;
        hits.retain(|hit| {
            let fits = used + hit.tokens <= budget;
            if fits {
                used += hit.tokens;
            }
            fits
        });
    }
    Ok(hits)
}

/// The documents of one corpus read for one query, each once, and how they are scored.
struct Read<'a> {
    store: &'a dyn Store,
    scope: &'a UserScope,
    corpus: Corpus,
    request: &'a RetrievalRequest,
    query_vector: Option<&'a [f32]>,
    model: &'a str,
    /// Live documents read so far (outdated ones too unless `current_only`), by id.
    documents: HashMap<i64, Document>,
    /// Ids asked for, found or not (gone, another user's, left out as outdated).
    asked: HashSet<i64>,
}

impl Read<'_> {
    /// Scored hits of the documents in either ranking (ids, best first), fused by reciprocal
    /// rank. Documents are re-read from the store, the source of truth: only this user's live
    /// rows survive.
    fn fuse(
        &mut self,
        by_vector: &[i64],
        by_keyword: &[i64],
        now_ms: i64,
    ) -> StoreResult<Vec<Hit>> {
        let mut ranks: HashMap<i64, Ranks> = HashMap::new();
        for (rank, &id) in by_vector.iter().enumerate() {
            ranks.entry(id).or_default().vector = Some(rank);
        }
        for (rank, &id) in by_keyword.iter().enumerate() {
            ranks.entry(id).or_default().keyword = Some(rank);
        }
        self.read(ranks.keys().copied())?;
        let mut found: Vec<Hit> = ranks
            .into_iter()
            .filter_map(|(id, rank)| {
                let document = self.documents.get(&id)?;
                score(
                    document,
                    rank,
                    self.request,
                    self.query_vector,
                    self.model,
                    now_ms,
                )
            })
            .collect();
        // Best first, ties by id: the feedback and every later step see one order.
        found.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        Ok(found)
    }

    /// Reads the documents of `ids` not read yet: each id is asked of the store once per query.
    fn read(&mut self, ids: impl Iterator<Item = i64>) -> StoreResult<()> {
        let new: Vec<i64> = ids.filter(|id| self.asked.insert(*id)).collect();
        if new.is_empty() {
            return Ok(());
        }
        for document in self.store.documents(self.scope, self.corpus, &new)? {
            if !(self.request.current_only && document.outdated) {
                self.documents.insert(document.id, document);
            }
        }
        Ok(())
    }

    /// A found past turn shares its score with its neighbours ([`super::neighbours::shares`]);
    /// a neighbour not found yet is brought in when it is as similar to the query as a
    /// vector-only match must be (`min_similarity`): next to a relevant turn is no reason to
    /// inject small talk.
    fn spread_to_neighbours(
        &mut self,
        found: &mut Vec<Hit>,
        allowed: Option<&HashSet<i64>>,
    ) -> StoreResult<()> {
        let scores: HashMap<i64, f64> = found.iter().map(|hit| (hit.id, hit.score)).collect();
        let mut shared = super::neighbours::shares(
            self.store,
            self.scope,
            &scores,
            self.request.neighbour_weight,
            self.request.neighbour_window,
            allowed,
        )?;
        for hit in found.iter_mut() {
            if let Some(extra) = shared.remove(&hit.id) {
                hit.score += extra;
            }
        }
        let mut new: Vec<(i64, f64)> = shared.into_iter().collect();
        new.sort_by_key(|(id, _)| *id);
        self.read(new.iter().map(|(id, _)| *id))?;
        for (id, score) in new {
            let Some(document) = self.documents.get(&id) else {
                continue;
            };
            let similarity = similarity(self.query_vector, document, self.model);
            if !similarity.is_some_and(|s| s >= self.request.min_similarity) {
                continue;
            }
            // A share of scores that already carry the recency weight: not weighted again.
            found.push(hit_of(document, score, similarity, None, None));
        }
        Ok(())
    }

    /// The query's vector moved towards the best hits of `found`, for a second vector search
    /// ([`super::feedback`]); `None` when feedback is off or no best hit has a vector.
    fn feedback(&self, query: &[f32], found: &[Hit]) -> Option<Vec<f32>> {
        let best = found
            .iter()
            .filter_map(|hit| self.documents.get(&hit.id)?.embedding.as_ref())
            .filter(|embedding| embedding.model == self.model)
            .take(self.request.feedback_docs)
            .map(|embedding| embedding.vector.as_slice());
        super::feedback::expanded(query, best, self.request.feedback_weight)
    }
}

/// When the query names exactly one of the found turns' authors, that author's turns count
/// `author_weight` times ([`super::neighbours::named_author`]).
fn prefer_named_author(found: &mut [Hit], request: &RetrievalRequest) {
    if request.author_weight == 1.0 {
        return;
    }
    let authors = found.iter().filter_map(|hit| hit.author.as_deref());
    let Some(author) = super::neighbours::named_author(&request.query, authors).map(str::to_owned)
    else {
        return;
    };
    for hit in found.iter_mut() {
        if hit.author.as_deref() == Some(author.as_str()) {
            hit.score *= request.author_weight;
        }
    }
}

fn similarity(query_vector: Option<&[f32]>, document: &Document, model: &str) -> Option<f32> {
    match (query_vector, &document.embedding) {
        (Some(query), Some(embedding)) if embedding.model == model => {
            Some(cosine(query, &embedding.vector))
        }
        _ => None,
    }
}

fn score(
    document: &Document,
    rank: Ranks,
    request: &RetrievalRequest,
    query_vector: Option<&[f32]>,
    model: &str,
    now_ms: i64,
) -> Option<Hit> {
    let similarity = similarity(query_vector, document, model);
    // A keyword match is evidence on its own; a vector-only match must be similar enough.
    let relevant =
        rank.keyword.is_some() || similarity.is_some_and(|s| s >= request.min_similarity);
    if !relevant {
        return None;
    }
    let fused: f64 = [
        (rank.vector, request.vector_weight),
        (rank.keyword, request.keyword_weight),
    ]
    .into_iter()
    .filter_map(|(rank, weight)| Some(weight / (request.rrf_k.max(0.0) + rank? as f64 + 1.0)))
    .sum();
    let score = with_recency(fused, document, request, now_ms);
    Some(hit_of(
        document,
        score,
        similarity,
        rank.vector,
        rank.keyword,
    ))
}

/// `fused` with the recency weight applied to `document`'s age.
fn with_recency(fused: f64, document: &Document, request: &RetrievalRequest, now_ms: i64) -> f64 {
    let weight = request.recency_weight.clamp(0.0, 1.0);
    if weight > 0.0 {
        let age_days = (now_ms - document.created_at_ms).max(0) as f64 / 86_400_000.0;
        let decay = 0.5_f64.powf(age_days / request.recency_half_life_days.max(0.001));
        fused * (1.0 - weight + weight * decay)
    } else {
        fused
    }
}

/// A hit of `document` at its final `score`.
fn hit_of(
    document: &Document,
    score: f64,
    similarity: Option<f32>,
    vector_rank: Option<usize>,
    keyword_rank: Option<usize>,
) -> Hit {
    Hit {
        tokens: 0,
        corpus: document.corpus,
        id: document.id,
        text: document.text.clone(),
        created_at_ms: document.created_at_ms,
        conversation: document.conversation.clone(),
        role: document.role.clone(),
        author: document.author.clone(),
        score,
        similarity,
        vector_rank,
        keyword_rank,
        subject: document.subject.clone(),
        replies_to: document.replies_to.clone(),
    }
}
