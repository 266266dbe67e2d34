//! The fact-store audit: `eval --audit` labels every memory a replay left with the judge model
//! reading the whole conversation, and `eval audit` labels a finished run again and reports the
//! judge's agreement with a person's labels.

use std::process::Command;

use memproxy::mock::{MockUpstream, Reply};
use memproxy::mode::Mode;
use serde_json::{json, Value};

use super::eval::{args, fixture, results};

/// A person's labels, one JSON line each.
fn write_labels(path: &std::path::Path, labels: &[Value]) {
    let lines: Vec<String> = labels.iter().map(Value::to_string).collect();
    std::fs::write(path, lines.join("\n")).expect("labels");
}

fn verdict(label: &str) -> Reply {
    Reply::Text(json!({"reason": "scripted", "label": label}).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_labels_each_stored_memory_and_is_compared_with_a_persons_labels() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(
        fixture("tiny-scenario.json"),
        vec![Mode::Implicit],
        &mock,
        out.path(),
    );
    run_args.audit = true;
    // The mock's memory LLM keeps each user line as a fact, naively put in the third person
    // ("The user live in Lisbon."): two memories, oldest first.
    mock.push_marked("MEMPROXY-AUDIT", verdict("correct"));
    mock.push_marked("MEMPROXY-AUDIT", verdict("wrong_subject"));
    memproxy::eval::run::run(run_args.clone())
        .await
        .expect("eval runs");

    let judged = mock.chat_requests(Some("MEMPROXY-AUDIT"));
    assert_eq!(judged.len(), 2, "one judgement per memory");
    let material = judged[1]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    // The whole conversation, the assistant's lines too, every entry, then the one to label.
    assert!(material.contains("user: I live in Lisbon."), "{material}");
    assert!(material.contains("assistant: Nice city."), "{material}");
    assert!(
        material.contains("1. The user live in Lisbon."),
        "{material}"
    );
    assert!(
        material.ends_with("Entry to check: 2. The user's dog is Pixel.\n"),
        "{material}"
    );
    assert_eq!(judged[0]["response_format"]["type"], "json_schema");

    let runs = std::fs::read_to_string(out.path().join("runs.jsonl")).expect("runs");
    let pair: Value = serde_json::from_str(runs.lines().next().expect("a pair")).expect("json");
    assert_eq!(
        pair["memories"],
        json!([
            {"text": "The user live in Lisbon.", "label": "correct", "reason": "scripted"},
            {"text": "The user's dog is Pixel.", "label": "wrong_subject", "reason": "scripted"},
        ])
    );
    let summary = results(out.path());
    let audit = &summary["strategies"][0]["audit"];
    assert_eq!(audit["memories"], 2);
    assert_eq!(audit["labels"], json!({"correct": 1, "wrong_subject": 1}));

    // Labelled again by `eval audit`, against a person who disagrees on the dog.
    let labels = out.path().join("labels.jsonl");
    write_labels(
        &labels,
        &[
            json!({"conversation": "tiny", "memory": "the user live in Lisbon", "label": "correct"}),
            json!({"conversation": "tiny", "memory": "The user's dog is Pixel.", "label": "correct"}),
        ],
    );
    mock.push_marked("MEMPROXY-AUDIT", verdict("correct"));
    mock.push_marked("MEMPROXY-AUDIT", verdict("stale"));
    let output = Command::new(env!("CARGO_BIN_EXE_memproxy"))
        .args(["eval", "audit", "--run"])
        .arg(out.path())
        .arg("--dataset")
        .arg(fixture("tiny-scenario.json"))
        .args(["--judge-upstream", &mock.base_url()])
        .arg("--labels")
        .arg(&labels)
        .output()
        .expect("memproxy runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        printed.contains("[stale] tiny: The user's dog is Pixel."),
        "{printed}"
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.path().join("audit.json")).expect("audit.json"))
            .expect("json");
    let agreement = &report["agreement"];
    assert_eq!(agreement["compared"], 2);
    assert_eq!(agreement["same"], 1);
    assert_eq!(agreement["same_verdict"], 1);
    // Observed 1/2; the person said "correct" twice, the judge once: expected 1 × 1/2; kappa 0.
    assert_eq!(agreement["kappa"], 0.0);
    assert_eq!(
        agreement["confusion"],
        json!([
            {"person": "correct", "judge": "correct", "count": 1},
            {"person": "correct", "judge": "stale", "count": 1},
        ])
    );
}

