//! A full disk: memproxy serve runs with a file-size limit (`ulimit -f`, with SIGXFSZ ignored, so a
//! write past it fails as it does on a full disk, without root or a special filesystem). A write
//! that does not fit is refused with a clear 503, nothing stored before is lost, chats keep being
//! served (passthrough as ever, implicit without memory), and after a restart with room again the
//! check finds the store sound. A read-only data directory (a bind mount in a private mount
//! namespace): memory is served read-only, writes get the same clear 503, chats are served, and a
//! directory without a database stops start-up with a clear error.

use std::process::{Command, Stdio};
use std::time::Duration;

use memproxy::mock::MockUpstream;
use serde_json::{json, Value};

use crate::common::{import_file, test_config};
use crate::process::{free_port, Serving};

async fn start(file: &std::path::Path, url: &str, limit_kib: Option<u64>) -> Serving {
    let limit = limit_kib.map_or_else(String::new, |kib| format!("ulimit -f {kib}; "));
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; {limit}exec \"$0\" serve --config \"$1\""
        ))
        .arg(env!("CARGO_BIN_EXE_memproxy"))
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Serving::start(command, url).await
}

/// A server's config on a free port with its data in `data`, written into `dir`; the file, the
/// server's URL, and a client with a generous timeout.
fn configure(
    mock: &MockUpstream,
    data: &std::path::Path,
    dir: &std::path::Path,
) -> (std::path::PathBuf, String, reqwest::Client) {
    let mut config = test_config(mock, data);
    let port = free_port();
    config.listen = format!("127.0.0.1:{port}").parse().expect("address");
    let file = dir.join("memproxy.toml");
    std::fs::write(&file, toml::to_string(&config).expect("toml")).expect("write");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    (file, format!("http://127.0.0.1:{port}"), client)
}

async fn exported(client: &reqwest::Client, url: &str) -> String {
    client
        .get(format!("{url}/memproxy/v1/users/ana/export"))
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("text")
}

