//! Over real HTTP: generated bodies, users and mode prefixes sent to every API surface and to the
//! management routes of a real memproxy (implicit mode by default, in front of the scripted
//! upstream). Every answer arrives (no hang, no dropped connection), no status is a 500, every
//! refusal is in the shape of the API it came in on, and another user's memory is untouched.

use std::sync::Arc;
use std::time::Duration;

use memproxy::config::Config;
use memproxy::mock::MockUpstream;
use memproxy::server::RunningServer;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::json;

struct Proxy {
    runtime: tokio::runtime::Runtime,
    _mock: MockUpstream,
    _data: tempfile::TempDir,
    server: RunningServer,
    client: reqwest::Client,
}

impl Proxy {
    fn start() -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let data = tempfile::tempdir().expect("data dir");
        let (mock, server) = runtime.block_on(async {
            let mock = MockUpstream::start().await.expect("mock upstream");
            let mut config = Config {
                data_dir: data.path().to_owned(),
                ..Config::default()
            };
            config.upstream.url = mock.base_url();
            config.embedding.provider = memproxy::embed::EmbeddingProvider::Openai;
            config.embedding.url = mock.base_url();
            config.embedding.model = "mock-embed".to_owned();
            config.embedding.dimensions = 64;
            config.memory.consolidation_delay = None;
            config.explicit.background_save = false;
            config.upstream.total_timeout = Duration::from_secs(20);
            config.validate().expect("valid config");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let server =
                memproxy::server::start_on(listener, config, Arc::new(crate::http::NoHook))
                    .await
                    .expect("proxy starts");
            (mock, server)
        });
        Proxy {
            runtime,
            _mock: mock,
            _data: data,
            server,
            client: reqwest::Client::new(),
        }
    }

    /// Sends one request; the status and the whole body (read within 30 s).
    fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<(u16, String, String), String> {
        let url = format!("{}{path}", self.server.url());
        self.runtime.block_on(async {
            let mut request = self
                .client
                .request(method, url)
                .body(body)
                .header("content-type", "application/json");
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            let exchange = async {
                let response = request
                    .send()
                    .await
                    .map_err(|e| format!("no answer: {e}"))?;
                let status = response.status().as_u16();
                let kind = response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let text = response
                    .text()
                    .await
                    .map_err(|e| format!("the body broke off: {e}"))?;
                Ok((status, kind, text))
            };
            tokio::time::timeout(Duration::from_secs(30), exchange)
                .await
                .map_err(|_| "no complete answer within 30 s".to_owned())?
        })
    }

    fn export(&self, user: &str) -> String {
        self.send(
            reqwest::Method::GET,
            &format!("/memproxy/v1/users/{user}/export"),
            &[],
            Vec::new(),
        )
        .map(|(_, _, body)| body)
        .unwrap_or_default()
    }
}

pub struct NoHook;

#[async_trait::async_trait]
impl memproxy::hooks::ExchangeHook for NoHook {
    async fn on_exchange(&self, _exchange: memproxy::hooks::Exchange) {}
}

#[derive(Clone, Copy, Debug)]
enum Surface {
    Chat,
    Responses,
    Messages,
    Management,
}

fn route() -> impl Strategy<Value = (Surface, String, reqwest::Method)> {
    let prefix = prop::sample::select(vec![
        "",
        "",
        "/implicit",
        "/passthrough",
        "/window",
        "/summary",
        "/explicit",
        "/bogus",
    ]);
    let management = prop::sample::select(vec![
        ("/memproxy/v1/users/fz/memories", "POST"),
        ("/memproxy/v1/users/fz/memories/search", "POST"),
        ("/memproxy/v1/users/fz/import", "POST"),
        ("/memproxy/v1/users/fz/agents/default/blocks/human", "PUT"),
        ("/memproxy/v1/users/fz/blocks/team", "PUT"),
        ("/memproxy/v1/users/fz/agents/default/tags", "PUT"),
        ("/memproxy/v1/users/fz/agents/default/archival", "POST"),
        ("/memproxy/v1/users/fz/agents/default/summary", "PUT"),
        ("/memproxy/v1/simulate", "POST"),
        ("/memproxy/v1/users/fz/memories/%ff%fe", "DELETE"),
        ("/memproxy/v1/users/fz/agents/default/messages/-1", "DELETE"),
    ]);
    prop_oneof![
        3 => prefix.clone().prop_map(|p| (Surface::Chat, format!("{p}/v1/chat/completions"), reqwest::Method::POST)),
        3 => prefix.clone().prop_map(|p| (Surface::Responses, format!("{p}/v1/responses"), reqwest::Method::POST)),
        3 => prefix.prop_map(|p| (Surface::Messages, format!("{p}/v1/messages"), reqwest::Method::POST)),
        2 => management.prop_map(|(path, method)| (Surface::Management, path.to_owned(),
            reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST))),
    ]
}

fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    let name = prop::sample::select(vec![
        "x-memproxy-user",
        "x-memproxy-agent",
        "x-memproxy-conversation",
        "x-memproxy-mode",
        "x-memproxy-record",
        "x-memproxy-time",
        "anthropic-version",
        "x-openwebui-chat-id",
    ]);
    let value = prop_oneof![
        "fz-[a-z0-9]{0,6}",
        "[ -~]{0,40}",
        Just("2026-13-45".to_owned()),
        Just("explicit".to_owned())
    ];
    prop::collection::vec((name.prop_map(str::to_owned), value), 0..3)
}

/// A route, headers and body bytes.
type Case = (
    (Surface, String, reqwest::Method),
    Vec<(String, String)>,
    Vec<u8>,
);

/// The body a surface is fuzzed with: its own realistic bodies, mutated, as bytes.
fn case() -> impl Strategy<Value = Case> {
    (route(), headers()).prop_flat_map(|(route, headers)| {
        let seeds = match route.0 {
            Surface::Chat => json::chat_seeds(),
            Surface::Responses => json::responses_seeds(),
            Surface::Messages => json::messages_seeds(),
            Surface::Management => vec![
                json!({"text": "The user likes tea.", "kind": "fact"}),
                json!({"query": "tea", "limit": 3}),
                json!({"value": "The user is Ana.", "char_limit": 500}),
                json!({"label": "team", "value": "We ship Fridays.", "char_limit": 300}),
                json!({"tags": ["a", "b"]}),
                json!({"text": "A passage."}),
                json!({"text": "A summary.", "through_position": 3}),
                json!({"mode": "implicit", "user": "fz", "turns": [{"role": "user", "content": "hi"}]}),
            ],
        };
        (Just(route), Just(headers), json::bytes(seeds))
    })
}

fn check_shape(surface: Surface, status: u16, kind: &str, body: &str) -> Result<(), TestCaseError> {
    prop_assert!(status != 500, "a 500: {body}");
    if status < 400 {
        return Ok(());
    }
    prop_assert!(
        kind.starts_with("application/json"),
        "a {status} refusal as {kind}: {body}"
    );
    let value: Value = serde_json::from_str(body).map_err(|e| {
        TestCaseError::fail(format!("a {status} refusal that is not JSON ({e}): {body}"))
    })?;
    match surface {
        Surface::Messages => {
            prop_assert_eq!(&value["type"], "error", "not Anthropic's shape: {}", body);
            prop_assert!(
                value["error"]["type"].is_string() && value["error"]["message"].is_string(),
                "{}",
                body
            );
        }
        _ => prop_assert!(
            value["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
                && value["error"]["type"].is_string(),
            "not OpenAI's error shape: {}",
            body
        ),
    }
    Ok(())
}

#[test]
fn every_surface_answers_in_its_own_shape_and_keeps_other_memory() {
    let proxy = Proxy::start();
    // Another user's memory, which no generated request may change.
    let keeper = json!({"text": "The user keeps bees in Braga.", "kind": "fact"})
        .to_string()
        .into_bytes();
    let added = proxy.send(
        reqwest::Method::POST,
        "/memproxy/v1/users/keeper/memories",
        &[],
        keeper,
    );
    assert!(matches!(added, Ok((200 | 201, _, _))), "{added:?}");
    let before = proxy.export("keeper");
    assert!(before.contains("keeps bees"), "{before}");

    crate::run(
        "http-surfaces",
        400,
        case(),
        |((surface, path, method), headers, body)| {
            let (status, kind, text) = proxy
                .send(method, &path, &headers, body)
                .map_err(TestCaseError::fail)?;
            check_shape(surface, status, &kind, &text)
        },
    );

    let (health, _, _) = proxy
        .send(reqwest::Method::GET, "/healthz", &[], Vec::new())
        .expect("healthz");
    assert_eq!(health, 200);
    assert_eq!(
        proxy.export("keeper"),
        before,
        "a generated request changed another user's memory"
    );
}
