//! A full disk: memproxy serve runs with a file-size limit (`ulimit -f`, with SIGXFSZ ignored, so a
//! write past it fails as it does on a full disk, without root or a special filesystem). A write
//! that does not fit is refused with a clear 503, nothing stored before is lost, chats keep being
//! served (passthrough as ever, implicit without memory), and after a restart with room again the
//! check finds the store sound.

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

#[tokio::test]
async fn a_full_disk_refuses_writes_clearly_and_loses_nothing() {
    crate::sqlite_only!("the limit is on the files of the SQLite data directory");
    let mock = MockUpstream::start().await.expect("mock");
    let data = tempfile::tempdir().expect("data");
    let mut config = test_config(&mock, data.path());
    let port = free_port();
    config.listen = format!("127.0.0.1:{port}").parse().expect("address");
    let file = data.path().join("memproxy.toml");
    std::fs::write(&file, toml::to_string(&config).expect("toml")).expect("write");
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");

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
    let export = client
        .get(format!("{url}/memproxy/v1/users/ana/export"))
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("text");
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