#[test]
fn the_gates_are_put_to_each_labelled_memory_without_a_model() {
    let dir = tempfile::tempdir().expect("dir");
    let labels = dir.path().join("labels.jsonl");
    write_labels(
        &labels,
        &[
            json!({"conversation": "tiny", "memory": "The user lives in Lisbon.", "label": "correct"}),
            json!({"conversation": "tiny", "memory": "The user is Pixel.", "label": "wrong_subject"}),
            json!({"conversation": "tiny", "memory": "The user thinks Lisbon is a nice city.", "label": "misattributed"}),
            json!({"conversation": "other", "memory": "The user has a cat.", "label": "correct"}),
        ],
    );
    let output = Command::new(env!("CARGO_BIN_EXE_memproxy"))
        .args(["eval", "gates", "--show", "--dataset"])
        .arg(fixture("tiny-scenario.json"))
        .arg("--labels")
        .arg(&labels)
        .output()
        .expect("memproxy runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    // The label of another conversation is not read; the user's own fact passes, the dog's name
    // given to the user and the assistant's words told as the user's are refused, by name.
    assert!(
        printed.contains("3 labelled memories of 1 conversations"),
        "{printed}"
    );
    let row = |label: &str| {
        printed
            .lines()
            .find(|l| l.starts_with(label) && !l.contains("The user"))
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(row("correct"), "correct 1 0", "{printed}");
    assert_eq!(row("wrong_subject"), "wrong_subject 0 1", "{printed}");
    assert_eq!(row("misattributed"), "misattributed 0 1", "{printed}");
    assert!(printed.contains("not_the_user 1"), "{printed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_is_put_to_each_labelled_memory_and_its_answers_are_read_against_the_conversation(
) {
    let mock = MockUpstream::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let dataset = dir.path().join("moved.json");
    std::fs::write(
        &dataset,
        json!({"id": "moved", "title": "A move", "sessions": [
            {"date": "2026-01-10T10:00:00Z", "turns": [
                {"user": "I live in Lisbon."}, {"assistant": "Nice city."},
                {"user": "My dog is Pixel."}]},
            {"date": "2026-03-10T10:00:00Z", "turns": [
                {"user": "I moved to Porto last month. Pixel loves the beach."}]}],
            "probes": []})
        .to_string(),
    )
    .expect("dataset");
    let labels = dir.path().join("labels.jsonl");
    write_labels(
        &labels,
        &[
            json!({"conversation": "moved", "memory": "The user lives in Lisbon.", "label": "stale"}),
            json!({"conversation": "moved", "memory": "The user's dog is Pixel.", "label": "correct"}),
            json!({"conversation": "moved", "memory": "The user thinks Lisbon is a nice city.", "label": "misattributed"}),
            json!({"conversation": "elsewhere", "memory": "The user has a cat.", "label": "correct"}),
        ],
    );
    let answer = |source: &str, speaker: &str, changed_by: &str| {
        Reply::Text(
            json!({"source": source, "speaker": speaker, "said_as": "statement",
                "right_person": true, "changed_by": changed_by, "repeats": 0})
            .to_string(),
        )
    };
    // A later sentence of the user's makes the first stale; a sentence said before the source
    // changes nothing; words the assistant wrote are the assistant's, whatever the judge says.
    mock.push_marked(
        "MEMPROXY-AUDIT",
        answer("I live in Lisbon.", "user", "I moved to Porto last month."),
    );
    mock.push_marked(
        "MEMPROXY-AUDIT",
        answer("My dog is Pixel.", "user", "I live in Lisbon."),
    );
    mock.push_marked("MEMPROXY-AUDIT", answer("Nice city.", "user", ""));
    let out = dir.path().join("judged.json");
    let output = Command::new(env!("CARGO_BIN_EXE_memproxy"))
        .args(["eval", "judge", "--dataset"])
        .arg(&dataset)
        .arg("--labels")
        .arg(&labels)
        .args(["--judge-upstream", &mock.base_url(), "--out"])
        .arg(&out)
        .output()
        .expect("memproxy runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        printed.contains("judge vs person on 3 memories: same label 100%"),
        "{printed}"
    );

    let judged = mock.chat_requests(Some("MEMPROXY-AUDIT"));
    assert_eq!(judged.len(), 3, "one judgement per labelled memory");
    let schema = &judged[2]["response_format"]["json_schema"]["schema"]["properties"];
    // Only an earlier entry can be repeated: the third may name the first two.
    assert_eq!(schema["repeats"]["maximum"], 2, "{schema}");
    assert_eq!(
        judged[0]["response_format"]["json_schema"]["schema"]["properties"]["repeats"]["maximum"],
        0
    );
    // The run's memories are the entries, in the labels' order.
    let material = judged[2]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        material.contains("2. The user's dog is Pixel.\n")
            && material.ends_with("Entry to check: 3. The user thinks Lisbon is a nice city.\n"),
        "{material}"
    );

    let report: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("judged.json")).expect("json");
    let labels: Vec<(&str, &str)> = report["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| {
            (
                m["person"].as_str().unwrap_or_default(),
                m["judge"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("stale", "stale"),
            ("correct", "correct"),
            ("misattributed", "misattributed")
        ]
    );
    assert_eq!(report["agreement"]["kappa"], 1.0);
}
