//! Vector indexes (usearch HNSW, cosine): one per user and corpus, persisted beside the database.
//!
//! Isolation is structural: a search opens only the caller's own index file, so no vector of
//! another user can be returned. SQLite stays the source of truth: every change bumps a generation
//! counter in the same transaction as the row, the index file records the generation it holds
//! (sidecar JSON), and an index whose generation, model or file does not match is rebuilt from the
//! embeddings stored in SQLite. Search results are also re-read from SQLite, so a vector left behind
//! by a crash can never surface a deleted memory.
//!
//! A store that keeps vectors itself (PostgreSQL with pgvector, [`crate::store::Search::nearest`])
//! needs no files: [`VectorIndexes::in_store`] passes searches to it and keeps nothing on disk.
//!
//! Open indexes stay in memory for speed, at most `open_limit` of them (least recently used closed
//! first, saved if changed), so memory stays bounded however many users a deployment serves.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::store::{Corpus, Store, StoreError, StoreResult};

pub struct VectorIndexes {
    /// `None`: the store searches its own vectors.
    dir: Option<PathBuf>,
    model: String,
    dimensions: usize,
    store: Arc<dyn Store>,
    open: Mutex<HashMap<(i64, Corpus), Arc<ScopeIndex>>>,
    open_limit: AtomicUsize,
    /// Ticks on every use; an index's last tick orders closing.
    clock: AtomicU64,
}

/// Indexes kept open unless configured otherwise (`memory.open_vector_indexes`).
pub const DEFAULT_OPEN_LIMIT: usize = 1024;

struct ScopeIndex {
    index: RwLock<Index>,
    generation: AtomicU64,
    dirty: AtomicBool,
    last_used: AtomicU64,
}

/// What the index file holds, written after the file itself.
#[derive(Serialize, Deserialize, PartialEq)]
struct Sidecar {
    generation: u64,
    model: String,
    dimensions: usize,
}

/// What the consistency check found among the index files (file names).
#[derive(Debug, Default)]
pub struct IndexFiles {
    /// Index files found.
    pub indexes: usize,
    /// Indexes that do not match the database (generation, model or a missing half).
    pub stale: Vec<String>,
    /// Files no index owns (an interrupted save's temporary file).
    pub stray: Vec<String>,
}

pub enum Change<'a> {
    Add(i64, &'a [f32]),
    Remove(i64),
}

fn index_error(error: impl std::fmt::Display) -> StoreError {
    StoreError::Invalid(format!("vector index: {error}"))
}

