//! `memproxy serve` as a real process, for the tests that kill it, limit it or run several: a
//! free port, the process (killed when dropped) once it answers `/readyz`, and what the
//! consistency check reports.

use std::process::{Child, Command};

use serde_json::Value;

use crate::common::eventually;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// A running `memproxy serve` (or a wrapper that execs it), killed and reaped when dropped.
pub struct Serving {
    pub child: Child,
    pub url: String,
}

impl Serving {
    /// Spawns `command` and waits until `url` answers `/readyz`.
    pub async fn start(mut command: Command, url: &str) -> Serving {
        let serving = Serving {
            child: command.spawn().expect("memproxy starts"),
            url: url.to_owned(),
        };
        let client = reqwest::Client::new();
        eventually("memproxy answers /readyz", || async {
            client
                .get(format!("{url}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        serving
    }

    /// The findings of the consistency check that are errors (none for a sound store).
    pub async fn check_errors(&self) -> Vec<Value> {
        let report: Value = reqwest::get(format!("{}/memproxy/v1/check", self.url))
            .await
            .expect("check")
            .json()
            .await
            .expect("json");
        report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["status"] == "error")
            .cloned()
            .collect()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
