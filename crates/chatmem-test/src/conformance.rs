//! The checks behind [`run_conformance`](crate::run_conformance).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chatmem::{
    ChatMemory, Commit, ConversationId, Heuristic, Message, Retention, Snapshot, Store, StoreErrorKind, StoredMessage,
    WindowPolicy,
};

use serde_json::{Value, json};

mod summary;

type Mem = ChatMemory<Arc<dyn Store>>;

/// Per-call context: the store and the id prefix unique to this call.
struct Run {
    store: Arc<dyn Store>,
    prefix: String,
}

impl Run {
    fn id(&self, name: &str) -> ConversationId {
        ConversationId::new(format!("{}/{name}", self.prefix)).expect("valid test id")
    }

    fn memory(&self, max_messages: usize, retention: Retention) -> Mem {
        ChatMemory::builder(self.store.clone())
            .policy(WindowPolicy::messages(max_messages))
            .retention(retention)
            .counter(Arc::new(Heuristic))
            .max_attempts(100_000)
            .build()
            .expect("valid memory settings")
    }

    async fn load(&self, id: &ConversationId) -> Snapshot {
        self.store
            .load(id)
            .await
            .unwrap_or_else(|e| panic!("load {id:?}: {e} ({:?})", std::error::Error::source(&e)))
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> u64 {
        self.store
            .commit(id, commit)
            .await
            .unwrap_or_else(|e| panic!("commit {id:?}: {e} ({:?})", std::error::Error::source(&e)))
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Vec<StoredMessage> {
        self.store
            .history(id, after, limit)
            .await
            .unwrap_or_else(|e| panic!("history {id:?}: {e} ({:?})", std::error::Error::source(&e)))
    }

    async fn clear(&self, id: &ConversationId) -> bool {
        self.store
            .clear(id)
            .await
            .unwrap_or_else(|e| panic!("clear {id:?}: {e} ({:?})", std::error::Error::source(&e)))
    }

    /// Every id listed under `{prefix}/{sub}` by paging `limit` at a time from a cursor
    /// just below the range; checks page sizes, `next` and ascending order on the way.
    async fn list_range(&self, sub: &str, limit: usize) -> Vec<ConversationId> {
        let range = format!("{}/{sub}", self.prefix);
        let mut after = Some(ConversationId::new(range.clone()).expect("valid cursor"));
        let mut out: Vec<ConversationId> = Vec::new();
        let mut prev = after.clone();
        'pages: while let Some(cursor) = after.take() {
            let page = self
                .store
                .list(Some(&cursor), limit)
                .await
                .unwrap_or_else(|e| panic!("list after {cursor:?}: {e}"));
            assert!(page.ids.len() <= limit.max(1), "list returned more than the limit");
            if let Some(next) = &page.next {
                assert_eq!(
                    Some(next),
                    page.ids.last(),
                    "list: `next` must be the last id of a full page"
                );
                assert_eq!(page.ids.len(), limit.max(1), "list: `next` set on a short page");
            }
            for id in page.ids {
                assert!(
                    prev.as_ref().is_none_or(|p| *p < id),
                    "list: ids not strictly ascending"
                );
                prev = Some(id.clone());
                if !id.as_str().starts_with(&range) {
                    break 'pages;
                }
                out.push(id);
            }
            after = page.next;
        }
        out
    }
}

fn sm(seq: u64, tokens: u32, message: Message) -> StoredMessage {
    StoredMessage::new(seq, tokens, message)
}

/// A commit with no system change and no TTL: the shape most store tests need. `append`
/// must hold consecutive seqs (the first one is the conversation's `next_seq`).
///
/// # Panics
/// When `append` is empty or its seqs are not consecutive: use [`commit_full`].
pub fn commit(expected: u64, append: Vec<StoredMessage>, window_start: u64, retention: Retention) -> Commit {
    let next_seq = append
        .first()
        .map(|m| m.seq)
        .expect("commit() needs messages; use commit_full");
    commit_full(expected, next_seq, None, append, window_start, retention, None)
}

/// Any commit, built through [`Commit::on`] as a writer would: on a conversation at version
/// `expected` whose next seq is `next_seq`.
///
/// # Panics
/// When the seqs of `append` do not run from `next_seq`, or the builder rejects the commit.
pub fn commit_full(
    expected: u64,
    next_seq: u64,
    system: Option<StoredMessage>,
    append: Vec<StoredMessage>,
    window_start: u64,
    retention: Retention,
    ttl: Option<Duration>,
) -> Commit {
    let base = Snapshot {
        version: expected,
        next_seq,
        ..Snapshot::empty()
    };
    let mut builder = Commit::on(&base).retention(retention).ttl(ttl);
    if let Some(s) = system {
        builder = builder.system(s.message, s.tokens);
    }
    for (m, seq) in append.into_iter().zip(next_seq..) {
        assert_eq!(m.seq, seq, "test commits append consecutive seqs from {next_seq}");
        builder = builder.append(m.message, m.tokens);
    }
    builder.window_start(window_start).build().expect("a valid test commit")
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.text().unwrap_or_default().into_owned())
        .collect()
}

