//! Tenant and user isolation as a property: random operations of random users of two tenants
//! (two of them with the same user name), through every route that carries memory — Chat
//! Completions, Responses (and its stored responses), Messages, explicit mode with an agent that
//! files everything in archival memory, the management API the console uses (memories, search,
//! events, conversations, agents, archival, export, users), the simulator — with each kind of
//! credential: tenant keys with the user header, a key restricted to one user, the admin key with
//! the tenant header. Every text a user sends carries a marker naming that user. The property:
//! no answer to a user holds another user's marker, and no upstream request (chat model or memory
//! LLM) holds markers of two users. The run is seeded (`MEMPROXY_ISOLATION_SEED`; the seed is in
//! every failure message) and bounded (`MEMPROXY_ISOLATION_OPS`, default 150 operations).
//! Embedding requests are left out: they carry text only to turn it into vectors, answer nothing
//! about it, and the background embedder batches rows of several users into one.

use std::collections::BTreeSet;
use std::time::Duration;

use memproxy::config::Secret;
use serde_json::{json, Value};

use crate::common::{eventually, harness_with, Harness};

/// `(tenant, user)` of each actor; actor 0 also has a key restricted to it.
const ACTORS: [(&str, &str); 4] = [
    ("acme", "ana"),
    ("acme", "bob"),
    ("globex", "ana"),
    ("globex", "carol"),
];
const ADMIN: &str = "iso-admin-key";
const RESTRICTED: &str = "iso-acme-ana-key";
const ACME_KEY: &str = "iso-acme-key";
const GLOBEX_KEY: &str = "iso-globex-key";

fn tenant_key(tenant: &str) -> &'static str {
    if tenant == "acme" {
        ACME_KEY
    } else {
        GLOBEX_KEY
    }
}

/// A small deterministic generator (xorshift64*), so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Every `mk{actor}x{n}q` in `text`, as `(actor, n)`.
fn markers(text: &str) -> BTreeSet<(usize, usize)> {
    let mut found = BTreeSet::new();
    for (start, _) in text.match_indices("mk") {
        let rest = &text[start + 2..];
        let Some((actor, rest)) = rest.split_once('x') else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || rest.as_bytes().get(digits) != Some(&b'q') {
            continue;
        }
        if let (Ok(actor), Ok(n)) = (actor.parse(), rest[..digits].parse()) {
            found.insert((actor, n));
        }
    }
    found
}

/// How a request proves who it is for.
#[derive(Clone, Copy, Debug)]
enum Credential {
    /// The tenant's key and `x-memproxy-user`.
    TenantKey,
    /// Actor 0's own key, without any header.
    Restricted,
    /// The admin key and `x-memproxy-tenant` (management only).
    Admin,
}

struct Run {
    h: Harness,
    seed: u64,
    rng: Rng,
    next_marker: usize,
    /// Stored responses: `(owner, id)`.
    responses: Vec<(usize, String)>,
    /// Markers each actor sent (what may come back to it).
    sent: Vec<BTreeSet<(usize, usize)>>,
    checked: usize,
}

impl Run {
    fn marker(&mut self, actor: usize) -> String {
        self.next_marker += 1;
        self.sent[actor].insert((actor, self.next_marker));
        format!("mk{actor}x{}q", self.next_marker)
    }

    fn credential(&mut self, actor: usize, management: bool) -> Credential {
        match (actor, self.rng.below(if management { 3 } else { 2 })) {
            (0, 1) => Credential::Restricted,
            (_, 2) => Credential::Admin,
            _ => Credential::TenantKey,
        }
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        actor: usize,
        credential: Credential,
    ) -> reqwest::RequestBuilder {
        let (tenant, user) = ACTORS[actor];
        let request = self.h.client.request(method, self.h.url(path));
        match credential {
            Credential::TenantKey => request
                .bearer_auth(tenant_key(tenant))
                .header("x-memproxy-user", user),
            Credential::Restricted => request.bearer_auth(RESTRICTED),
            Credential::Admin => request
                .bearer_auth(ADMIN)
                .header("x-memproxy-tenant", tenant),
        }
    }

