//! A full disk: memproxy serve runs with a file-size limit (`ulimit -f`, with SIGXFSZ ignored, so a
//! write past it fails as it does on a full disk, without root or a special filesystem). A write
//! that does not fit is refused with a clear 503, nothing stored before is lost, chats keep being
//! served (passthrough as ever, implicit without memory), and after a restart with room again the
//! check finds the store sound.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use memproxy::mock::MockUpstream;
use serde_json::{json, Value};

use crate::common::{eventually, test_config};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start(file: &std::path::Path, url: &str, limit_kib: Option<u64>) -> Server {
    let binary = env!("CARGO_BIN_EXE_memproxy");
    let limit = limit_kib.map_or_else(String::new, |kib| format!("ulimit -f {kib}; "));
    let child = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; {limit}exec \"$0\" serve --config \"$1\""
        ))
        .arg(binary)
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("memproxy starts");
    let server = Server(child);
    let client = reqwest::Client::new();
    eventually("memproxy answers /readyz", || async {
        client
            .get(format!("{url}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    server
}

#[tokio::test]
async fn a_full_disk_refuses_writes_clearly_and_loses_nothing() {
    crate::sqlite_only!("the limit is on the files of the SQLite data directory");
    let mock = MockUpstream::start().await.expect("mock");
    let data = tempfile::tempdir().expect("data");
    let mut config = test_config(&mock, data.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
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
    let mut lines = vec![
        json!({"type": "header", "format": "memproxy-export", "version": 1}),
        json!({"type": "conversation", "id": "c", "agent": "default"}),
    ];
    for position in 0..3_000 {
        let text = format!("word{position} ").repeat(60);
        lines.push(json!({"type": "message", "conversation": "c", "position": position, "role": "user", "content": text, "created_at_ms": 1_000 + position}));
    }
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
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
    let _server = start(&file, &url, None).await;
    let report: Value = client
        .get(format!("{url}/memproxy/v1/check"))
        .send()
        .await
        .expect("check")
        .json()
        .await
        .expect("json");
    let errors: Vec<&Value> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["status"] == "error")
        .collect();
    assert!(errors.is_empty(), "{report:#}");
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
