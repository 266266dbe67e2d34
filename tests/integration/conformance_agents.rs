//! The store conformance suite, explicit-mode areas: agents (blocks, the memory epoch, the log and
//! its context, tool-call deletion, pauses, passages, steps, tags, reset) and shared blocks, the
//! same checks on SQLite and on PostgreSQL.

use memproxy::store::prelude::*;
use memproxy::store::{
    AgentMessage, CoreBlock, Page, SharedBlock, StepRecord, StoreError, Summary, UserScope,
};
use serde_json::json;

use crate::backends::on_every_backend;

fn block(label: &str, value: &str) -> CoreBlock {
    CoreBlock {
        label: label.to_owned(),
        value: value.to_owned(),
        char_limit: 200,
        read_only: false,
        updated_at_ms: 0,
        shared: None,
    }
}

fn message(role: &str, content: &str, at: i64) -> AgentMessage {
    AgentMessage {
        role: role.to_owned(),
        content: content.to_owned(),
        tool_calls: None,
        tool_call_id: None,
        search_text: content.to_owned(),
        created_at_ms: at,
    }
}

fn step(turn: &str) -> StepRecord {
    StepRecord {
        turn: turn.to_owned(),
        step: 0,
        tool: "send_message".to_owned(),
        arguments: "{}".to_owned(),
        status: "ok".to_owned(),
        result: "sent".to_owned(),
        heartbeat: false,
        prompt_tokens: 10,
        completion_tokens: 2,
        cached_tokens: Some(4),
        latency_ms: 1.5,
        created_at_ms: 1,
    }
}

fn values(blocks: &[CoreBlock]) -> Vec<(String, String)> {
    blocks
        .iter()
        .map(|b| (b.label.clone(), b.value.clone()))
        .collect()
}