fn stored_texts(messages: &[StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.message.text().unwrap_or_default().into_owned())
        .collect()
}

fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// `n` alternating user/assistant messages `u{i}`/`a{i}` stored from `first_seq`.
fn turns(first_seq: u64, n: u64) -> Vec<StoredMessage> {
    (0..n)
        .map(|i| {
            let seq = first_seq + i;
            let m = if i % 2 == 0 {
                Message::user(format!("u{seq}"))
            } else {
                Message::assistant(format!("a{seq}"))
            };
            sm(seq, 3, m)
        })
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs one check; with `CHATMEM_TEST_TIMINGS` set, prints how long it took.
async fn step(name: &str, check: impl std::future::Future<Output = ()>) {
    let started = std::time::Instant::now();
    check.await;
    if std::env::var_os("CHATMEM_TEST_TIMINGS").is_some() {
        eprintln!("conformance: {name} took {:?}", started.elapsed());
    }
}

pub(crate) async fn run(store: Arc<dyn Store>) {
    let run = Run {
        store,
        prefix: format!("ct-{}", crate::run_token()),
    };
    step("unknown_loads_empty", unknown_loads_empty(&run)).await;
    step("raw_round_trip", raw_round_trip(&run)).await;
    step("counted_by_round_trip", counted_by_round_trip(&run)).await;
    step("memory_round_trip", memory_round_trip(&run)).await;
    step("window_contract", window_contract(&run)).await;
    step("system_replacement", system_replacement(&run)).await;
    step("retention", retention(&run)).await;
    step("json_round_trip", json_round_trip(&run)).await;
    step("conflicts", conflicts(&run)).await;
    step("resent_commit", resent_commit(&run)).await;
    step("summary_round_trip", summary::summary_round_trip(&run)).await;
    step("summaries_through_memory", summary::summaries_through_memory(&run)).await;
    step("history_paging", history_paging(&run)).await;
    step("clear", clear(&run)).await;
    step("list_paging", list_paging(&run)).await;
    step("awkward_ids", awkward_ids(&run)).await;
    step("ttl", ttl(&run)).await;
    step("concurrency_one_conversation", concurrency_one_conversation(&run)).await;
    step("concurrency_many_conversations", concurrency_many_conversations(&run)).await;
}

async fn unknown_loads_empty(run: &Run) {
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

async fn raw_round_trip(run: &Run) {
    let id = run.id("raw");
    let system = sm(1, 7, Message::system("be brief"));
    // tokens near u32::MAX: stores must keep the full u32 range.
    let first = vec![
        sm(1, 3, Message::user("u1")),
        sm(2, 4_000_000_000, Message::assistant("a1")),
    ];
    let v = run
        .commit(
            &id,
            commit_full(
                0,
                1,
                Some(system.clone()),
                first.clone(),
                1,
                Retention::KeepHistory,
                None,
            ),
        )
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
async fn counted_by_round_trip(run: &Run) {
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

async fn memory_round_trip(run: &Run) {
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

async fn window_contract(run: &Run) {
    let id = run.id("window5");
    let mem = run.memory(5, Retention::DropEvicted);
    mem.add(
        &id,
        [
            Message::system("S_old"),
            Message::user("U1"),
            Message::assistant("A1"),
            Message::user("U2"),
            Message::assistant("A2"),
            Message::user("U3"),
            Message::assistant("A3"),
            Message::system("S_new"),
        ],
    )
    .await
    .expect("add");
    assert_eq!(
        texts(&mem.get(&id).await.expect("get")),
        strs(&["S_new", "U2", "A2", "U3", "A3"])
    );
    let snap = run.load(&id).await;
    assert_eq!(snap.window_start, 3);
    assert_eq!(snap.next_seq, 7);
    assert_eq!(stored_texts(&snap.messages), strs(&["U2", "A2", "U3", "A3"]));
    assert_eq!(
        stored_texts(&run.history(&id, 0, 100).await),
        strs(&["U2", "A2", "U3", "A3"])
    );

    let id = run.id("window2");
    let mem = run.memory(2, Retention::DropEvicted);
    mem.add(
        &id,
        [
            Message::user("U1"),
            Message::assistant("A1"),
            Message::user("U2"),
            Message::assistant("A2"),
            Message::user("U3"),
        ],
    )
    .await
    .expect("add");
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["U3"]));
    assert_eq!(stored_texts(&run.history(&id, 0, 100).await), strs(&["U3"]));

    // One message at a time gives the same window as one batch.
    let id = run.id("window2-steps");
    for m in [
        Message::user("U1"),
        Message::assistant("A1"),
        Message::user("U2"),
        Message::assistant("A2"),
        Message::user("U3"),
    ] {
        mem.add(&id, [m]).await.expect("add");
    }
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["U3"]));
}

async fn system_replacement(run: &Run) {
    let id = run.id("system");
    let mem = run.memory(20, Retention::DropEvicted);
    mem.add(&id, [Message::system("rules v1"), Message::user("hi")])
        .await
        .expect("add");
    let v1 = run.load(&id).await.version;
    mem.add(&id, [Message::system("rules v1")]).await.expect("add");
    assert_eq!(
        run.load(&id).await.version,
        v1,
        "the same system text is ignored (no commit)"
    );
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["rules v1", "hi"]));
    mem.add(&id, [Message::system("rules v2")]).await.expect("add");
    let snap = run.load(&id).await;
    assert_eq!(snap.version, v1 + 1);
    assert_eq!(snap.next_seq, 2, "a system message takes no sequence of its own");
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["rules v2", "hi"]));
    assert_eq!(
        texts(&mem.history(&id).await.expect("history")),
        strs(&["rules v2", "hi"])
    );
}

