//! ChatMemory over the in-memory store: the window contract's two examples, the after-sale
//! scenario, retention, isolation, concurrency and cached token counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chatmem::{
    ChatMemory, Cl100k, ConversationId, InMemoryStore, Message, Retention, Role, Store, TokenCounter, WindowPolicy,
};

const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
const TURN1: &str = "我的订单是 LC202610060018，还没发货。";
const TURN2: &str = "那单能退吗？";
const ORDER: &str = "LC202610060018";

fn id(s: &str) -> ConversationId {
    ConversationId::new(s).unwrap()
}

fn texts(ms: &[Message]) -> Vec<String> {
    ms.iter().map(|m| m.text().unwrap_or_default().into_owned()).collect()
}

fn memory(max: usize) -> ChatMemory {
    ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(max))
        .build()
        .expect("valid memory settings")
}

#[tokio::test]
async fn the_window_contracts_examples() {
    let m = memory(5);
    let c = id("example-1");
    let add = ["S_old", "U1", "A1", "U2", "A2", "U3", "A3", "S_new"].map(|t| match &t[..1] {
        "S" => Message::system(t),
        "U" => Message::user(t),
        _ => Message::assistant(t),
    });
    m.add(&c, add).await.unwrap();
    assert_eq!(texts(&m.get(&c).await.unwrap()), ["S_new", "U2", "A2", "U3", "A3"]);

    let m = memory(2);
    let c = id("example-2");
    let add = ["U1", "A1", "U2", "A2", "U3"].map(|t| {
        if t.starts_with('U') {
            Message::user(t)
        } else {
            Message::assistant(t)
        }
    });
    m.add(&c, add).await.unwrap();
    assert_eq!(texts(&m.get(&c).await.unwrap()), ["U3"]);
}

