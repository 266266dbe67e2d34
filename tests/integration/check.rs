//! The consistency check (`memproxy check`, `/memproxy/v1/check`): a store used normally is found
//! sound; each kind of damage a crash or a bug could leave (an orphan row, extraction progress
//! past the end, a stale or stray index file, an abandoned job, a row without its vector) is
//! found, and `--repair` puts it right without losing anything; only the admin key may run it.

use std::process::Command;
use std::time::Duration;

use memproxy::secret::Secret;
use serde_json::{json, Value};

use crate::common::*;

/// The report's finding named `check`.
fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["check"] == check))
        .unwrap_or_else(|| panic!("no finding '{check}' in {report}"))
}

async fn check(h: &Harness, repair: bool) -> Value {
    let request = if repair {
        h.client.post(h.url("/memproxy/v1/check/repair"))
    } else {
        h.client.get(h.url("/memproxy/v1/check"))
    };
    let response = request.send().await.expect("answer");
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

fn all_ok(report: &Value) -> bool {
    report["findings"]
        .as_array()
        .is_some_and(|f| f.iter().all(|f| f["status"] == "ok"))
}

/// A user with a conversation, facts extracted, and vector indexes on disk.
async fn used(h: &Harness) {
    for text in ["I keep bees in Braga.", "My sister Ana plays the cello."] {
        let response = implicit_chat(h, "ana", json!([{"role": "user", "content": text}])).await;
        assert_eq!(response.status(), 200);
    }
    eventually("the facts are extracted", || async {
        memories(h, "ana").await.len() >= 2
            && get_json(h, "/memproxy/v1/jobs?state=queued").await["data"]
                .as_array()
                .is_some_and(|j| j.is_empty())
            && get_json(h, "/memproxy/v1/jobs?state=running").await["data"]
                .as_array()
                .is_some_and(|j| j.is_empty())
    })
    .await;
}

#[tokio::test]
async fn a_store_used_normally_is_found_sound() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    used(&h).await;
    let report = check(&h, false).await;
    assert_eq!(report["ok"], true, "{report}");
    assert!(all_ok(&report), "{report:#}");
    // Repairing a sound store changes nothing.
    let before = get_text(&h, "/memproxy/v1/users/ana/export").await;
    let repaired = check(&h, true).await;
    assert!(all_ok(&repaired), "{repaired:#}");
    assert_eq!(get_text(&h, "/memproxy/v1/users/ana/export").await, before);
}

