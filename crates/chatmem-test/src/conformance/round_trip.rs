//! What a store gives back is what was stored: an unknown conversation, raw commits,
//! the counter names, `ChatMemory` turns and exact JSON.

use chatmem::store::{Commit, Snapshot, StoredMessage};
use chatmem::{ChatMemory, Heuristic, Message, Retention, WindowPolicy};
use serde_json::{Value, json};

use super::harness::{Run, commit, commit_full, creating, seqs, sm, turns};

pub(super) async fn unknown_loads_empty(run: &Run) {
    let id = run.id("unknown");
    assert_eq!(
        run.load(&id).await,
        Snapshot::empty(),
        "an unknown conversation loads empty"
    );
    assert!(run.history(&id, 0, 100).await.is_empty());
    assert!(!run.clear(&id).await, "clearing an unknown conversation reports false");
    let mem = run.memory(20, Retention::DropEvicted);
    assert!(mem.get(&id).await.expect("get").is_empty());
    assert!(mem.history(&id).await.expect("history").is_empty());
    assert!(!run.list_range("unknown", 10).await.contains(&id));
}

pub(super) async fn raw_round_trip(run: &Run) {
    let id = run.id("raw");
    let system = sm(1, 7, Message::system("be brief"));
    // tokens near u32::MAX: stores must keep the full u32 range.
    let first = vec![
        sm(1, 3, Message::user("u1")),
        sm(2, 4_000_000_000, Message::assistant("a1")),
    ];
    let v = run
        .commit(&id, creating(Some(system.clone()), first.clone(), None))
        .await;
    assert_eq!(v, 1, "the first commit makes version 1");
    let snap = run.load(&id).await;
    assert_eq!(
        snap,
        Snapshot {
            version: 1,
            system: Some(system.clone()),
            window_start: 1,
            next_seq: 3,
            messages: first.clone().into(),
            summary: None,
        }
    );
    assert_eq!(run.history(&id, 0, 100).await, first);

    // Append one, move the window to 2 and drop what falls out.
    let third = sm(3, 5, Message::user("u3"));
    let v = run
        .commit(&id, commit(1, vec![third.clone()], 2, Retention::DropEvicted))
        .await;
    assert_eq!(v, 2);
    let snap = run.load(&id).await;
    assert_eq!(snap.version, 2);
    assert_eq!(snap.system, Some(system), "system kept when the commit has none");
    assert_eq!(snap.window_start, 2);
    assert_eq!(snap.next_seq, 4);
    assert_eq!(snap.messages, vec![first[1].clone(), third.clone()]);
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![2, 3], "seq 1 was dropped");

    // A system-only commit: next_seq unchanged. (That sequences run on and the window
    // start never moves back is `Commit`'s own rule: it cannot be built otherwise.)
    let system2 = sm(4, 9, Message::system("be verbose"));
    let v = run
        .commit(
            &id,
            commit_full(2, 4, Some(system2.clone()), Vec::new(), 2, Retention::DropEvicted, None),
        )
        .await;
    assert_eq!(v, 3);
    let snap = run.load(&id).await;
    assert_eq!(snap.system, Some(system2));
    assert_eq!(snap.window_start, 2);
    assert_eq!(snap.next_seq, 4);
    assert_eq!(seqs(&snap.messages), vec![2, 3]);

    // KeepHistory keeps evicted messages; a later DropEvicted deletes below the window.
    let id = run.id("raw-keep");
    run.commit(&id, commit(0, turns(1, 6), 4, Retention::KeepHistory)).await;
    let snap = run.load(&id).await;
    assert_eq!(
        seqs(&snap.messages),
        vec![4, 5, 6],
        "load returns seq >= window_start only"
    );
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![1, 2, 3, 4, 5, 6]);
    run.commit(&id, commit(1, turns(7, 1), 5, Retention::DropEvicted)).await;
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![5, 6, 7]);
    assert_eq!(seqs(&run.load(&id).await.messages), vec![5, 6, 7]);
}

/// Which counter made each count is stored with it, and a memory with another counter keeps
/// its budget by recounting.
pub(super) async fn counted_by_round_trip(run: &Run) {
    let id = run.id("counted-by");
    let commit = Commit::on(&Snapshot::empty())
        .counted_by("heuristic")
        .system(Message::system("be brief"), 4)
        .append(Message::user("u1"), 5)
        .append(Message::assistant("a1"), 5)
        .retention(Retention::KeepHistory)
        .build()
        .expect("a valid commit");
    run.commit(&id, commit).await;
    let snap = run.load(&id).await;
    let by = |m: &StoredMessage| m.counted_by.clone();
    assert_eq!(
        snap.system.as_ref().and_then(by),
        Some("heuristic".into()),
        "system counted_by"
    );
    assert_eq!(
        snap.messages.iter().map(by).collect::<Vec<_>>(),
        vec![Some("heuristic".into()); 2],
        "counted_by of each message"
    );
    assert_eq!(
        run.history(&id, 0, 10).await,
        snap.messages,
        "history keeps counted_by too"
    );
    // A message whose counter is not recorded reads back without one.
    run.commit(
        &id,
        commit_full(
            1,
            3,
            None,
            vec![sm(3, 2, Message::user("u2"))],
            1,
            Retention::KeepHistory,
            None,
        ),
    )
    .await;
    assert_eq!(run.load(&id).await.messages[2].counted_by, None);

    // Counts by a cheap counter, read by cl100k with a small budget: the budget holds.
    let id = run.id("counted-by-budget");
    let emoji = "😀".repeat(50);
    let writer = ChatMemory::builder(run.store.clone())
        .policy(WindowPolicy::tokens(100_000))
        .counter(Heuristic)
        .build()
        .expect("valid memory settings");
    let batch: Vec<Message> = (0..40)
        .map(|i| {
            if i % 2 == 0 {
                Message::user(emoji.clone())
            } else {
                Message::assistant(emoji.clone())
            }
        })
        .collect();
    writer.add(&id, batch).await.expect("add");
    let reader = ChatMemory::builder(run.store.clone())
        .policy(WindowPolicy::tokens(500))
        .counter(chatmem::Cl100k)
        .build()
        .expect("valid memory settings");
    let window = reader.get(&id).await.expect("get");
    assert!(!window.is_empty());
    let tokens = chatmem::TokenCounter::count_messages(&chatmem::Cl100k, &window);
    assert!(
        tokens <= 500,
        "a 500-token window read with cl100k holds {tokens} cl100k tokens"
    );
}