async fn after_sale(m: &ChatMemory, c: &ConversationId) {
    m.add(
        c,
        [
            Message::system(SYSTEM),
            Message::user(TURN1),
            Message::assistant("订单 LC202610060018 尚未发货。"),
        ],
    )
    .await
    .unwrap();
    m.add(
        c,
        [
            Message::system(SYSTEM),
            Message::user(TURN2),
            Message::assistant("LC202610060018 未发货，可以退。"),
        ],
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn after_sale_window_6_keeps_the_order_and_window_2_loses_it() {
    assert!(!SYSTEM.contains(ORDER));
    let m = memory(6);
    let c = id("app-user-42-aftersale");
    assert!(m.get(&c).await.unwrap().is_empty());
    after_sale(&m, &c).await;
    let window = m.get(&c).await.unwrap();
    assert_eq!(
        window.iter().map(|m| m.role()).collect::<Vec<_>>(),
        [Role::System, Role::User, Role::Assistant, Role::User, Role::Assistant]
    );
    assert_eq!(texts(&window)[0], SYSTEM);
    assert_eq!(texts(&window)[1], TURN1);
    assert_eq!(texts(&window)[3], TURN2);

    let small = memory(2);
    after_sale(&small, &c).await;
    let window = small.get(&c).await.unwrap();
    assert!(window[0].is_system(), "the system message is never evicted");
    assert!(!texts(&window).iter().any(|t| t == TURN1), "turn 1 is gone: {window:?}");
    // Restart: a new memory over a new in-memory store has nothing.
    assert!(memory(6).get(&c).await.unwrap().is_empty());
}

#[tokio::test]
async fn conversations_are_isolated() {
    let m = memory(6);
    let (a, b) = (id("app-user-42-aftersale"), id("app-user-43-aftersale"));
    m.add(&a, [Message::user(TURN1)]).await.unwrap();
    m.add(&b, [Message::user("我想问营业时间。")]).await.unwrap();
    m.add(&a, [Message::assistant("好的")]).await.unwrap();
    assert!(!texts(&m.get(&b).await.unwrap()).concat().contains(ORDER));
    assert!(m.clear(&a).await.unwrap());
    assert!(m.get(&a).await.unwrap().is_empty());
    assert_eq!(m.get(&b).await.unwrap().len(), 1);
}

#[tokio::test]
async fn retention_decides_what_history_keeps() {
    let c = id("h");
    for (retention, expected) in [(Retention::DropEvicted, 2), (Retention::KeepHistory, 10)] {
        let m = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(2))
            .retention(retention)
            .build()
            .expect("valid memory settings");
        for i in 0..5 {
            m.add(
                &c,
                [Message::user(format!("u{i}")), Message::assistant(format!("a{i}"))],
            )
            .await
            .unwrap();
        }
        assert_eq!(texts(&m.get(&c).await.unwrap()), ["u4", "a4"]);
        let history = m.history(&c).await.unwrap();
        assert_eq!(history.len(), expected, "{retention:?}");
        assert_eq!(texts(&history).last().unwrap(), "a4");
        let stored = m.store().history(&c, 0, 100).await.unwrap();
        assert!(stored.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}

/// A greeting written before the first user message is the conversation's opening: it stays
/// in the window (and so in a drop-evicted history) with the turn that follows it, whether it
/// comes alone, after the system message, or in one batch with the turn, until the budget
/// evicts it like any message.
#[tokio::test]
async fn a_greeting_before_the_first_question_is_kept() {
    let greeting = Message::assistant("您好，我是邻里仓售后，有什么可以帮您？");
    for (n, batches) in [
        vec![
            vec![greeting.clone()],
            vec![Message::user(TURN1), Message::assistant("收到。")],
        ],
        vec![
            vec![Message::system(SYSTEM)],
            vec![greeting.clone()],
            vec![Message::user(TURN1), Message::assistant("收到。")],
        ],
        vec![vec![
            Message::system(SYSTEM),
            greeting.clone(),
            Message::user(TURN1),
            Message::assistant("收到。"),
        ]],
    ]
    .into_iter()
    .enumerate()
    {
        let c = id(&format!("greeting-{n}"));
        let m = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(4))
            .retention(Retention::DropEvicted)
            .build()
            .expect("valid memory settings");
        let mut batches = batches.into_iter();
        let first = batches.next().unwrap_or_default();
        let opened_with_the_greeting = first.contains(&greeting) && first.len() <= 2;
        m.add(&c, first).await.unwrap();
        if opened_with_the_greeting {
            let window = m.get(&c).await.unwrap();
            assert_eq!(window.last(), Some(&greeting), "{n}: the greeting alone is the window");
            assert!(m.history(&c).await.unwrap().contains(&greeting), "{n}");
        }
        for batch in batches {
            m.add(&c, batch).await.unwrap();
        }
        let window = m.get(&c).await.unwrap();
        let roles: Vec<Role> = window.iter().filter(|m| !m.is_system()).map(Message::role).collect();
        assert_eq!(roles, [Role::Assistant, Role::User, Role::Assistant], "{n}: {window:?}");
        assert!(window.contains(&greeting), "{n}");
        // The next turn overflows the budget: the greeting goes with the first turn.
        m.add(&c, [Message::user(TURN2), Message::assistant("可以退。")])
            .await
            .unwrap();
        let window = m.get(&c).await.unwrap();
        assert!(!window.contains(&greeting), "{n}: {window:?}");
        assert_eq!(
            window.iter().find(|m| !m.is_system()).map(Message::role),
            Some(Role::User)
        );
    }
}

#[tokio::test]
async fn same_system_text_is_ignored_and_a_new_one_replaces_it() {
    let m = memory(20);
    let c = id("sys");
    m.add(&c, [Message::system("rules"), Message::user("u1")])
        .await
        .unwrap();
    let before = m.load(&c).await.unwrap().snapshot().version;
    m.add(&c, [Message::system("rules")]).await.unwrap();
    assert_eq!(
        m.load(&c).await.unwrap().snapshot().version,
        before,
        "an identical system message writes nothing"
    );
    m.add(&c, [Message::user("u2"), Message::system("new rules")])
        .await
        .unwrap();
    assert_eq!(texts(&m.get(&c).await.unwrap()), ["new rules", "u1", "u2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_turns_are_neither_lost_nor_interleaved() {
    let m = Arc::new(
        ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(10_000))
            .retention(Retention::KeepHistory)
            .build()
            .expect("valid memory settings"),
    );
    let c = id("busy");
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let (m, c) = (m.clone(), c.clone());
            tokio::spawn(async move {
                for turn in 0..25 {
                    m.add(
                        &c,
                        [
                            Message::user(format!("{t}/{turn}")),
                            Message::assistant(format!("{t}/{turn}")),
                        ],
                    )
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let history = m.history(&c).await.unwrap();
    assert_eq!(history.len(), 16 * 25 * 2);
    for pair in history.chunks(2) {
        assert_eq!(pair[0].role(), Role::User);
        assert_eq!(pair[0].text(), pair[1].text(), "a turn's messages are adjacent");
    }
}

/// Counts how often text is tokenized.
#[derive(Debug, Default)]
struct Counting(AtomicUsize);

impl TokenCounter for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn count_text(&self, text: &str) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed);
        Cl100k.count_text(text)
    }
}

#[tokio::test]
async fn a_turn_tokenizes_only_its_new_messages() {
    let counter = Arc::new(Counting::default());
    let m = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::tokens(4000))
        .counter(counter.clone())
        .build()
        .expect("valid memory settings");
    let c = id("tokens");
    let mut per_turn = Vec::new();
    for i in 0..200 {
        let before = counter.0.load(Ordering::Relaxed);
        m.get(&c).await.unwrap();
        m.add(&c, [Message::user(format!("question {i} about order {ORDER}"))])
            .await
            .unwrap();
        m.add(&c, [Message::assistant(format!("answer {i}"))]).await.unwrap();
        per_turn.push(counter.0.load(Ordering::Relaxed) - before);
    }
    // Two messages, each: role + content = 2 strings.
    assert!(per_turn.iter().all(|&n| n == 4), "{per_turn:?}");
    let window = m.load(&c).await.unwrap();
    assert!(window.tokens() <= 4000);
    assert_eq!(window.tokens() as usize, Cl100k.count_messages(&window.messages()));
}

#[tokio::test]
async fn ttl_expires_a_whole_conversation() {
    let m = ChatMemory::builder(InMemoryStore::new())
        .ttl(Duration::from_millis(50))
        .build()
        .expect("valid memory settings");
    let c = id("ttl");
    m.add(&c, [Message::user("u")]).await.unwrap();
    assert_eq!(m.get(&c).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(m.get(&c).await.unwrap().is_empty());
    assert!(m.list(None, 10).await.unwrap().ids.is_empty());
}

#[tokio::test]
async fn list_pages_with_a_cursor() {
    let m = memory(20);
    for i in 0..7 {
        m.add(&id(&format!("c{i}")), [Message::user("u")]).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = m.list(after.as_ref(), 3).await.unwrap();
        assert!(page.ids.len() <= 3);
        seen.extend(page.ids.iter().map(|i| i.to_string()));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
}

/// Yields inside `load`, so concurrent turns interleave between load and commit.
#[derive(Debug, Default)]
struct Yielding(InMemoryStore);

#[async_trait::async_trait]
impl Store for Yielding {
    async fn load(&self, id: &ConversationId) -> Result<chatmem::store::Snapshot, chatmem::store::StoreError> {
        let snapshot = self.0.load(id).await;
        tokio::task::yield_now().await;
        snapshot
    }
    async fn commit(
        &self,
        id: &ConversationId,
        commit: chatmem::store::Commit,
    ) -> Result<u64, chatmem::store::StoreError> {
        self.0.commit(id, commit).await
    }
    async fn history(
        &self,
        id: &ConversationId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<chatmem::store::StoredMessage>, chatmem::store::StoreError> {
        self.0.history(id, after, limit).await
    }
    async fn clear(&self, id: &ConversationId) -> Result<bool, chatmem::store::StoreError> {
        self.0.clear(id).await
    }
    async fn list(
        &self,
        after: Option<&ConversationId>,
        limit: usize,
    ) -> Result<chatmem::Page, chatmem::store::StoreError> {
        self.0.list(after, limit).await
    }
    async fn recent(
        &self,
        query: &chatmem::store::RecentQuery,
    ) -> Result<chatmem::store::RecentPage, chatmem::store::StoreError> {
        self.0.recent(query).await
    }
}

#[test]
fn conflict_retries_need_no_tokio_timer() {
    // A runtime without timers: retrying after a lost version check must not panic.
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let m = Arc::new(
            ChatMemory::builder(Yielding::default())
                .policy(WindowPolicy::messages(1000))
                .retention(Retention::KeepHistory)
                .build()
                .expect("valid memory settings"),
        );
        let c = id("no-timer");
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let (m, c) = (m.clone(), c.clone());
                tokio::spawn(async move {
                    for turn in 0..5 {
                        m.add(&c, [Message::user(format!("{t}/{turn}")), Message::assistant("ok")])
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(m.history(&c).await.unwrap().len(), 8 * 5 * 2);
    });
}

#[tokio::test]
async fn an_enormous_ttl_does_not_overflow() {
    let m = ChatMemory::builder(InMemoryStore::new())
        .ttl(Duration::MAX)
        .build()
        .expect("valid memory settings");
    let c = id("forever");
    m.add(&c, [Message::user("u")]).await.unwrap();
    assert_eq!(m.get(&c).await.unwrap().len(), 1);
}

#[tokio::test]
async fn into_messages_equals_messages() {
    let m = memory(4);
    let c = id("into");
    m.add(
        &c,
        [
            Message::system("s"),
            Message::user("u1"),
            Message::assistant("a1"),
            Message::user("u2"),
        ],
    )
    .await
    .unwrap();
    let w = m.load(&c).await.unwrap();
    assert_eq!(w.messages(), w.clone().into_messages());
    assert_eq!(texts(&w.into_messages()), ["s", "u1", "a1", "u2"]);
}

#[tokio::test]
async fn a_batch_over_the_limit_writes_nothing_and_says_how_to_import() {
    let memory = ChatMemory::builder(InMemoryStore::new())
        .max_batch(100, 1_000)
        .retention(chatmem::Retention::KeepHistory)
        .build()
        .expect("valid memory settings");
    let id = ConversationId::new("big").unwrap();
    memory.add(&id, [Message::user("first")]).await.unwrap();
    let many: Vec<Message> = (0..101).map(|i| Message::user(format!("m{i}"))).collect();
    let e = memory.add(&id, many).await.expect_err("101 messages");
    assert!(matches!(e, chatmem::Error::BatchTooLarge { messages: 101, .. }), "{e}");
    assert!(e.to_string().contains("several batches"), "{e}");
    let e = memory
        .add(&id, [Message::user("x".repeat(1_001))])
        .await
        .expect_err("too many bytes");
    assert!(matches!(e, chatmem::Error::BatchTooLarge { bytes: 1_001, .. }), "{e}");
    assert_eq!(
        memory.history(&id).await.unwrap().len(),
        1,
        "nothing of either batch stored"
    );
    assert!(
        ChatMemory::builder(InMemoryStore::new())
            .max_batch(0, 1)
            .build()
            .is_err()
    );
}

#[tokio::test]
async fn with_store_and_with_policy_keep_every_other_setting() {
    let configured = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(2))
        .retention(Retention::KeepHistory)
        .max_batch(3, 1_000)
        .build()
        .expect("valid memory settings");
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let moved = configured.with_store(store.clone());
    let c = id("moved");
    moved
        .add(&c, [Message::user("u1"), Message::assistant("a1"), Message::user("u2")])
        .await
        .unwrap();
    assert_eq!(
        texts(&moved.get(&c).await.unwrap()),
        ["u2"],
        "the policy of 2 came along"
    );
    assert_eq!(moved.history(&c).await.unwrap().len(), 3, "KeepHistory came along");
    let four = (0..4).map(|i| Message::user(format!("m{i}")));
    assert!(
        matches!(moved.add(&c, four).await, Err(chatmem::Error::BatchTooLarge { .. })),
        "max_batch came along"
    );
    assert!(store.load(&c).await.unwrap().exists(), "it writes to the new store");

    let wide = moved.clone().with_policy(
        WindowPolicy::try_messages(3).unwrap(),
        chatmem::Tokenizer::Heuristic.counter(),
    );
    assert_eq!(wide.counter().name(), chatmem::Tokenizer::Heuristic.counter().name());
    wide.add(&c, [Message::assistant("a2")]).await.unwrap();
    assert_eq!(texts(&wide.get(&c).await.unwrap()), ["u2", "a2"]);
    assert_eq!(wide.retention(), Retention::KeepHistory);
    assert_eq!(moved.policy(), &WindowPolicy::messages(2), "the original is unchanged");
}

#[tokio::test]
async fn a_checkpoint_commits_and_the_turn_goes_on_from_the_committed_window() {
    let m = memory(6);
    let c = id("checkpoint");
    let mut turn = m.begin(&c).await.unwrap();
    assert_eq!(
        turn.push_unstored(vec![Message::system(SYSTEM), Message::user(TURN1)]),
        0
    );
    turn.checkpoint().await.unwrap();
    assert!(turn.is_empty());
    // Stored before the answer, and the prompt is the committed window.
    assert_eq!(texts(&m.get(&c).await.unwrap()), [SYSTEM, TURN1]);
    assert_eq!(
        texts(&turn.prompt().into_iter().cloned().collect::<Vec<_>>()),
        [SYSTEM, TURN1]
    );
    turn.push(Message::assistant("已查到。"));
    assert_eq!(turn.commit().await.unwrap().version, Some(2));
    // A retry of the same request leaves out what memory holds.
    let mut turn = m.begin(&c).await.unwrap();
    assert_eq!(
        turn.push_unstored(vec![Message::user(TURN1)]),
        0,
        "u1 is not the end of memory"
    );
    let mut turn2 = m.begin(&c).await.unwrap();
    assert_eq!(
        turn2.push_unstored(vec![
            Message::user(TURN1),
            Message::assistant("已查到。"),
            Message::user(TURN2)
        ]),
        2
    );
    assert_eq!(texts(&turn2.messages().cloned().collect::<Vec<_>>()), [TURN2]);
    assert_eq!(turn.messages().count(), 1);
}

#[tokio::test]
async fn commit_window_answers_the_window_memory_now_holds() {
    let m = memory(3);
    let c = id("window-after");
    m.add(
        &c,
        [Message::system(SYSTEM), Message::user(TURN1), Message::assistant("ok")],
    )
    .await
    .unwrap();
    let mut turn = m.begin(&c).await.unwrap();
    turn.extend([Message::user(TURN2), Message::assistant("可以退。")]);
    let after = turn.commit_window().await.unwrap();
    assert_eq!(after.messages(), m.get(&c).await.unwrap());
    assert_eq!(texts(&after.messages()), [SYSTEM, TURN2, "可以退。"]);
}