fn files_named(dir: &std::path::Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn each_kind_of_damage_is_found_and_repaired_without_loss() {
    crate::sqlite_only!("the damage is done to the SQLite file and the index files beside it");
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    used(&h).await;
    let facts_before = memories(&h, "ana").await;
    let h = restart_after(h, |data| {
        let db = rusqlite::Connection::open(data.join("memproxy.db")).expect("open");
        db.execute_batch(
            "PRAGMA foreign_keys = OFF;
             INSERT INTO messages (uid, conversation_id, position, role, content, created_at, token_count, content_hash)
                 VALUES ((SELECT id FROM users WHERE name = 'ana'), 999999, 0, 'user', 'orphan', 0, 1, 'h');
             UPDATE conversations SET extracted_through = 999;
             UPDATE memories SET embedding = NULL, embedding_model = NULL
                 WHERE id = (SELECT MIN(id) FROM memories);
             INSERT INTO jobs (uid, kind, payload, state, attempts, run_after, created_at, updated_at)
                 VALUES ((SELECT id FROM users WHERE name = 'ana'), 'extract', '{}', 'running', 1, 0, 0, 0);",
        )
        .expect("damage");
        let sidecars = files_named(data, "-memory.json");
        assert!(!sidecars.is_empty(), "index files");
        std::fs::write(&sidecars[0], r#"{"generation":1,"model":"other-model","dimensions":3}"#).expect("sidecar");
        std::fs::write(sidecars[0].with_file_name("u77-memory.usearch.tmp"), b"half a save").expect("stray");
    })
    .await;
    // The start-up check rebuilds the stale index and requeues the running job by itself; it does
    // not touch the rest, which the check finds.
    let report = check(&h, false).await;
    assert_eq!(report["ok"], false, "{report:#}");
    assert_eq!(
        finding(&report, "orphan rows")["status"],
        "error",
        "{report:#}"
    );
    assert_eq!(finding(&report, "orphan rows")["found"], 1);
    assert_eq!(finding(&report, "extraction progress")["status"], "error");
    assert_eq!(finding(&report, "vectors")["status"], "warning");
    assert!(
        finding(&report, "vectors")["found"].as_u64() >= Some(1),
        "{report:#}"
    );
    assert_eq!(
        finding(&report, "vector index files")["status"],
        "warning",
        "{report:#}"
    );
    assert_eq!(finding(&report, "database")["status"], "ok");

    let repaired = check(&h, true).await;
    assert_eq!(repaired["ok"], true, "{repaired:#}");
    assert_eq!(finding(&repaired, "orphan rows")["repaired"], 1);
    // The row without a vector is embedded by the repair, or by the backlog before it.
    assert_eq!(
        finding(&repaired, "vectors")["status"],
        "ok",
        "{repaired:#}"
    );
    let again = check(&h, false).await;
    assert!(all_ok(&again), "{again:#}");
    assert!(files_named(h.data.path(), ".usearch.tmp").is_empty());
    // Nothing was lost: the same facts, found by meaning through the rebuilt index.
    assert_eq!(memories(&h, "ana").await, facts_before);
    let hits = post_json(
        &h,
        "/memproxy/v1/users/ana/memories/search",
        &json!({"query": "bees Braga"}),
    )
    .await;
    assert!(hits.to_string().contains("bees"), "{hits}");
}

#[tokio::test]
async fn an_abandoned_job_is_found_and_queued_again() {
    // A memory service with no workers, so nothing but the check touches the job.
    let dir = tempfile::tempdir().expect("dir");
    let memory = memory_in(dir.path());
    let job = memproxy::store::NewJob {
        kind: "summarize".to_owned(),
        scope: Some(alice()),
        dedupe_key: None,
        payload: json!({"conversation": "none"}),
        run_after_ms: 0,
    };
    // Claimed by a worker that then died: running, no sign of life since.
    let id = memory
        .blocking(move |store, _| {
            let id = store.enqueue_job(&job)?;
            store.claim_job(memproxy::store::now_ms(), 60_000)?;
            Ok(id)
        })
        .await
        .expect("a running job");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let lease = Duration::from_millis(10);
    let run = |repair: bool, lease: Duration| {
        let memory = &memory;
        async move {
            let report = memory.check(repair, lease).await.expect("check");
            serde_json::to_value(report).expect("json")
        }
    };
    let report = run(false, lease).await;
    let running = finding(&report, "running jobs");
    assert_eq!(running["status"], "warning", "{report:#}");
    assert_eq!(running["found"], 1);
    // Within its lease it is not abandoned.
    let lenient = run(false, Duration::from_secs(7_200)).await;
    assert_eq!(finding(&lenient, "running jobs")["found"], 0);
    let repaired = run(true, lease).await;
    assert_eq!(
        finding(&repaired, "running jobs")["repaired"],
        1,
        "{repaired:#}"
    );
    let jobs = memory
        .blocking(|store, _| Ok(store.list_jobs(None, memproxy::store::Page::default())?))
        .await
        .expect("jobs");
    let job = jobs.iter().find(|j| j.id == id).expect("the job");
    assert_eq!(job.state, "queued", "{job:?}");
    assert!(
        job.last_error
            .as_deref()
            .is_some_and(|e| e.contains("memproxy check")),
        "{job:?}"
    );
}

#[tokio::test]
async fn only_the_admin_key_may_run_the_check() {
    let h = harness_with(|c| {
        c.auth.admin_key = Some(Secret::new("adm-check"));
        c.auth.api_keys = vec![Secret::new("acme:mp-acme-key")];
    })
    .await;
    let tenant = h
        .client
        .get(h.url("/memproxy/v1/check"))
        .bearer_auth("mp-acme-key")
        .send()
        .await
        .expect("answer");
    assert_eq!(tenant.status(), 403);
    assert_openai_error(&tenant.json().await.expect("json"), "forbidden");
    let repair = h
        .client
        .post(h.url("/memproxy/v1/check/repair"))
        .bearer_auth("mp-acme-key")
        .send()
        .await
        .expect("answer");
    assert_eq!(repair.status(), 403);
    let nobody = h
        .client
        .get(h.url("/memproxy/v1/check"))
        .send()
        .await
        .expect("answer");
    assert_eq!(nobody.status(), 401);
    let admin = h
        .client
        .get(h.url("/memproxy/v1/check"))
        .bearer_auth("adm-check")
        .send()
        .await
        .expect("answer");
    assert_eq!(admin.status(), 200);
}

/// The command line: exit status 1 while an error is left, 0 once repaired.
#[tokio::test]
async fn the_command_exits_non_zero_until_repaired() {
    crate::sqlite_only!("damages the SQLite file");
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    used(&h).await;
    let config = h.config.clone();
    let data = h.data;
    h.proxy.shutdown().await;
    let db = rusqlite::Connection::open(data.path().join("memproxy.db")).expect("open");
    db.execute("UPDATE conversations SET extracted_through = 999", [])
        .expect("damage");
    drop(db);
    let file = data.path().join("memproxy.toml");
    std::fs::write(&file, toml::to_string(&config).expect("toml")).expect("write");
    let run = |repair: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memproxy"));
        command.arg("check").arg("--config").arg(&file);
        if repair {
            command.arg("--repair");
        }
        command.output().expect("memproxy check runs")
    };
    let found = run(false);
    let out = String::from_utf8_lossy(&found.stdout);
    assert_eq!(found.status.code(), Some(1), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("ERROR") && l.contains("extraction progress")),
        "{out}"
    );
    let repaired = run(true);
    assert!(
        repaired.status.success(),
        "{}",
        String::from_utf8_lossy(&repaired.stdout)
    );
    let clean = run(false);
    let out = String::from_utf8_lossy(&clean.stdout);
    assert!(clean.status.success(), "{out}");
    assert!(out.lines().all(|l| l.starts_with("ok")), "{out}");
}