async fn retention(run: &Run) {
    for retention in [Retention::DropEvicted, Retention::KeepHistory] {
        let id = run.id(&format!("retention-{retention:?}"));
        let mem = run.memory(4, retention);
        mem.add(&id, [Message::system("sys")]).await.expect("add");
        let mut all = vec!["sys".to_owned()];
        for i in 0..5 {
            let turn = [Message::user(format!("u{i}")), Message::assistant(format!("a{i}"))];
            all.extend(texts(&turn));
            mem.add(&id, turn).await.expect("add");
        }
        let window = texts(&mem.get(&id).await.expect("get"));
        assert_eq!(window, strs(&["sys", "u4", "a4"]), "{retention:?}");
        let snap = run.load(&id).await;
        let stored = run.history(&id, 0, 1000).await;
        let history = texts(&mem.history(&id).await.expect("history"));
        match retention {
            Retention::DropEvicted => {
                assert_eq!(stored, snap.messages, "DropEvicted keeps only the window's messages");
                assert_eq!(stored_texts(&stored), strs(&["u4", "a4"]));
                assert_eq!(history, window);
            }
            Retention::KeepHistory => {
                assert_eq!(seqs(&stored), (1..=10).collect::<Vec<_>>());
                assert_eq!(history, all, "KeepHistory returns everything in order");
                assert_eq!(stored_texts(&snap.messages), strs(&["u4", "a4"]));
            }
        }
    }
}

