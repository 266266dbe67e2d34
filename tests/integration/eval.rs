//! `memproxy eval`: loaders on fixtures, a whole run against the scripted upstream with the call
//! and token accounting checked against what the upstream really received, and resuming.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memproxy::eval::ceiling::EvalStrategy;
use memproxy::eval::dataset::{self, Format};
use memproxy::eval::pair::RunArgs;
use memproxy::eval::run::run;
use memproxy::mock::{MockUpstream, Reply};
use memproxy::mode::Mode;
use serde_json::{json, Value};

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub(crate) fn args(
    dataset: PathBuf,
    strategies: Vec<Mode>,
    mock: &MockUpstream,
    out: &Path,
) -> RunArgs {
    RunArgs {
        dataset: Some(dataset),
        format: None,
        strategies: strategies.into_iter().map(EvalStrategy::Memory).collect(),
        upstream: mock.base_url(),
        model: Some("mock-model".to_owned()),
        judge_model: None,
        judge_upstream: None,
        limit: None,
        max_sessions: None,
        max_probes: None,
        include_adversarial: false,
        out: out.to_owned(),
        resume: false,
        model_data_dir: PathBuf::from("unused"),
        embeddings_url: Some(mock.base_url()),
        context_window: None,
        core_memory_at: None,
        replay_max_tokens: 32,
        answer_max_tokens: 64,
        memory_max_tokens: 256,
        memory_upstream: None,
        keep_data: false,
        settle: false,
        by_strategy: false,
        yield_to_turns: None,
        save_in_prompt: None,
        pause: 0.0,
        audit: false,
    }
}

#[test]
fn loads_locomo_longmemeval_and_scenarios() {
    let locomo = dataset::load(&fixture("locomo-mini.json"), None, false).expect("locomo");
    let conversation = &locomo.conversations[0];
    assert_eq!(conversation.id, "mini-1");
    assert_eq!(conversation.sessions.len(), 2);
    let first = &conversation.sessions[0];
    assert_eq!(first.time_ms, Some(1_683_554_160_000));
    assert_eq!(
        (first.turns[0].role.as_str(), first.turns[1].role.as_str()),
        ("user", "assistant")
    );
    assert!(first.turns[1]
        .content
        .contains("[shares a photo of a photo of a rainbow flag]"));
    // Category 5 is left out by default; categories get their official names.
    let categories: Vec<&str> = conversation
        .probes
        .iter()
        .map(|p| p.category.as_str())
        .collect();
    assert_eq!(categories, ["temporal", "single-hop", "multi-hop"]);
    assert_eq!(conversation.probes[2].answer, "3");
    assert_eq!(conversation.probes[2].evidence, ["D1:1", "D2:1"]);
    // --max-sessions 1: the multi-hop question needs session 2 and goes.
    let mut first_session = conversation.clone();
    first_session.keep_first_sessions(1);
    let kept: Vec<&str> = first_session
        .probes
        .iter()
        .map(|p| p.category.as_str())
        .collect();
    assert_eq!(kept, ["temporal", "single-hop"]);
    let with_adversarial =
        dataset::load(&fixture("locomo-mini.json"), Some(Format::Locomo), true).expect("locomo");
    let adversarial = &with_adversarial.conversations[0].probes[2];
    assert!(
        adversarial.abstain
            && adversarial.answer == "a sunrise"
            && adversarial.category == "adversarial"
    );

    let longmemeval =
        dataset::load(&fixture("longmemeval-mini.json"), None, false).expect("longmemeval");
    assert_eq!(longmemeval.conversations.len(), 2);
    let q1 = &longmemeval.conversations[0];
    assert_eq!(q1.probes[0].evidence, ["D1:1"]);
    assert_eq!(q1.sessions[1].turns[1].role, "assistant");
    // 2023-05-20 02:21 UTC
    assert_eq!(q1.sessions[0].time_ms, Some(1_684_549_260_000));
    assert!(longmemeval.conversations[1].probes[0].abstain);

    let suite = dataset::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios"),
        None,
        false,
    )
    .expect("suite");
    assert!(suite.conversations.len() >= 10);
    let categories: std::collections::BTreeSet<&str> = suite
        .conversations
        .iter()
        .flat_map(|c| c.probes.iter().map(|p| p.category.as_str()))
        .collect();
    for needed in [
        "stable-fact",
        "preference",
        "changed-fact",
        "temporal",
        "assistant-fact",
        "multi-hop",
        "abstention",
    ] {
        assert!(categories.contains(needed), "the suite covers {needed}");
    }

    let broken = tempfile::NamedTempFile::new().expect("file");
    std::fs::write(
        broken.path(),
        json!({"id": "x", "sessions": [{"date": "2026-01-01", "turns": [{"user": "hi"}]}],
        "probes": [{"question": "q", "answer": "a", "category": "c", "evidence": ["D9:9"]}]})
        .to_string(),
    )
    .expect("write");
    let error =
        dataset::load(broken.path(), Some(Format::Scenarios), false).expect_err("unknown evidence");
    assert!(error.to_string().contains("D9:9"), "{error}");
}

