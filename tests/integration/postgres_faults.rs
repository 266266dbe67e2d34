//! Faults of the database under a PostgreSQL-backed memproxy: every connection cut by the server
//! (a restart, a failover) is survived at the next request; a database that is gone leaves chats
//! answered (implicit mode forwards the request unmodified and says why) and management calls
//! refused with a clear error, never a hang.

use std::time::Duration;

use memproxy::secret::Secret;
use memproxy::store::Backend;
use serde_json::json;

use crate::backends::postgres_url;
use crate::common::{eventually, harness_with, implicit_chat, memories, Harness};

/// The test server's admin URL and a fresh database on it.
async fn fresh() -> Option<(String, String)> {
    let url = tokio::task::spawn_blocking(postgres_url)
        .await
        .expect("made a database")?;
    let admin = std::env::var("MEMPROXY_TEST_DATABASE_URL").expect("the test server");
    Some((admin, url))
}

async fn on(url: &str) -> Harness {
    let url = url.to_owned();
    harness_with(move |c| {
        c.store.backend = Backend::Postgres;
        c.store.url = Some(Secret::new(url));
        c.memory.extraction_debounce = Duration::ZERO;
    })
    .await
}

/// Runs `sql` on the test server as its admin.
async fn admin_sql(admin: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(admin, tokio_postgres::NoTls)
        .await
        .expect("connect as admin");
    tokio::spawn(connection);
    client.batch_execute(sql).await.expect("admin statement");
}

fn database_of(url: &str) -> &str {
    url.rsplit('/').next().expect("a database name")
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_cut_by_the_server_are_replaced_at_the_next_request() {
    let Some((admin, url)) = fresh().await else {
        return;
    };
    let h = on(&url).await;
    implicit_chat(
        &h,
        "ana",
        json!([{"role": "user", "content": "My dog is called Rex."}]),
    )
    .await;
    eventually("the fact is stored", || async {
        memories(&h, "ana").await.iter().any(|m| m.contains("Rex"))
    })
    .await;
    // What a server restart or a failover does to every open connection.
    admin_sql(
        &admin,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = '{}' AND pid != pg_backend_pid()",
            database_of(&url)
        ),
    )
    .await;
    let response = implicit_chat(
        &h,
        "ana",
        json!([{"role": "user", "content": "What is my dog called?"}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("x-memproxy-degraded").is_none(),
        "the first request after the cut was degraded: {:?}",
        response.headers().get("x-memproxy-degraded")
    );
    let seen = h
        .mock
        .chat_requests(None)
        .last()
        .expect("a request")
        .to_string();
    assert!(seen.contains("Rex"), "memory was not injected: {seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_that_is_gone_leaves_chats_answered_and_management_refused_clearly() {
    let Some((admin, url)) = fresh().await else {
        return;
    };
    let h = on(&url).await;
    implicit_chat(&h, "ana", json!([{"role": "user", "content": "Hello."}])).await;
    admin_sql(
        &admin,
        &format!("DROP DATABASE {} WITH (FORCE)", database_of(&url)),
    )
    .await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "Still there?"}]});
    let implicit = tokio::time::timeout(
        Duration::from_secs(30),
        h.client
            .post(h.url("/implicit/v1/chat/completions"))
            .header("x-memproxy-user", "ana")
            .json(&body)
            .send(),
    )
    .await
    .expect("no hang")
    .expect("an answer");
    assert_eq!(implicit.status(), 200);
    let reason = implicit.headers()["x-memproxy-degraded"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(reason.contains("database"), "{reason}");
    assert_eq!(
        h.mock.chat_requests(None).pop().expect("forwarded"),
        body,
        "forwarded as the client sent it"
    );
    let passthrough = h
        .client
        .post(h.url("/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(passthrough.status(), 200);
    let listed = tokio::time::timeout(
        Duration::from_secs(30),
        h.client
            .get(h.url("/memproxy/v1/users/ana/memories"))
            .send(),
    )
    .await
    .expect("no hang")
    .expect("an answer");
    assert!(listed.status().is_server_error(), "{}", listed.status());
    let error: serde_json::Value = listed.json().await.expect("a JSON error");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("database")),
        "{error}"
    );
}