fn agents_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    let bob = UserScope::new("acme", "bob");
    let record = store
        .ensure_agent(
            &ana,
            "helper",
            &[block("persona", "I help."), block("human", "")],
        )
        .expect("agent");
    assert_eq!(record.name, "helper");
    let again = store
        .ensure_agent(&ana, "helper", &[block("persona", "Other.")])
        .expect("again");
    assert_eq!(again.created_at_ms, record.created_at_ms);
    assert_eq!(
        values(&store.core_blocks(&ana, "helper").expect("blocks")),
        [
            ("persona".to_owned(), "I help.".to_owned()),
            ("human".to_owned(), String::new())
        ],
        "starting blocks once, not replaced"
    );
    // The system message is stored only at the memory epoch it was compiled at.
    let epoch = store.agent_memory_epoch(&ana, "helper").expect("epoch");
    store
        .set_agent_state(&ana, "helper", Some(("compiled", epoch)), false)
        .expect("state");
    assert_eq!(
        store.list_agents(&ana).expect("list")[0]
            .system_message
            .as_deref(),
        Some("compiled")
    );
    store
        .put_core_block(&ana, "helper", &block("human", "Ana lives in Porto."))
        .expect("put");
    let later = store.agent_memory_epoch(&ana, "helper").expect("epoch");
    assert!(later > epoch, "a block change bumps the epoch");
    assert_eq!(
        store.list_agents(&ana).expect("list")[0].system_message,
        None
    );
    store
        .set_agent_state(&ana, "helper", Some(("stale", epoch)), true)
        .expect("state");
    let listed = &store.list_agents(&ana).expect("list")[0];
    assert_eq!(listed.system_message, None, "compiled at an older epoch");
    assert!(listed.pressure_alerted);
    // Edits in one transaction, refusals passed back, unknown labels listed.
    let edited = store
        .edit_core_block(&ana, "helper", "human", &mut |b| {
            Ok(format!("{} She has a cat.", b.value))
        })
        .expect("edit");
    assert_eq!(
        edited.expect("label").expect("accepted").value,
        "Ana lives in Porto. She has a cat."
    );
    let refused = store
        .edit_core_block(&ana, "helper", "human", &mut |_| Err("no".to_owned()))
        .expect("edit");
    assert_eq!(refused, Ok(Err("no".to_owned())));
    let missing = store
        .edit_core_block(&ana, "helper", "nope", &mut |_| Ok(String::new()))
        .expect("edit");
    assert_eq!(missing, Err(vec!["persona".to_owned(), "human".to_owned()]));

    // The log, its context after the summary, counts.
    let (stored, _) = store
        .append_agent_messages(
            &ana,
            "helper",
            &[
                (message("user", "hello", 1_000), None),
                (message("assistant", "hi", 2_000), None),
                (message("user", "bye", 3_000), None),
            ],
            false,
        )
        .expect("append");
    assert_eq!(
        stored.iter().map(|m| m.position).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    let conversation = stored[0].conversation.clone();
    store
        .put_summary(
            &ana,
            &Summary {
                conversation: conversation.clone(),
                text: "They greeted.".to_owned(),
                through_position: 1,
                updated_at_ms: 5,
            },
        )
        .expect("summary");
    let (summary, context) = store.agent_context(&ana, "helper").expect("context");
    assert_eq!(summary.map(|s| s.text).as_deref(), Some("They greeted."));
    assert_eq!(
        context
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>(),
        ["bye"]
    );
    let counts = store.agent_counts(&ana, "helper").expect("counts");
    assert_eq!((counts.messages, counts.in_context), (3, 1));
    let (total, between) = store
        .messages_between(&ana, &conversation, 1_500, 3_500, Page::default())
        .expect("between");
    assert_eq!(total, 2);
    assert_eq!(between[0].content, "hi");
    // An agent's recall memory holds the user's chats too, never another agent's log.
    let mut chat = crate::common::turn(0, "user", "I sing in a choir.");
    chat.created_at_ms = 2_000;
    store
        .sync_messages(&ana, "chat-1", "default", &[chat])
        .expect("a chat");
    store
        .ensure_agent(&ana, "tutor", &[])
        .expect("another agent");
    store
        .append_agent_messages(
            &ana,
            "tutor",
            &[(message("user", "tutor's", 2_000), None)],
            true,
        )
        .expect("its log");
    let (total, between) = store
        .messages_between(&ana, &conversation, 1_500, 3_500, Page::default())
        .expect("between");
    let said: Vec<&str> = between.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(total, 3, "{said:?}");
    assert!(said.contains(&"I sing in a choir.") && !said.contains(&"tutor's"));
    assert!(store.reset_agent(&ana, "tutor").expect("reset"));

    // A call's results go with it; a result alone is refused.
    let mut call = message("assistant", "", 4_000);
    call.tool_calls = Some(json!([{"id": "call_1", "type": "function"}]).to_string());
    let mut result = message("tool", "done", 4_001);
    result.tool_call_id = Some("call_1".to_owned());
    store
        .append_agent_messages(&ana, "helper", &[(call, None), (result, None)], false)
        .expect("append");
    assert!(matches!(
        store.delete_agent_message(&ana, "helper", 4),
        Err(StoreError::Invalid(_))
    ));
    let (deleted, _) = store
        .delete_agent_message(&ana, "helper", 3)
        .expect("delete");
    assert_eq!(deleted.iter().map(|(_, p)| *p).collect::<Vec<_>>(), [3, 4]);
    assert!(matches!(
        store.delete_agent_message(&bob, "helper", 2),
        Err(StoreError::NotFound(_))
    ));

    // A paused turn, ended by a finished turn's messages.
    store
        .set_paused_turn(&ana, "helper", Some(("turn-1", "{\"step\":1}")))
        .expect("pause");
    assert_eq!(
        store
            .paused_turn(&ana, "helper")
            .expect("paused")
            .as_deref(),
        Some("{\"step\":1}")
    );
    store
        .append_agent_messages(
            &ana,
            "helper",
            &[(message("assistant", "ok", 5_000), None)],
            true,
        )
        .expect("append");
    assert_eq!(store.paused_turn(&ana, "helper").expect("paused"), None);

    // Passages, steps, tags.
    let (passage, _) = store
        .insert_passage(&ana, "helper", "Ana's cat is Miso.", 1, None)
        .expect("passage");
    assert_eq!(
        store
            .list_passages(&ana, Some("helper"), Page::default())
            .expect("passages")
            .len(),
        1
    );
    assert!(matches!(
        store.delete_passage(&ana, "other", passage),
        Err(StoreError::NotFound(_))
    ));
    store
        .record_steps(&ana, "helper", &[step("t1"), step("t2"), step("t3")], 2)
        .expect("steps");
    let steps = store.agent_steps(&ana, "helper", 10).expect("steps");
    assert_eq!(
        steps.iter().map(|s| s.turn.as_str()).collect::<Vec<_>>(),
        ["t2", "t3"]
    );
    assert_eq!(steps[0].cached_tokens, Some(4));
    assert!(store
        .set_agent_tags(&ana, "helper", &["planner".to_owned()])
        .expect("tags"));
    assert!(!store
        .set_agent_tags(&ana, "nobody", &["x".to_owned()])
        .expect("no agent"));
    assert_eq!(store.list_agents(&ana).expect("list")[0].tags, ["planner"]);

    // Bob sees none of it.
    assert!(store.core_blocks(&bob, "helper").expect("bob").is_empty());
    assert!(store.list_agents(&bob).expect("bob").is_empty());
    assert_eq!(store.agent_context(&bob, "helper").expect("bob").1.len(), 0);

    // Reset forgets everything of the agent.
    assert!(store.reset_agent(&ana, "helper").expect("reset"));
    assert!(store.list_agents(&ana).expect("list").is_empty());
    assert!(store
        .core_blocks(&ana, "helper")
        .expect("blocks")
        .is_empty());
    assert!(store
        .list_passages(&ana, Some("helper"), Page::default())
        .expect("passages")
        .is_empty());
    assert!(store
        .agent_steps(&ana, "helper", 10)
        .expect("steps")
        .is_empty());
    assert!(!store.reset_agent(&ana, "helper").expect("again"));
}