impl VectorIndexes {
    pub fn new(
        dir: &Path,
        model: &str,
        dimensions: usize,
        store: Arc<dyn Store>,
    ) -> StoreResult<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self::with_dir(
            Some(dir.to_owned()),
            model,
            dimensions,
            store,
        ))
    }

    fn with_dir(
        dir: Option<PathBuf>,
        model: &str,
        dimensions: usize,
        store: Arc<dyn Store>,
    ) -> Self {
        VectorIndexes {
            dir,
            model: model.to_owned(),
            dimensions,
            store,
            open: Mutex::new(HashMap::new()),
            open_limit: AtomicUsize::new(DEFAULT_OPEN_LIMIT),
            clock: AtomicU64::new(0),
        }
    }

    /// Searches passed to a store that keeps vectors itself; nothing is kept here or on disk.
    pub fn in_store(model: &str, dimensions: usize, store: Arc<dyn Store>) -> Self {
        Self::with_dir(None, model, dimensions, store)
    }

    /// How many indexes stay open in memory (at least one).
    pub fn set_open_limit(&self, limit: usize) {
        self.open_limit.store(limit.max(1), Ordering::Relaxed);
    }

    /// Indexes open in memory now.
    pub fn open_count(&self) -> usize {
        self.cached().len()
    }

    fn touch(&self, scope: &ScopeIndex) {
        let now = self.clock.fetch_add(1, Ordering::Relaxed) + 1;
        scope.last_used.store(now, Ordering::Relaxed);
    }

    /// Keeps `scope` open, closing the least recently used indexes past the limit. A closed index
    /// is saved first if it changed; one still in use elsewhere finishes on its own copy, and any
    /// change made to that copy is caught by the generation check when it is opened again.
    fn keep_open(&self, uid: i64, corpus: Corpus, scope: &Arc<ScopeIndex>) -> StoreResult<()> {
        self.touch(scope);
        let closed: Vec<_> = {
            let mut open = self.cached();
            open.insert((uid, corpus), Arc::clone(scope));
            let excess = open
                .len()
                .saturating_sub(self.open_limit.load(Ordering::Relaxed));
            if excess == 0 {
                return Ok(());
            }
            let mut by_age: Vec<_> = open
                .iter()
                .map(|(key, scope)| (scope.last_used.load(Ordering::Relaxed), *key))
                .collect();
            by_age.sort_unstable_by_key(|(tick, _)| *tick);
            by_age
                .into_iter()
                .take(excess)
                .filter_map(|(_, key)| open.remove(&key).map(|scope| (key, scope)))
                .collect()
        };
        for ((uid, corpus), scope) in closed {
            tracing::debug!(
                uid,
                corpus = corpus.as_str(),
                "closing least recently used vector index"
            );
            self.save(uid, corpus, &scope)?;
        }
        Ok(())
    }

    fn paths(&self, uid: i64, corpus: Corpus) -> (PathBuf, PathBuf) {
        let stem = format!("u{uid}-{}", corpus.as_str());
        let dir = self.dir.as_deref().unwrap_or(Path::new("."));
        (
            dir.join(format!("{stem}.usearch")),
            dir.join(format!("{stem}.json")),
        )
    }

    fn new_index(&self, capacity: usize) -> StoreResult<Index> {
        let options = IndexOptions {
            dimensions: self.dimensions,
            metric: MetricKind::Cos,
            quantization: ScalarKind::F32,
            connectivity: 0,
            expansion_add: 0,
            expansion_search: 0,
            multi: false,
        };
        let index = Index::new(&options).map_err(index_error)?;
        index.reserve(capacity.max(64)).map_err(index_error)?;
        Ok(index)
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, HashMap<(i64, Corpus), Arc<ScopeIndex>>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The index of one scope, in step with the database (loaded or rebuilt if needed).
    fn get(&self, uid: i64, corpus: Corpus) -> StoreResult<Arc<ScopeIndex>> {
        let generation = self.store.vector_generation(uid, corpus)?;
        let cached = self.cached().get(&(uid, corpus)).cloned();
        if let Some(index) = cached {
            if index.generation.load(Ordering::Acquire) == generation {
                self.touch(&index);
                return Ok(index);
            }
        }
        let index = match self.load_file(uid, corpus, generation) {
            Some(index) => index,
            None => self.rebuild(uid, corpus, generation)?,
        };
        let index = Arc::new(index);
        self.keep_open(uid, corpus, &index)?;
        Ok(index)
    }

    fn load_file(&self, uid: i64, corpus: Corpus, generation: u64) -> Option<ScopeIndex> {
        let (file, sidecar) = self.paths(uid, corpus);
        let recorded: Sidecar = serde_json::from_slice(&std::fs::read(&sidecar).ok()?).ok()?;
        let wanted = Sidecar {
            generation,
            model: self.model.clone(),
            dimensions: self.dimensions,
        };
        if recorded != wanted {
            return None;
        }
        let index = self.new_index(0).ok()?;
        index.load(file.to_str()?).ok()?;
        Some(ScopeIndex {
            index: RwLock::new(index),
            generation: AtomicU64::new(generation),
            dirty: AtomicBool::new(false),
            last_used: AtomicU64::new(0),
        })
    }

    /// Rebuilds one scope's index from the embeddings in SQLite and saves it (when it can).
    fn rebuild(&self, uid: i64, corpus: Corpus, generation: u64) -> StoreResult<ScopeIndex> {
        let vectors = self.store.embeddings(uid, corpus, &self.model)?;
        let index = self.new_index(vectors.len())?;
        for (id, vector) in &vectors {
            if vector.len() == self.dimensions {
                index.add(*id as u64, vector).map_err(index_error)?;
            }
        }
        tracing::info!(
            uid,
            corpus = corpus.as_str(),
            vectors = vectors.len(),
            "rebuilt vector index"
        );
        let scope = ScopeIndex {
            index: RwLock::new(index),
            generation: AtomicU64::new(generation),
            dirty: AtomicBool::new(true),
            last_used: AtomicU64::new(0),
        };
        // An index that cannot be saved (a full or read-only disk) still serves from memory; it
        // stays dirty, so a later flush saves it when it can.
        if let Err(error) = self.save(uid, corpus, &scope) {
            tracing::warn!(uid, corpus = corpus.as_str(), %error, "rebuilt vector index kept in memory only: it cannot be saved");
        }
        Ok(scope)
    }

    /// Nearest rows to `query`: `(id, cosine similarity)`, best first.
    pub fn search(
        &self,
        uid: i64,
        corpus: Corpus,
        query: &[f32],
        k: usize,
    ) -> StoreResult<Vec<(i64, f32)>> {
        self.search_among(uid, corpus, query, k, None)
    }

    /// As [`Self::search`], only among `allowed` ids (one agent's rows within the user's index).
    pub fn search_among(
        &self,
        uid: i64,
        corpus: Corpus,
        query: &[f32],
        k: usize,
        allowed: Option<&std::collections::HashSet<i64>>,
    ) -> StoreResult<Vec<(i64, f32)>> {
        if query.len() != self.dimensions || k == 0 {
            return Ok(Vec::new());
        }
        if self.dir.is_none() {
            let among: Option<Vec<i64>> = allowed.map(|ids| ids.iter().copied().collect());
            return self
                .store
                .nearest(uid, corpus, &self.model, query, k, among.as_deref());
        }
        let scope = self.get(uid, corpus)?;
        let index = scope
            .index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if index.size() == 0 {
            return Ok(Vec::new());
        }
        let matches = match allowed {
            Some(allowed) => index
                .filtered_search(query, k, |key| allowed.contains(&(key as i64)))
                .map_err(index_error)?,
            None => index.search(query, k).map_err(index_error)?,
        };
        Ok(matches
            .keys
            .iter()
            .zip(&matches.distances)
            .map(|(key, distance)| (*key as i64, 1.0 - distance))
            .collect())
    }

    /// Applies changes the database committed, each with the generation it produced (in order).
    /// If the index is not at the generation just before the first (another process wrote, or a
    /// change was missed), it is rebuilt from the database instead, which already holds them.
    pub fn apply(
        &self,
        uid: i64,
        corpus: Corpus,
        changes: &[(u64, Change<'_>)],
    ) -> StoreResult<()> {
        let Some(first) = changes.first().map(|(generation, _)| *generation) else {
            return Ok(());
        };
        if self.dir.is_none() {
            return Ok(());
        }
        let cached = self.cached().get(&(uid, corpus)).cloned();
        let scope = match cached {
            Some(scope) => {
                self.touch(&scope);
                scope
            }
            None => match self.load_file(uid, corpus, first.saturating_sub(1)) {
                Some(loaded) => {
                    let loaded = Arc::new(loaded);
                    self.keep_open(uid, corpus, &loaded)?;
                    loaded
                }
                None => return self.get(uid, corpus).map(|_| ()),
            },
        };
        let index = scope
            .index
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if scope.generation.load(Ordering::Acquire) + 1 != first {
            drop(index);
            self.cached().remove(&(uid, corpus));
            return self.get(uid, corpus).map(|_| ());
        }
        for (generation, change) in changes {
            match change {
                Change::Add(id, vector) if vector.len() == self.dimensions => {
                    if index.size() + 1 > index.capacity() {
                        index
                            .reserve((index.capacity() * 2).max(64))
                            .map_err(index_error)?;
                    }
                    // Re-adding a key (an updated memory) replaces its vector.
                    if index.contains(*id as u64) {
                        index.remove(*id as u64).map_err(index_error)?;
                    }
                    index.add(*id as u64, vector).map_err(index_error)?;
                }
                Change::Add(..) => {}
                Change::Remove(id) => {
                    index.remove(*id as u64).map_err(index_error)?;
                }
            }
            scope.generation.store(*generation, Ordering::Release);
        }
        scope.dirty.store(true, Ordering::Release);
        Ok(())
    }

    fn save(&self, uid: i64, corpus: Corpus, scope: &ScopeIndex) -> StoreResult<()> {
        if !scope.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let (file, sidecar) = self.paths(uid, corpus);
        let index = scope
            .index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = scope.generation.load(Ordering::Acquire);
        // Write-then-rename: a crash mid-save leaves the previous file, which the sidecar
        // (written last) then no longer matches, so it is rebuilt rather than trusted.
        let temporary = file.with_extension("usearch.tmp");
        let temporary_name = temporary
            .to_str()
            .ok_or_else(|| index_error("the data directory path is not UTF-8"))?;
        index.save(temporary_name).map_err(index_error)?;
        std::fs::rename(&temporary, &file)?;
        let recorded = Sidecar {
            generation,
            model: self.model.clone(),
            dimensions: self.dimensions,
        };
        let json = serde_json::to_vec(&recorded).map_err(index_error)?;
        std::fs::write(&sidecar, json)?;
        Ok(())
    }

    /// Saves every index changed since it was last saved.
    pub fn flush(&self) -> StoreResult<usize> {
        if self.dir.is_none() {
            return Ok(0);
        }
        let open: Vec<_> = self
            .cached()
            .iter()
            .map(|(k, v)| (*k, Arc::clone(v)))
            .collect();
        let mut saved = 0;
        for ((uid, corpus), scope) in open {
            if scope.dirty.load(Ordering::Acquire) {
                self.save(uid, corpus, &scope)?;
                saved += 1;
            }
        }
        Ok(saved)
    }

    /// Brings one user's indexes in step with the database now (start-up check, tests).
    pub fn verify(&self, uid: i64) -> StoreResult<()> {
        if self.dir.is_none() {
            return Ok(());
        }
        for corpus in Corpus::ALL {
            self.get(uid, corpus)?;
        }
        Ok(())
    }

    /// Drops a user's indexes from memory and disk (the user was deleted).
    pub fn forget(&self, uid: i64) -> StoreResult<()> {
        if self.dir.is_none() {
            return Ok(());
        }
        for corpus in Corpus::ALL {
            self.cached().remove(&(uid, corpus));
            let (file, sidecar) = self.paths(uid, corpus);
            for path in [file, sidecar] {
                match std::fs::remove_file(&path) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(error.into())
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The consistency check of the index files (none when the store keeps the vectors): which
    /// no longer match the database (rebuilt when next used; `repair` rebuilds them now), and
    /// files no index owns (an interrupted save's temporary file, half of a pair; `repair` deletes
    /// them). Indexes changed in memory are saved first, so a running server is seen as it is.
    pub fn check_files(&self, repair: bool) -> StoreResult<IndexFiles> {
        let mut report = IndexFiles::default();
        let Some(dir) = self.dir.clone() else {
            return Ok(report);
        };
        self.flush()?;
        let mut pairs = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
                continue;
            };
            let lone = name
                .strip_suffix(".usearch")
                .is_some_and(|stem| !dir.join(format!("{stem}.json")).exists());
            if name.ends_with(".usearch.tmp") || lone {
                report.stray.push(name);
                if repair {
                    std::fs::remove_file(&path)?;
                }
            } else if let Some(stem) = name.strip_suffix(".json") {
                let parsed = stem.strip_prefix('u').and_then(|rest| {
                    let (uid, corpus) = rest.split_once('-')?;
                    let corpus = Corpus::ALL.into_iter().find(|c| c.as_str() == corpus)?;
                    Some((uid.parse::<i64>().ok()?, corpus))
                });
                if let Some((uid, corpus)) = parsed {
                    pairs.push((uid, corpus, name));
                }
            }
        }
        pairs.sort_by(|a, b| a.2.cmp(&b.2));
        for (uid, corpus, name) in pairs {
            report.indexes += 1;
            let generation = self.store.vector_generation(uid, corpus)?;
            let (file, sidecar) = self.paths(uid, corpus);
            let recorded: Option<Sidecar> = std::fs::read(&sidecar)
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok());
            let matches = recorded.is_some_and(|r| {
                r.generation == generation
                    && r.model == self.model
                    && r.dimensions == self.dimensions
            });
            if matches && file.exists() {
                continue;
            }
            report.stale.push(name);
            if repair {
                self.cached().remove(&(uid, corpus));
                for path in [&file, &sidecar] {
                    match std::fs::remove_file(path) {
                        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                            return Err(error.into())
                        }
                        _ => {}
                    }
                }
                // A user with vectors gets the index rebuilt now; one without needs no file.
                if generation > 0 {
                    self.get(uid, corpus)?;
                }
            }
        }
        Ok(report)
    }

    /// Files of one user's indexes (for tests and `delete user` checks).
    pub fn files_of(&self, uid: i64) -> Vec<PathBuf> {
        if self.dir.is_none() {
            return Vec::new();
        }
        Corpus::ALL
            .into_iter()
            .flat_map(|corpus| {
                let (file, sidecar) = self.paths(uid, corpus);
                [file, sidecar]
            })
            .filter(|path| path.exists())
            .collect()
    }

    pub fn model(&self) -> &str {
        &self.model
    }
}