fn json_messages() -> Vec<Value> {
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

async fn json_round_trip(run: &Run) {
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
    run.commit(
        &id,
        commit_full(
            0,
            1,
            Some(system.clone()),
            append.clone(),
            1,
            Retention::KeepHistory,
            None,
        ),
    )
    .await;
    let snap = run.load(&id).await;
    assert_eq!(snap.system, Some(system));
    assert_eq!(snap.messages, append);
    assert_eq!(run.history(&id, 0, 100).await, append);
    let loaded: Vec<Message> = snap.messages.into_iter().map(StoredMessage::into_message).collect();
    assert_eq!(as_values(&loaded), values[1..].to_vec());
}

async fn conflicts(run: &Run) {
    let id = run.id("conflict");
    let err_kind = |r: Result<u64, chatmem::StoreError>| match r {
        Ok(v) => panic!("expected a conflict, got version {v}"),
        Err(e) => e.kind(),
    };
    // A non-zero expected version on an unknown conversation conflicts and creates nothing.
    let r = run
        .store
        .commit(&id, commit(3, turns(1, 1), 1, Retention::KeepHistory))
        .await;
    assert_eq!(err_kind(r), StoreErrorKind::Conflict);
    assert_eq!(run.load(&id).await, Snapshot::empty());
    assert!(
        !run.list_range("conflict", 10).await.contains(&id),
        "a failed commit creates nothing"
    );

    assert_eq!(
        run.commit(&id, commit(0, turns(1, 2), 1, Retention::KeepHistory)).await,
        1
    );
    let snap = run.load(&id).await;
    // Version 0 means "must not exist".
    let r = run
        .store
        .commit(&id, commit(0, turns(1, 2), 1, Retention::KeepHistory))
        .await;
    assert_eq!(err_kind(r), StoreErrorKind::Conflict);
    assert_eq!(run.load(&id).await, snap, "a conflicting commit writes nothing");
    assert_eq!(
        run.commit(&id, commit(1, turns(3, 2), 1, Retention::KeepHistory)).await,
        2
    );
    let snap = run.load(&id).await;
    let history = run.history(&id, 0, 100).await;
    for stale in [1, 3, 99] {
        let r = run
            .store
            .commit(
                &id,
                commit_full(
                    stale,
                    5,
                    Some(sm(5, 1, Message::system("nope"))),
                    turns(5, 2),
                    5,
                    Retention::DropEvicted,
                    None,
                ),
            )
            .await;
        assert_eq!(err_kind(r), StoreErrorKind::Conflict, "expected version {stale}");
        assert_eq!(run.load(&id).await, snap, "a conflicting commit writes nothing");
        assert_eq!(
            run.history(&id, 0, 100).await,
            history,
            "a conflicting commit deletes nothing"
        );
    }
}

/// The same commit sent twice (as a store or its caller does when a reply was lost) is
/// stored once and answered with the version it made; another commit still conflicts.
async fn resent_commit(run: &Run) {
    let id = run.id("resent");
    let create = commit(0, turns(1, 2), 1, Retention::KeepHistory);
    assert_eq!(run.commit(&id, create.clone()).await, 1);
    assert_eq!(
        run.commit(&id, create.clone()).await,
        1,
        "a resent creating commit answers its version"
    );
    let update = commit(1, turns(3, 2), 1, Retention::KeepHistory);
    assert_eq!(run.commit(&id, update.clone()).await, 2);
    assert_eq!(run.commit(&id, update).await, 2, "a resent commit answers its version");
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![1, 2, 3, 4], "stored once");
    // Once overtaken, the old commit is an ordinary conflict.
    let err = run.store.commit(&id, create).await.expect_err("an old commit");
    assert!(err.is_conflict(), "{err}");
    // A different commit expecting the old version conflicts, token or not.
    let other = commit(1, turns(3, 1), 1, Retention::KeepHistory);
    assert!(run.store.commit(&id, other).await.expect_err("stale").is_conflict());
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![1, 2, 3, 4]);
}