fn shared_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    let starting = [block("persona", "I help."), block("human", "own")];
    let shared = SharedBlock {
        name: "household".to_owned(),
        label: "human".to_owned(),
        value: "Ana is vegetarian.".to_owned(),
        char_limit: 200,
        read_only: false,
        updated_at_ms: 0,
        agents: Vec::new(),
    };
    store.put_shared_block(&ana, &shared).expect("shared");
    for agent in ["cook", "planner"] {
        store
            .attach_shared_block(&ana, agent, "household", &starting)
            .expect("attach");
    }
    assert!(matches!(
        store.attach_shared_block(&ana, "cook", "missing", &starting),
        Err(StoreError::NotFound(_))
    ));
    let epoch = store.agent_memory_epoch(&ana, "cook").expect("epoch");
    // The planner writes its `human` block: it is the shared one, the cook sees it.
    store
        .put_core_block(&ana, "planner", &block("human", "Ana is vegan."))
        .expect("write through the planner");
    let cook = store.core_blocks(&ana, "cook").expect("blocks");
    let human = cook.iter().find(|b| b.label == "human").expect("human");
    assert_eq!(human.value, "Ana is vegan.");
    assert_eq!(human.shared.as_deref(), Some("household"));
    assert!(store.agent_memory_epoch(&ana, "cook").expect("epoch") > epoch);
    assert!(matches!(
        store.delete_core_block(&ana, "cook", "human"),
        Err(StoreError::Invalid(_))
    ));
    let listed = store.shared_blocks(&ana).expect("list");
    assert_eq!(listed[0].agents, ["cook", "planner"]);
    // Detached, the cook's own block comes back.
    assert!(store
        .detach_shared_block(&ana, "cook", "household")
        .expect("detach"));
    let cook = store.core_blocks(&ana, "cook").expect("blocks");
    assert_eq!(
        cook.iter()
            .find(|b| b.label == "human")
            .map(|b| b.value.as_str()),
        Some("own")
    );
    assert!(store
        .delete_shared_block(&ana, "household")
        .expect("delete"));
    let planner = store.core_blocks(&ana, "planner").expect("blocks");
    assert_eq!(
        planner
            .iter()
            .find(|b| b.label == "human")
            .map(|b| b.value.as_str()),
        Some("own")
    );
    assert!(store
        .shared_blocks(&UserScope::new("acme", "bob"))
        .expect("bob")
        .is_empty());
}

#[test]
fn agents_on_every_backend() {
    on_every_backend(|b| agents_area(&*b.store));
}

#[test]
fn shared_blocks_on_every_backend() {
    on_every_backend(|b| shared_area(&*b.store));
}
