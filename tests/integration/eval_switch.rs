//! `memproxy eval`'s mode switches (issue 46): sessions told in one mode and probes asked in the
//! other, on one memory, reported beside the single-mode strategies.

use memproxy::eval::ceiling::EvalStrategy;
use memproxy::eval::run::run;
use memproxy::mock::{MockUpstream, Reply};
use memproxy::mode::Mode;
use serde_json::{json, Value};

use crate::eval::{args, fixture, results};

/// The probe's requests to the chat model (memory LLM calls aside), as text.
fn probe_requests(mock: &MockUpstream) -> String {
    mock.chat_requests(None)
        .iter()
        .filter(|r| r.to_string().contains("What is my dog called?"))
        .map(Value::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn told_in_implicit_mode_and_asked_in_explicit_mode() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(fixture("tiny-scenario.json"), Vec::new(), &mock, out.path());
    run_args.strategies = vec!["implicit>explicit".parse().expect("a strategy")];
    assert_eq!(
        run_args.strategies,
        [EvalStrategy::Switch {
            told: Mode::Implicit
        }]
    );
    let answer = json!({"facts": [{"text": "The user's dog is called Pixel.", "kind": "fact"}]});
    for _ in 0..4 {
        mock.push_marked("MEMPROXY-EXTRACT", Reply::Text(answer.to_string()));
    }
    run(run_args).await.expect("eval runs");
    // The agent, asked after the switch, was shown what implicit mode learned and heard.
    let probe = probe_requests(&mock);
    assert!(probe.contains("known about the user"), "{probe}");
    assert!(probe.contains("The user's dog is called Pixel."), "{probe}");
    assert!(probe.contains("My dog is Pixel."), "{probe}");
    let summary = results(out.path());
    let strategy = &summary["strategies"][0];
    assert_eq!(strategy["strategy"], "implicit>explicit");
    assert_eq!(strategy["evidence_in_context"], 1.0, "{strategy}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn told_in_explicit_mode_and_asked_in_implicit_mode() {
    let mock = MockUpstream::start().await.expect("mock");
    let out = tempfile::tempdir().expect("out");
    let mut run_args = args(fixture("tiny-scenario.json"), Vec::new(), &mock, out.path());
    run_args.strategies = vec!["explicit>implicit".parse().expect("a strategy")];
    let call = |name: &str, arguments: Value| {
        Reply::ToolCalls(vec![(name.to_owned(), arguments.to_string())])
    };
    mock.push(call("send_message", json!({"message": "Nice city."})));
    mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user has a dog named Pixel.", "request_heartbeat": true}),
    ));
    mock.push(call("send_message", json!({"message": "Noted."})));
    run(run_args).await.expect("eval runs");
    // Implicit mode, asked after the switch, injected what the agent saved.
    let probe = probe_requests(&mock);
    assert!(probe.contains("The user has a dog named Pixel."), "{probe}");
    let summary = results(out.path());
    assert_eq!(summary["strategies"][0]["strategy"], "explicit>implicit");
}