async fn history_paging(run: &Run) {
    let id = run.id("paging");
    run.commit(&id, commit(0, turns(1, 10), 8, Retention::KeepHistory))
        .await;
    assert_eq!(seqs(&run.history(&id, 0, 3).await), vec![1, 2, 3]);
    assert_eq!(seqs(&run.history(&id, 3, 3).await), vec![4, 5, 6]);
    assert_eq!(seqs(&run.history(&id, 9, 5).await), vec![10]);
    assert!(run.history(&id, 10, 5).await.is_empty());
    assert!(run.history(&id, 1000, 5).await.is_empty());
    assert!(run.history(&id, 0, 0).await.is_empty(), "limit 0 returns none");
    assert_eq!(run.history(&id, 0, 100).await, turns(1, 10));
    // ChatMemory::history pages 1,000 at a time: cross a page boundary.
    let id = run.id("paging-big");
    run.commit(&id, commit(0, turns(1, 1001), 990, Retention::KeepHistory))
        .await;
    let all = run
        .memory(20, Retention::KeepHistory)
        .history(&id)
        .await
        .expect("history");
    assert_eq!(all.len(), 1001);
    assert_eq!(texts(&all[1000..]), strs(&["u1001"]));
    assert_eq!(seqs(&run.history(&id, 999, 10).await), vec![1000, 1001]);
}

async fn clear(run: &Run) {
    let id = run.id("clear");
    let mem = run.memory(20, Retention::KeepHistory);
    mem.add(&id, [Message::system("s"), Message::user("u"), Message::assistant("a")])
        .await
        .expect("add");
    assert!(
        mem.clear(&id).await.expect("clear"),
        "clear reports an existing conversation"
    );
    assert_eq!(run.load(&id).await, Snapshot::empty());
    assert!(run.history(&id, 0, 100).await.is_empty());
    assert!(mem.get(&id).await.expect("get").is_empty());
    assert!(!mem.clear(&id).await.expect("clear"), "a second clear reports false");
    assert!(!run.list_range("clear", 10).await.contains(&id));
    // The id starts afresh.
    mem.add(&id, [Message::user("again")]).await.expect("add");
    let snap = run.load(&id).await;
    assert_eq!((snap.version, seqs(&snap.messages)), (1, vec![1]));
    assert!(snap.system.is_none(), "the old system message is gone");
    assert_eq!(stored_texts(&run.history(&id, 0, 100).await), strs(&["again"]));
}

async fn list_paging(run: &Run) {
    let ids: Vec<ConversationId> = (0..25).map(|i| run.id(&format!("list/{i:02}"))).collect();
    for id in ids.iter().rev() {
        run.commit(id, commit(0, turns(1, 1), 1, Retention::DropEvicted)).await;
    }
    for limit in [1, 7, 25, 100] {
        assert_eq!(run.list_range("list/", limit).await, ids, "paging {limit} at a time");
    }
    // limit 0 is treated as 1.
    let page = run.store.list(Some(&run.id("list/")), 0).await.expect("list");
    assert_eq!(page.ids, vec![ids[0].clone()], "limit 0 lists one id");
    assert_eq!(page.next, Some(ids[0].clone()));
    // From the start: ascending, bounded.
    let page = run.store.list(None, 3).await.expect("list");
    assert!(!page.ids.is_empty() && page.ids.len() <= 3);
    assert!(page.ids.windows(2).all(|w| w[0] < w[1]));
    // The cursor is exclusive.
    let page = run.store.list(Some(&ids[10]), 2).await.expect("list");
    assert_eq!(page.ids, ids[11..13].to_vec());
    assert_eq!(page.next, Some(ids[12].clone()));
    // Through ChatMemory, and after a clear.
    let mem = run.memory(20, Retention::DropEvicted);
    let page = mem.list(Some(&ids[23]), 5).await.expect("list");
    assert_eq!(page.ids.first(), Some(&ids[24]));
    assert!(mem.clear(&ids[0]).await.expect("clear"));
    assert_eq!(run.list_range("list/", 10).await, ids[1..].to_vec());
}