pub(super) async fn memory_round_trip(run: &Run) {
    let id = run.id("memory");
    let mem = run.memory(20, Retention::DropEvicted);
    let batch = vec![
        Message::user("我的订单是 LC202610060018，还没发货。"),
        Message::assistant("已查询。"),
    ];
    mem.add(&id, batch.clone()).await.expect("add");
    assert_eq!(mem.get(&id).await.expect("get"), batch);
    let mut turn = mem.begin(&id).await.expect("begin");
    assert_eq!(turn.loaded().messages(), batch);
    turn.push(Message::user("那单能退吗？"));
    let after = turn.commit_window().await.expect("commit");
    assert_eq!(after.len(), 3);
    let snap = run.load(&id).await;
    assert_eq!(snap.version, 2);
    assert_eq!(seqs(&snap.messages), vec![1, 2, 3]);
    assert_eq!(after.messages(), mem.get(&id).await.expect("get"));
    // A second memory over the same store sees the same conversation.
    assert_eq!(
        run.memory(20, Retention::DropEvicted)
            .get(&id)
            .await
            .expect("get")
            .len(),
        3
    );
}

pub(super) fn json_messages() -> Vec<Value> {
    let big = "长".repeat(20_000) + "end";
    vec![
        json!({"role": "system", "content": "be brief", "name": "policy"}),
        json!({"role": "user", "content": "hi \"there\" 'you' \\ 100% {x} *:*", "name": "alice",
            "metadata": {"channel": "app", "n": [1, 2.5, null, true], "nested": {"k": "v"}}}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/y.png", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}, "extra": [1, {"a": null}]}
        ]}),
        json!({"role": "assistant", "reasoning_content": "thinking... 🤔", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":1}"}},
            {"id": "c2", "type": "function", "function": {"name": "other", "arguments": "not json {"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "boom", "is_error": true}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "{}", "metadata": {"ms": 12}}),
        // NUL and other control characters in text: stores must accept any string.
        json!({"role": "assistant", "content": "done\u{0}\t\n\r\u{7f} ✓", "reasoning_content": "", "name": "bot",
            "metadata": {}}),
        json!({"role": "user", "content": big}),
    ]
}

pub(super) async fn json_round_trip(run: &Run) {
    let values = json_messages();
    let messages: Vec<Message> = values
        .iter()
        .map(|v| serde_json::from_value(v.clone()).expect("test message parses"))
        .collect();
    let as_values =
        |ms: &[Message]| -> Vec<Value> { ms.iter().map(|m| serde_json::to_value(m).expect("serialize")).collect() };
    assert_eq!(as_values(&messages), values, "test messages round-trip in memory");

    // Through ChatMemory.
    let id = run.id("json-memory");
    let mem = run.memory(1000, Retention::KeepHistory);
    mem.add(&id, messages.clone()).await.expect("add");
    assert_eq!(as_values(&mem.get(&id).await.expect("get")), values, "get");
    assert_eq!(as_values(&mem.history(&id).await.expect("history")), values, "history");

    // Through the raw store, with token counts.
    let id = run.id("json-raw");
    let system = sm(1, 11, messages[0].clone());
    let append: Vec<StoredMessage> = messages[1..]
        .iter()
        .zip(1u64..)
        .map(|(m, seq)| sm(seq, (seq * 17) as u32, m.clone()))
        .collect();
    run.commit(&id, creating(Some(system.clone()), append.clone(), None))
        .await;
    let snap = run.load(&id).await;
    assert_eq!(snap.system, Some(system));
    assert_eq!(snap.messages, append);
    assert_eq!(run.history(&id, 0, 100).await, append);
    let loaded: Vec<Message> = snap.messages.into_iter().map(StoredMessage::into_message).collect();
    assert_eq!(as_values(&loaded), values[1..].to_vec());

    // A developer message holds the system slot and keeps its role, stored and loaded.
    let id = run.id("json-developer");
    let developer = json!({"role": "developer", "content": "answer briefly", "name": "ops"});
    let parsed: Message = serde_json::from_value(developer.clone()).expect("test message parses");
    mem.add(&id, [parsed, Message::user("hi")]).await.expect("add");
    let window = mem.get(&id).await.expect("get");
    assert_eq!(
        as_values(&window[..1]),
        [developer],
        "the developer message first, as it came"
    );
    assert_eq!(
        run.load(&id).await.system.map(|s| s.message.role()),
        Some(chatmem::Role::Developer),
        "stored as the system message"
    );
}