    /// Sends, and checks the answer holds nothing of another user; returns status and text.
    async fn send(
        &mut self,
        what: &str,
        actor: usize,
        request: reqwest::RequestBuilder,
    ) -> (u16, String) {
        let response = request.send().await.expect("answer");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let foreign: Vec<_> = markers(&text)
            .into_iter()
            .filter(|marker| !self.sent[actor].contains(marker))
            .collect();
        assert!(
            foreign.is_empty(),
            "seed {}: {what} for actor {actor} {:?} answered other users' markers {foreign:?}: {text}",
            self.seed,
            ACTORS[actor]
        );
        assert!(
            status < 500,
            "seed {}: {what} for actor {actor}: {status} {text}",
            self.seed
        );
        self.checked += 1;
        (status, text)
    }

    async fn step(&mut self) {
        let actor = self.rng.below(ACTORS.len());
        let user = ACTORS[actor].1;
        let base = format!("/memproxy/v1/users/{user}");
        let post = reqwest::Method::POST;
        let get = reqwest::Method::GET;
        match self.rng.below(12) {
            0 | 1 => {
                let said = format!("My locker code is {}.", self.marker(actor));
                let stream = self.rng.below(2) == 1;
                let credential = self.credential(actor, false);
                let body = json!({"model": "mock-model", "stream": stream,
                    "messages": [{"role": "user", "content": said}]});
                let request = self
                    .request(post, "/implicit/v1/chat/completions", actor, credential)
                    .json(&body);
                let (status, _) = self.send("chat", actor, request).await;
                assert_eq!(status, 200, "seed {}", self.seed);
            }
            2 => {
                let said = format!("My badge number is {}.", self.marker(actor));
                let mut body = json!({"model": "mock-model", "input": said, "store": true});
                // Chain onto a stored response, sometimes another user's.
                if !self.responses.is_empty() && self.rng.below(2) == 1 {
                    let (owner, id) = self.responses[self.rng.below(self.responses.len())].clone();
                    body["previous_response_id"] = json!(id);
                    let credential = self.credential(actor, false);
                    let request = self
                        .request(post, "/implicit/v1/responses", actor, credential)
                        .json(&body);
                    let (status, _) = self.send("chained response", actor, request).await;
                    // Another user's response is unknown to this one: 400 as OpenAI answers.
                    let allowed = if owner == actor { 200 } else { 400 };
                    assert_eq!(status, allowed, "seed {}: chain of {owner}", self.seed);
                    return;
                }
                let credential = self.credential(actor, false);
                let request = self
                    .request(post, "/implicit/v1/responses", actor, credential)
                    .json(&body);
                let (status, text) = self.send("response", actor, request).await;
                assert_eq!(status, 200, "seed {}: {text}", self.seed);
                let id = serde_json::from_str::<Value>(&text).expect("json")["id"]
                    .as_str()
                    .map(str::to_owned)
                    .expect("an id");
                self.responses.push((actor, id));
            }
            3 if !self.responses.is_empty() => {
                let (owner, id) = self.responses[self.rng.below(self.responses.len())].clone();
                let credential = self.credential(actor, false);
                let request = self.request(get, &format!("/v1/responses/{id}"), actor, credential);
                let (status, _) = self.send("stored response", actor, request).await;
                let expected = if owner == actor { 200 } else { 404 };
                assert_eq!(status, expected, "seed {}: response of {owner}", self.seed);
            }
            4 => {
                let said = format!("My parking spot is {}.", self.marker(actor));
                let credential = self.credential(actor, false);
                let body = json!({"model": "mock-model", "max_tokens": 50,
                    "messages": [{"role": "user", "content": said}]});
                let request = self
                    .request(post, "/implicit/v1/messages", actor, credential)
                    .json(&body);
                let (status, _) = self.send("messages", actor, request).await;
                assert_eq!(status, 200, "seed {}", self.seed);
            }
            5 => {
                // Half of them a fact about the user, which the agent's archival insert makes
                // one of the user's facts (one memory: implicit mode then injects it).
                let said = if self.rng.below(2) == 1 {
                    format!("The user's project is {}.", self.marker(actor))
                } else {
                    format!("File this: project {}.", self.marker(actor))
                };
                let credential = self.credential(actor, false);
                let body = json!({"model": "mock-archivist",
                    "messages": [{"role": "user", "content": said}]});
                let request = self
                    .request(post, "/explicit/v1/chat/completions", actor, credential)
                    .header("x-memproxy-agent", "clerk")
                    .json(&body);
                let (status, text) = self.send("explicit", actor, request).await;
                assert_eq!(status, 200, "seed {}: {text}", self.seed);
            }
            6 => {
                let text = format!("The user's desk is {}.", self.marker(actor));
                let credential = self.credential(actor, true);
                let request = self
                    .request(post, &format!("{base}/memories"), actor, credential)
                    .json(&json!({ "text": text }));
                let (status, _) = self.send("add memory", actor, request).await;
                assert_eq!(status, 201, "seed {}", self.seed);
            }
            7 => {
                let credential = self.credential(actor, true);
                let request = self
                    .request(post, &format!("{base}/memories/search"), actor, credential)
                    .json(&json!({"query": "locker code badge desk", "include_messages": true}));
                self.send("search", actor, request).await;
            }
            8 => {
                let reads = [
                    "memories?include_invalid=true",
                    "events",
                    "conversations",
                    "agents",
                    "agents/clerk/archival",
                    "agents/clerk/blocks",
                    "agents/clerk/steps",
                    "export",
                ];
                let path = format!("{base}/{}", reads[self.rng.below(reads.len())]);
                let credential = self.credential(actor, true);
                let request = self.request(get, &path, actor, credential);
                self.send(&path, actor, request).await;
            }
            9 => self.users(actor).await,
            10 => {
                let said = format!("Remind me about {}.", self.marker(actor));
                let credential = self.credential(actor, true);
                let body = json!({"user": user, "strategy": "implicit", "request":
                    {"model": "mock-model", "messages": [{"role": "user", "content": said}]}});
                let request = self
                    .request(post, "/memproxy/v1/simulate", actor, credential)
                    .json(&body);
                let (status, _) = self.send("simulate", actor, request).await;
                let expected = if matches!(credential, Credential::Restricted) {
                    403
                } else {
                    200
                };
                assert_eq!(status, expected, "seed {}", self.seed);
            }
            _ => self.trespass(actor).await,
        }
    }