#[tokio::test]
async fn a_full_disk_refuses_writes_clearly_and_loses_nothing() {
    crate::sqlite_only!("the limit is on the files of the SQLite data directory");
    let mock = MockUpstream::start().await.expect("mock");
    let data = tempfile::tempdir().expect("data");
    let (file, url, client) = configure(&mock, data.path(), data.path());

    let server = start(&file, &url, Some(2_048)).await;
    let added = client
        .post(format!("{url}/memproxy/v1/users/ana/memories"))
        .json(&json!({"text": "The user keeps bees in Braga."}))
        .send()
        .await
        .expect("answer");
    assert!(added.status().is_success(), "{}", added.status());
    // An import far larger than the room left.
    let turns: Vec<String> = (0..3_000)
        .map(|position| format!("word{position} ").repeat(60))
        .collect();
    let body = import_file(&turns);
    let refused = client
        .post(format!("{url}/memproxy/v1/users/ana/import"))
        .body(body)
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), 503);
    let error: Value = refused.json().await.expect("json");
    assert_eq!(error["error"]["code"], "memory_unavailable", "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot write"), "{message}");
    // Chats are still served.
    let chat = |path: &'static str| {
        let client = client.clone();
        let url = url.clone();
        async move {
            client
                .post(format!("{url}{path}"))
                .header("x-memproxy-user", "ana")
                .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": "Do I keep bees?"}]}))
                .send()
                .await
                .expect("answer")
        }
    };
    assert_eq!(chat("/passthrough/v1/chat/completions").await.status(), 200);
    assert_eq!(chat("/implicit/v1/chat/completions").await.status(), 200);
    // Nothing stored before is lost, and nothing of the refused import is half there.
    let export = exported(&client, &url).await;
    assert!(export.contains("keeps bees in Braga"), "{export}");
    assert!(
        !export.contains("word2999"),
        "a refused import left part of itself"
    );
    drop(server);

    // With room again: the check finds the store sound, and the memory is there.
    let server = start(&file, &url, None).await;
    let errors = server.check_errors().await;
    assert!(errors.is_empty(), "{errors:#?}");
    let memories: Value = client
        .get(format!("{url}/memproxy/v1/users/ana/memories"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert!(
        memories.to_string().contains("keeps bees in Braga"),
        "{memories}"
    );
}

/// `memproxy serve` in a private mount namespace (`unshare -rm`: no root needed) where the data
/// directory is mounted read-only, as a read-only volume or a filesystem remounted read-only
/// after errors is.
fn read_only_server(data: &std::path::Path, file: &std::path::Path) -> Command {
    let mut command = Command::new("unshare");
    command
        .args([
            "-rm",
            "bash",
            "-c",
            r#"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$1" serve --config "$2""#,
        ])
        .arg(data)
        .arg(env!("CARGO_BIN_EXE_memproxy"))
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// What a read-only test runs on: the scripted upstream, the data directory, the config file kept
/// outside it, the server's URL and a client. `None` (the test says SKIPPED) where user and
/// mount namespaces are not allowed.
struct ReadOnlySetup {
    mock: MockUpstream,
    data: tempfile::TempDir,
    _outside: tempfile::TempDir,
    file: std::path::PathBuf,
    url: String,
    client: reqwest::Client,
}

async fn read_only_setup() -> Option<ReadOnlySetup> {
    if !namespaces_allowed() {
        return None;
    }
    let mock = MockUpstream::start().await.expect("mock");
    let (data, outside) = (
        tempfile::tempdir().expect("data"),
        tempfile::tempdir().expect("config"),
    );
    let (file, url, client) = configure(&mock, data.path(), outside.path());
    Some(ReadOnlySetup {
        mock,
        data,
        _outside: outside,
        file,
        url,
        client,
    })
}

/// Whether this machine lets a user make a user and mount namespace (else the test says SKIPPED).
fn namespaces_allowed() -> bool {
    let allowed = Command::new("unshare")
        .args(["-rm", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !allowed {
        eprintln!("SKIPPED: unshare -rm (a user and mount namespace) is not allowed here");
    }
    allowed
}

async fn chat(client: &reqwest::Client, url: &str, path: &str) -> reqwest::Response {
    client
        .post(format!("{url}{path}"))
        .header("x-memproxy-user", "ana")
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": "Do I keep bees?"}]}))
        .send()
        .await
        .expect("answer")
}

#[tokio::test]
async fn a_read_only_data_dir_serves_memory_read_only_and_refuses_writes_clearly() {
    crate::sqlite_only!("the data directory holds the SQLite store");
    let Some(ReadOnlySetup {
        mock,
        data,
        _outside: _config,
        file,
        url,
        client,
    }) = read_only_setup().await
    else {
        return;
    };
    let add = |text: &'static str| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            client
                .post(format!("{url}/memproxy/v1/users/ana/memories"))
                .json(&json!({ "text": text }))
                .send()
                .await
                .expect("answer")
        }
    };

    // Memory written while the directory was writable; the server then killed (its WAL left).
    let server = start(&file, &url, None).await;
    assert!(add("The user keeps bees in Braga.")
        .await
        .status()
        .is_success());
    drop(server);

    let server = Serving::start(read_only_server(data.path(), &file), &url).await;
    let ready: Value = client
        .get(format!("{url}/readyz"))
        .send()
        .await
        .expect("readyz")
        .json()
        .await
        .expect("json");
    assert_eq!(ready["store"]["read_only"], true, "{ready}");
    let refused = add("The user also keeps goats.").await;
    assert_eq!(refused.status(), 503);
    let error: Value = refused.json().await.expect("json");
    assert_eq!(error["error"]["code"], "memory_unavailable", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot write")),
        "{error}"
    );
    assert_eq!(
        chat(&client, &url, "/passthrough/v1/chat/completions")
            .await
            .status(),
        200
    );
    // Implicit mode still answers from memory; the turn itself is not stored.
    let implicit = chat(&client, &url, "/implicit/v1/chat/completions").await;
    assert_eq!(implicit.status(), 200);
    assert_eq!(implicit.headers()["x-memproxy-memories"], "1");
    let prompts = mock.chat_requests(None);
    let last = prompts.last().expect("a chat request").to_string();
    assert!(last.contains("keeps bees in Braga"), "{last}");
    let export = exported(&client, &url).await;
    assert!(
        export.contains("keeps bees in Braga"),
        "reads work: {export}"
    );
    drop(server);

    // Writable again: the store is sound, the memory is there and the refused one is not.
    let server = start(&file, &url, None).await;
    let errors = server.check_errors().await;
    assert!(errors.is_empty(), "{errors:#?}");
    let export = exported(&client, &url).await;
    assert!(
        export.contains("keeps bees in Braga") && !export.contains("goats"),
        "{export}"
    );
}

#[tokio::test]
async fn a_read_only_data_dir_without_a_database_stops_start_up_with_a_clear_error() {
    crate::sqlite_only!("the data directory holds the SQLite store");
    let Some(ReadOnlySetup {
        data,
        file,
        _outside: _config,
        ..
    }) = read_only_setup().await
    else {
        return;
    };
    let mut command = read_only_server(data.path(), &file);
    command.stderr(Stdio::piped());
    let output = command.output().expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot write") && stderr.contains("read-only"),
        "{stderr}"
    );
}