async fn awkward_ids(run: &Run) {
    for bad in ["a\nb", "tab\there", "nul\0", ""] {
        assert!(ConversationId::new(bad).is_err(), "{bad:?} must be rejected");
    }
    let mut names: Vec<String> = [
        "it's \"q\" 100% * a:b {x}",
        "a*",
        "ab",
        "a",
        "x%",
        "xy",
        "x",
        "_",
        "z",
        "a\\b",
        "a\\\\b",
        "{tag}",
        "{tag}x",
        "a:b",
        "a:b:c",
        "'; DROP TABLE conversations; --",
        "$1 ?1 :name @p",
        "ü ✓ 会话",
    ]
    .iter()
    .map(|s| format!("ids/{s}"))
    .collect();
    // Exactly 256 bytes of UTF-8 with multi-byte characters, and a prefix of it.
    let mut long = format!("{}/ids/long-", run.prefix);
    while long.len() + 3 <= 256 {
        long.push('界');
    }
    while long.len() < 256 {
        long.push('x');
    }
    assert_eq!(long.len(), 256);
    assert!(
        ConversationId::new(format!("{long}y")).is_err(),
        "257 bytes is too long"
    );
    let long_id = ConversationId::new(long.clone()).expect("256 bytes is allowed");
    let short = long.trim_end_matches('x');
    let short = &short[..short.len() - 3];
    names.push(long[run.prefix.len() + 1..].to_owned());
    names.push(short[run.prefix.len() + 1..].to_owned());

    let ids: Vec<ConversationId> = names.iter().map(|n| run.id(n)).collect();
    assert!(ids.contains(&long_id));
    let mem = run.memory(20, Retention::DropEvicted);
    for id in &ids {
        mem.add(id, [Message::user(id.as_str()), Message::assistant(id.as_str())])
            .await
            .expect("add");
    }
    for id in &ids {
        let got = texts(&mem.get(id).await.expect("get"));
        assert_eq!(
            got,
            vec![id.to_string(), id.to_string()],
            "{id:?} sees only its own messages"
        );
        assert_eq!(stored_texts(&run.history(id, 0, 100).await), got);
        assert_eq!(run.load(id).await.version, 1);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(run.list_range("ids/", 5).await, sorted, "list order is byte order");
    // Clearing one never touches a look-alike.
    assert!(mem.clear(&run.id("ids/a*")).await.expect("clear"));
    assert!(mem.clear(&run.id("ids/x%")).await.expect("clear"));
    for other in ["ids/ab", "ids/a", "ids/xy", "ids/x", "ids/_"] {
        assert_eq!(mem.get(&run.id(other)).await.expect("get").len(), 2, "{other}");
    }
    assert_eq!(run.list_range("ids/", 100).await.len(), ids.len() - 2);
}

async fn ttl(run: &Run) {
    let second = Some(Duration::from_secs(1));
    // Expires.
    let expiring = run.id("ttl/expiring");
    run.commit(
        &expiring,
        commit_full(0, 1, None, turns(1, 2), 1, Retention::KeepHistory, second),
    )
    .await;
    // Expiry refreshed to "never" by a later commit.
    let kept = run.id("ttl/kept");
    run.commit(
        &kept,
        commit_full(0, 1, None, turns(1, 2), 1, Retention::KeepHistory, second),
    )
    .await;
    run.commit(&kept, commit(1, turns(3, 1), 1, Retention::KeepHistory))
        .await;
    // Through ChatMemory's ttl.
    let via_memory = run.id("ttl/memory");
    let mem = ChatMemory::builder(run.store.clone())
        .ttl(Duration::from_secs(1))
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings");
    mem.add(&via_memory, [Message::user("short-lived")]).await.expect("add");

    assert_eq!(run.load(&expiring).await.version, 1, "readable before expiry");
    assert_eq!(run.history(&expiring, 0, 10).await.len(), 2);
    assert_eq!(mem.get(&via_memory).await.expect("get").len(), 1);
    assert_eq!(
        run.list_range("ttl/", 10).await,
        vec![expiring.clone(), kept.clone(), via_memory.clone()]
    );

    tokio::time::sleep(Duration::from_millis(1600)).await;

    assert_eq!(
        run.load(&expiring).await,
        Snapshot::empty(),
        "an expired conversation loads empty"
    );
    assert!(
        run.history(&expiring, 0, 10).await.is_empty(),
        "no history after expiry"
    );
    assert!(mem.get(&via_memory).await.expect("get").is_empty());
    assert_eq!(
        run.list_range("ttl/", 10).await,
        vec![kept.clone()],
        "expired ids are not listed"
    );
    assert_eq!(run.load(&kept).await.version, 2, "ttl None cleared the expiry");
    run.store.purge_expired().await.expect("purge_expired");
    assert_eq!(run.load(&kept).await.version, 2, "purge keeps live conversations");

    // The expired id starts afresh (expected version 0), without the old messages.
    let fresh = vec![sm(1, 1, Message::user("new life"))];
    assert_eq!(
        run.commit(&expiring, commit(0, fresh.clone(), 1, Retention::KeepHistory))
            .await,
        1
    );
    assert_eq!(run.load(&expiring).await.messages, fresh);
    assert_eq!(run.history(&expiring, 0, 10).await, fresh);
    assert!(!run.clear(&via_memory).await, "an expired conversation does not exist");
}

async fn concurrency_one_conversation(run: &Run) {
    let id = run.id("concurrent-one");
    let mem = run.memory(1000, Retention::KeepHistory);
    let tasks: Vec<_> = (0..16)
        .map(|writer| {
            let (mem, id) = (mem.clone(), id.clone());
            tokio::spawn(async move { crate::stress::write_turns(&mem, &id, writer, 20).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer task panicked");
    }
    let history = mem.history(&id).await.expect("history");
    crate::check_stress_history(&history, 16, 20);
    let stored = run.history(&id, 0, 1000).await;
    assert_eq!(seqs(&stored), (1..=640).collect::<Vec<_>>(), "sequences are dense");
}

async fn concurrency_many_conversations(run: &Run) {
    let mem = run.memory(6, Retention::KeepHistory);
    let tasks: Vec<_> = (0..64)
        .map(|writer| {
            let mem = mem.clone();
            let id = run.id(&format!("concurrent-many/{writer:02}"));
            tokio::spawn(async move {
                crate::stress::write_turns(&mem, &id, writer, 5).await;
                id
            })
        })
        .collect();
    let mut ids = BTreeSet::new();
    for t in tasks {
        ids.insert(t.await.expect("writer task panicked"));
    }
    for (writer, id) in ids.iter().enumerate() {
        let history = mem.history(id).await.expect("history");
        let expected: Vec<String> = (0..5)
            .flat_map(|t| texts(&crate::stress::turn_messages(writer, t)))
            .collect();
        assert_eq!(texts(&history), expected, "{id:?}");
        assert_eq!(mem.get(id).await.expect("get").len(), 6);
    }
    assert_eq!(run.list_range("concurrent-many/", 20).await.len(), 64);
}