    /// The user list of the actor's tenant, as its credential sees it.
    async fn users(&mut self, actor: usize) {
        let credential = self.credential(actor, true);
        let request = self.request(
            reqwest::Method::GET,
            "/memproxy/v1/users",
            actor,
            credential,
        );
        let (_, text) = self.send("users", actor, request).await;
        let listed: Value = serde_json::from_str(&text).expect("json");
        let names: Vec<&str> = listed["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let tenant = ACTORS[actor].0;
        for name in &names {
            let own = ACTORS.iter().any(|(t, u)| *t == tenant && u == name);
            assert!(own, "seed {}: {tenant} sees user {name}: {text}", self.seed);
        }
        if matches!(credential, Credential::Restricted) {
            assert!(
                names.iter().all(|n| *n == "ana"),
                "seed {}: {text}",
                self.seed
            );
        }
    }

    /// Actor 0's restricted key asking for someone else: refused, and nothing of theirs.
    async fn trespass(&mut self, _actor: usize) {
        let other = 1 + self.rng.below(ACTORS.len() - 1);
        let user = ACTORS[other].1;
        let chat = self
            .h
            .client
            .post(self.h.url("/implicit/v1/chat/completions"))
            .bearer_auth(RESTRICTED)
            .header("x-memproxy-user", user)
            .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": "What is my locker code?"}]}));
        let (status, _) = self.send("trespassing chat", 0, chat).await;
        // Globex's ana is another tenant's: the header names acme's ana, which is allowed.
        let expected = if user == "ana" { 200 } else { 403 };
        assert_eq!(status, expected, "seed {}: as {user}", self.seed);
        let path = format!("/memproxy/v1/users/{user}/export");
        let read = self.h.client.get(self.h.url(&path)).bearer_auth(RESTRICTED);
        let (status, _) = self.send("trespassing export", 0, read).await;
        assert_eq!(status, expected, "seed {}: export of {user}", self.seed);
    }
}

#[tokio::test]
async fn no_user_ever_sees_or_sends_upstream_another_users_memory() {
    let seed = std::env::var("MEMPROXY_ISOLATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64 | 1)
                .unwrap_or(7)
        });
    let operations: usize = std::env::var("MEMPROXY_ISOLATION_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let h = harness_with(|c| {
        c.auth.api_keys = vec![
            Secret::new(format!("acme:{}", tenant_key("acme"))),
            Secret::new(format!("globex:{}", tenant_key("globex"))),
            Secret::new(format!("acme/ana:{RESTRICTED}")),
        ];
        c.auth.admin_key = Some(Secret::new(ADMIN));
        c.memory.extraction_debounce = Duration::ZERO;
    })
    .await;
    let mut run = Run {
        h,
        seed,
        rng: Rng(seed),
        next_marker: 0,
        responses: Vec::new(),
        sent: vec![BTreeSet::new(); ACTORS.len()],
        checked: 0,
    };
    for _ in 0..operations {
        run.step().await;
    }
    // What the memory LLM did in the background is an upstream payload too: let it finish.
    let h = &run.h;
    eventually("the memory jobs are done", || async {
        let mut idle = true;
        for tenant in ["acme", "globex"] {
            for state in ["queued", "running"] {
                let jobs = h
                    .client
                    .get(h.url(&format!("/memproxy/v1/jobs?state={state}")))
                    .bearer_auth(ADMIN)
                    .header("x-memproxy-tenant", tenant)
                    .send()
                    .await
                    .expect("answer")
                    .json::<Value>()
                    .await
                    .expect("json");
                idle &= jobs["data"].as_array().is_some_and(Vec::is_empty);
            }
        }
        idle
    })
    .await;
    let mut upstream = 0;
    for received in h.mock.requests() {
        if received.path_and_query.ends_with("/embeddings") {
            continue;
        }
        let body = String::from_utf8_lossy(&received.body).into_owned();
        let owners: BTreeSet<usize> = markers(&body).into_iter().map(|(a, _)| a).collect();
        assert!(
            owners.len() <= 1,
            "seed {seed}: one upstream request to {} carries markers of actors {owners:?}: {body}",
            received.path_and_query
        );
        upstream += usize::from(!owners.is_empty());
    }
    // The run did exercise memory: every actor's memory holds markers, and only its own.
    let mut stored = 0;
    for (actor, (tenant, user)) in ACTORS.iter().enumerate() {
        let export = h
            .client
            .get(h.url(&format!("/memproxy/v1/users/{user}/export")))
            .bearer_auth(ADMIN)
            .header("x-memproxy-tenant", *tenant)
            .send()
            .await
            .expect("answer")
            .text()
            .await
            .expect("text");
        stored += export.matches("\"type\":\"memory\"").count();
        let found = markers(&export);
        assert!(
            found.iter().all(|(owner, _)| *owner == actor),
            "seed {seed}: {tenant}/{user}'s export: {found:?}"
        );
        if run.sent[actor].len() >= 3 {
            assert!(
                !found.is_empty(),
                "seed {seed}: {tenant}/{user} stored nothing"
            );
        }
    }
    eprintln!(
        "isolation: seed {seed}, {operations} operations, {} answers checked, {upstream} upstream requests with markers, {stored} memories stored",
        run.checked
    );
}