/// What the mock bills for a request (its own formula, recomputed from the body it received).
fn billed(body: &Value) -> u64 {
    let text = |value: &Value| match value {
        Value::Null => 0,
        Value::String(text) => memproxy::tokens::count(text),
        other => memproxy::tokens::count(&other.to_string()),
    };
    let messages: usize = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| text(&m["content"]) + text(&m["tool_calls"]) + 4)
        .sum();
    (messages + text(&body["tools"])) as u64
}

fn kind_of(body: &Value) -> &'static str {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let asked_last = last["content"].as_str().unwrap_or_default();
    if system.contains("MEMPROXY-EXTRACT") || asked_last.contains("MEMPROXY-EXTRACT") {
        "extract"
    } else if system.contains("MEMPROXY-RECONCILE") {
        "reconcile"
    } else if system.contains("MEMPROXY-SUMMARIZE") {
        "summarize"
    } else if body["max_tokens"] == 1 {
        "rewarm"
    } else {
        "chat"
    }
}

pub(crate) fn results(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("results.json")).expect("results.json"))
        .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_accounts_for_every_upstream_call_exactly() {
    for mode in [Mode::Passthrough, Mode::Implicit, Mode::Explicit] {
        let mock = MockUpstream::start().await.expect("mock");
        mock.report_prompt_cache();
        if mode == Mode::Explicit {
            let call = |name: &str, args: Value| {
                Reply::ToolCalls(vec![(name.to_owned(), args.to_string())])
            };
            mock.push(call(
                "core_memory_append",
                json!({"label": "human", "content": "Lives in Lisbon.", "request_heartbeat": true}),
            ));
            mock.push(call("send_message", json!({"message": "Noted."})));
            // After a memory write the plain reply answers; then, the upstream being local, the
            // agent's prompt is sent again for one token (`--settle` waits for it). The second
            // turn, which wrote nothing, gets a background save asked inside the agent's prompt
            // instead, which leaves it cached: no re-warm.
            mock.push(Reply::Text("ok".to_owned()));
            mock.push(call("send_message", json!({"message": "Hi Pixel!"})));
            mock.push(call(
                "send_message",
                json!({"message": "Your dog is Pixel."}),
            ));
        }
        let out = tempfile::tempdir().expect("out");
        let mut run_args = args(fixture("tiny-scenario.json"), vec![mode], &mock, out.path());
        run_args.settle = mode == Mode::Explicit;
        run_args.save_in_prompt = Some("auto".to_owned());
        // A person's pause between turns (here short) is reported with the run.
        run_args.pause = if mode == Mode::Passthrough { 0.05 } else { 0.0 };
        run(run_args).await.expect("eval runs");

        let mut expected: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for body in mock
            .requests()
            .iter()
            .filter(|r| r.path_and_query == "/v1/chat/completions")
            .map(|r| r.json())
        {
            let entry = expected.entry(kind_of(&body)).or_default();
            entry.0 += 1;
            entry.1 += billed(&body);
        }
        let summary = results(out.path());
        let paused = if mode == Mode::Passthrough { 0.05 } else { 0.0 };
        assert_eq!(summary["pause_s"], paused);
        let strategy = &summary["strategies"][0];
        assert_eq!(strategy["strategy"], mode.as_str());
        let work = &strategy["work"];
        let reported = |kind: &str| {
            (
                work[kind]["calls"].as_u64().unwrap_or(0),
                work[kind]["prompt_tokens"].as_u64().unwrap_or(0),
            )
        };
        // Two replayed user turns and one probe are answered by one chat call each.
        assert_eq!(reported("chat").0, 3, "{mode}: {work}");
        match mode {
            Mode::Explicit => {
                let (calls, tokens) = expected["chat"];
                let steps = reported("agent_step");
                assert_eq!(steps.0, 1, "one extra agent step");
                assert_eq!(
                    expected["rewarm"].0, 1,
                    "a re-warm after the first replayed turn"
                );
                assert_eq!(expected["extract"].0, 1, "the second turn's save");
                assert_eq!(reported("extract"), expected["extract"], "booked as a save");
                assert_eq!(
                    reported("rewarm"),
                    expected["rewarm"],
                    "re-warms booked apart"
                );
                assert_eq!(
                    (reported("chat").0 + steps.0, reported("chat").1 + steps.1),
                    (calls, tokens)
                );
            }
            _ => {
                for (kind, totals) in &expected {
                    assert_eq!(reported(kind), *totals, "{mode} {kind}");
                }
            }
        }
        if mode == Mode::Implicit {
            assert!(
                expected.contains_key("extract"),
                "implicit mode extracted facts"
            );
        }
        assert_eq!(strategy["probes"], 1);
        assert_eq!(strategy["requests"], 3);
        assert_eq!(strategy["errors"], 0);
        // Every chat call's cache report was read, and the prompt each shares with the one
        // before is measured.
        let chat = &work["chat"];
        assert_eq!(chat["cache_reported"], chat["calls"], "{mode}: {work}");
        assert!(chat["prompt_text_tokens"].as_u64() > Some(0));
        if mode == Mode::Explicit {
            // The agent's later turns extend its earlier prompts: the cache serves them. Its
            // second step follows a core-memory edit, which changes the core memory shown
            // before the turn: the tools, system message and history before it are shared.
            assert!(chat["cached_tokens"].as_u64() > Some(0), "{work}");
            let step = &work["agent_step"];
            assert!(step["cached_tokens"].as_u64() > Some(0), "{work}");
            assert!(step["shared_prefix_tokens"].as_u64() > Some(0), "{work}");
            assert!(step["shared_prefix_tokens"].as_u64() <= step["prompt_text_tokens"].as_u64());
        }
        let html = std::fs::read_to_string(out.path().join("report.html")).expect("report");
        assert!(html.contains("<svg") && html.contains(mode.as_str()));
        assert!(html.contains("<h2>Per turn</h2>"));
        if mode == Mode::Explicit {
            // "Your dog is Pixel." vs "Pixel": 1 common token, precision 1/4, recall 1 → F1 0.4.
            assert_eq!(strategy["f1"], 0.4);
            assert_eq!(strategy["contains"], 1.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_resumes_with_the_missing_pairs_only() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let strategies = vec![Mode::Passthrough, Mode::Window];
    run(args(
        fixture("tiny-scenario.json"),
        strategies.clone(),
        &mock,
        out.path(),
    ))
    .await
    .expect("first run");
    let runs = out.path().join("runs.jsonl");
    let text = std::fs::read_to_string(&runs).expect("runs");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    // The crash came while the second pair was being written; the first pair's score was
    // written by an older scorer (it is scored again).
    let mut first: Value = serde_json::from_str(lines[0]).expect("pair");
    let scored = first["probes"][0]["f1"].clone();
    first["probes"][0]["f1"] = json!(0.123);
    std::fs::write(
        &runs,
        format!("{first}\n{}", &lines[1][..lines[1].len() / 2]),
    )
    .expect("truncate");
    let before = mock.requests().len();

    let mut again = args(fixture("tiny-scenario.json"), strategies, &mock, out.path());
    again.resume = true;
    run(again).await.expect("resumed run");
    let chat_calls = mock.requests()[before..]
        .iter()
        .filter(|r| r.path_and_query == "/v1/chat/completions")
        .count();
    assert_eq!(chat_calls, 3, "only the window pair ran again");
    let summary = results(out.path());
    let names: Vec<&str> = summary["strategies"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|s| s["strategy"].as_str())
        .collect();
    assert_eq!(names, ["passthrough", "window"]);
    let text = std::fs::read_to_string(&runs).expect("runs");
    let first: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("pair");
    assert_eq!(first["probes"][0]["f1"], scored, "scored again on resume");
}

/// `--by-strategy` replays every conversation of one strategy before the next strategy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_strategy_runs_each_strategy_back_to_back() {
    let mock = MockUpstream::start().await.expect("mock");
    let dataset = tempfile::tempdir().expect("dataset");
    let tiny: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("tiny-scenario.json")).expect("read"),
    )
    .expect("json");
    for id in ["one", "two"] {
        let mut copy = tiny.clone();
        copy["id"] = json!(id);
        std::fs::write(dataset.path().join(format!("{id}.json")), copy.to_string()).expect("write");
    }
    for (by_strategy, expected) in [
        (
            true,
            [
                "one passthrough",
                "two passthrough",
                "one window",
                "two window",
            ],
        ),
        (
            false,
            [
                "one passthrough",
                "one window",
                "two passthrough",
                "two window",
            ],
        ),
    ] {
        let out = tempfile::tempdir().expect("out");
        let mut run_args = args(
            dataset.path().to_owned(),
            vec![Mode::Passthrough, Mode::Window],
            &mock,
            out.path(),
        );
        run_args.by_strategy = by_strategy;
        run(run_args).await.expect("eval runs");
        let text = std::fs::read_to_string(out.path().join("runs.jsonl")).expect("runs");
        let pairs: Vec<String> = text
            .lines()
            .map(|line| {
                let pair: Value = serde_json::from_str(line).expect("pair");
                format!(
                    "{} {}",
                    pair["conversation"].as_str().unwrap_or(""),
                    pair["strategy"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(pairs, expected, "by_strategy {by_strategy}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_context_ceiling_replays_nothing_and_scores_the_others_against_it() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(
        fixture("tiny-scenario.json"),
        vec![Mode::Passthrough],
        &mock,
        out.path(),
    );
    run_args.strategies.insert(0, EvalStrategy::FullContext);
    for answer in ["Pixel", "ok", "ok", "Maybe Pixel or Rex"] {
        mock.push(Reply::Text(answer.to_owned()));
    }
    run(run_args).await.expect("eval runs");
    let chats: Vec<Value> = mock
        .requests()
        .iter()
        .filter(|r| r.path_and_query == "/v1/chat/completions")
        .map(|r| r.json())
        .collect();
    // The ceiling's one probe; passthrough's two replayed turns and one probe.
    assert_eq!(chats.len(), 4);
    let probe = chats[0]["messages"].to_string();
    assert!(
        probe.contains("I live in Lisbon.") && probe.contains("[Session 1, 2026-01-10"),
        "every session in the prompt, dated: {probe}"
    );
    let summary = results(out.path());
    let strategies = summary["strategies"].as_array().expect("list");
    assert_eq!(strategies[0]["strategy"], "full-context");
    assert_eq!(strategies[0]["requests"], 1);
    assert_eq!(strategies[0]["f1"], 1.0);
    assert_eq!(strategies[0]["f1_of_ceiling"], 1.0);
    // "Maybe Pixel or Rex" vs "Pixel": precision 1/4, recall 1 → F1 0.4, 40% of the ceiling.
    assert_eq!(strategies[1]["f1_of_ceiling"], 0.4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fact_keeping_strategies_report_what_they_left_in_the_store() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(
        fixture("tiny-scenario.json"),
        vec![Mode::Implicit, Mode::Passthrough],
        &mock,
        out.path(),
    );
    run_args.strategies.insert(1, EvalStrategy::AddOnly);
    // Every extraction answers with one fact, its copy and a question.
    let answer = json!({"facts": [
        {"text": "The user lives in Lisbon.", "kind": "fact"},
        {"text": "The user lives in Lisbon.", "kind": "fact"},
        {"text": "What is my dog called?", "kind": "fact"},
    ]})
    .to_string();
    for _ in 0..12 {
        mock.push_marked("MEMPROXY-EXTRACT", Reply::Text(answer.clone()));
    }
    run(run_args).await.expect("eval runs");
    let summary = results(out.path());
    let strategies = summary["strategies"].as_array().expect("list");
    let names: Vec<&str> = strategies
        .iter()
        .filter_map(|s| s["strategy"].as_str())
        .collect();
    assert_eq!(names, ["implicit", "implicit-add-only", "passthrough"]);
    for strategy in &strategies[..2] {
        let store = &strategy["store"];
        assert_eq!(store["stored"], 1, "{strategy}");
        assert_eq!(store["retired"], 0, "{strategy}");
        assert!(store["duplicates"].as_u64() >= Some(1), "{strategy}");
        assert!(
            store["rejected"]["question"].as_u64() >= Some(1),
            "{strategy}"
        );
    }
    assert!(
        strategies[2].get("store").is_none(),
        "passthrough keeps no facts"
    );
}

/// `--settle` waits after each replayed turn for the work it set off: the extraction of the first
/// turn is done before the second turn is sent, and each wait is reported on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_waits_for_each_turns_work_before_the_next() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(
        fixture("tiny-scenario.json"),
        vec![Mode::Implicit],
        &mock,
        out.path(),
    );
    run_args.settle = true;
    let answer = json!({"facts": [{"text": "The user lives in Lisbon.", "kind": "fact"}]});
    for _ in 0..4 {
        mock.push_marked("MEMPROXY-EXTRACT", Reply::Text(answer.to_string()));
    }
    run(run_args).await.expect("eval runs");
    let runs = std::fs::read_to_string(out.path().join("runs.jsonl")).expect("runs");
    let pair: Value = serde_json::from_str(runs.lines().next().expect("a pair")).expect("json");
    assert_eq!(
        pair["settle_ms"].as_array().map(Vec::len),
        Some(2),
        "{pair}"
    );
    // The second turn's request carried the fact extracted from the first.
    let chats: Vec<Value> = mock
        .chat_requests(None)
        .into_iter()
        .filter(|r| kind_of(r) == "chat")
        .collect();
    assert!(
        chats[1].to_string().contains("The user lives in Lisbon."),
        "{}",
        chats[1]
    );
    let summary = results(out.path());
    assert!(
        summary["strategies"][0]["settle_p50_ms"].is_number(),
        "{summary}"
    );
}

/// With `--memory-upstream`, the memory LLM's calls go through a tap of their own and are booked
/// as memory work: none reaches the chat upstream, and every one it got is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_memory_upstream_is_booked_too() {
    let chat = MockUpstream::start().await.expect("chat mock");
    let memory = MockUpstream::start().await.expect("memory mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(
        fixture("tiny-scenario.json"),
        vec![Mode::Implicit],
        &chat,
        out.path(),
    );
    run_args.memory_upstream = Some(memory.base_url());
    let answer = json!({"facts": [{"text": "The user lives in Lisbon.", "kind": "fact"}]});
    for _ in 0..4 {
        memory.push_marked("MEMPROXY-EXTRACT", Reply::Text(answer.to_string()));
    }
    run(run_args).await.expect("eval runs");
    let completions = |mock: &MockUpstream| -> Vec<Value> {
        mock.requests()
            .iter()
            .filter(|r| r.path_and_query == "/v1/chat/completions")
            .map(|r| r.json())
            .collect()
    };
    let on_chat = completions(&chat)
        .iter()
        .filter(|r| kind_of(r) != "chat")
        .count();
    assert_eq!(on_chat, 0, "memory work went to the chat upstream");
    let on_memory = completions(&memory);
    assert!(!on_memory.is_empty(), "the memory upstream was used");
    let summary = results(out.path());
    let work = &summary["strategies"][0]["work"];
    let booked: u64 = work
        .as_object()
        .expect("work")
        .iter()
        .filter(|(kind, _)| *kind != "chat")
        .filter_map(|(_, w)| w["calls"].as_u64())
        .sum();
    assert_eq!(booked, on_memory.len() as u64, "{work}");
    assert!(work["extract"]["calls"].as_u64() >= Some(1), "{work}");
}

/// With `--judge-upstream`, every probe is graded there and nothing of the judge's reaches the
/// chat upstream; the verdict comes back into the probe's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_judge_upstream_grades_every_probe() {
    let chat = MockUpstream::start().await.expect("chat mock");
    let judge = MockUpstream::start().await.expect("judge mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(
        fixture("tiny-scenario.json"),
        vec![Mode::Passthrough],
        &chat,
        out.path(),
    );
    run_args.judge_model = Some("judge-model".to_owned());
    run_args.judge_upstream = Some(judge.base_url());
    for _ in 0..8 {
        judge.push(Reply::Text("CORRECT".to_owned()));
    }
    run(run_args).await.expect("eval runs");
    let graded = |mock: &MockUpstream| {
        mock.chat_requests(None)
            .iter()
            .filter(|r| r.to_string().contains("You grade answers"))
            .count()
    };
    let summary = results(out.path());
    let probes = summary["strategies"][0]["probes"].as_u64().unwrap_or(0);
    assert!(probes >= 1, "{summary}");
    assert_eq!(graded(&judge) as u64, probes, "one grading per probe");
    assert_eq!(
        graded(&chat),
        0,
        "the judge's prompt reached the chat upstream"
    );
    assert_eq!(
        summary["strategies"][0]["judge"].as_f64(),
        Some(1.0),
        "{summary}"
    );
}
