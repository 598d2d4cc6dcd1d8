//! Which token counter made each count, on a real Redis: layout 1 data (no counters) still
//! loads and takes commits after the upgrade to layout 2, counter names of any shape
//! round-trip, and the system message's counter follows the system message.

use crate::common;
use crate::common::{cleanup, meta_key, msgs_key, raw, store, unique_prefix, url};
use chatmem::store::{Commit, Snapshot, StoredMessage};
use chatmem::{ChatMemory, ConversationId, Heuristic, Message, Retention, Store};

/// The counter names of `messages`, in order.
fn counters(messages: &[StoredMessage]) -> Vec<Option<&str>> {
    messages.iter().map(|m| m.counted_by.as_deref()).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_layout_1_database_is_upgraded_and_keeps_its_data() {
    let url = url();
    let prefix = unique_prefix("layout-1");
    let mut conn = raw(&url).await;
    let (meta, msgs) = (meta_key(&prefix, "old"), msgs_key(&prefix, "old"));
    // What chatmem-redis with layout 1 wrote for one conversation.
    redis::pipe()
        .cmd("SET")
        .arg(format!("{prefix}:schema"))
        .arg(1)
        .cmd("HSET")
        .arg(&meta)
        .arg(&[
            ("id", "old"),
            ("version", "1"),
            ("window_start", "1"),
            ("next_seq", "4"),
            ("commit_token", "12345"),
            ("sys_seq", "1"),
            ("sys_tokens", "5"),
            ("sys_json", r#"{"role":"system","content":"s"}"#),
        ])
        .cmd("ZADD")
        .arg(&msgs)
        .arg(2)
        .arg(r#"2:6:{"role":"user","content":"u1"}"#)
        .arg(3)
        .arg(r#"3:6:{"role":"assistant","content":"a1"}"#)
        .cmd("ZADD")
        .arg(format!("{prefix}:ids"))
        .arg(0)
        .arg("old")
        .exec_async(&mut conn)
        .await
        .unwrap();

    let store = store(&url, &prefix).await;
    let schema: u64 = common::layout_version(&mut conn, &prefix).await;
    assert_eq!(
        schema,
        chatmem_redis::SCHEMA_VERSION,
        "connect upgrades the layout version"
    );
    assert_eq!(schema, 2);

    let id = ConversationId::new("old").unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!((snap.version, snap.window_start, snap.next_seq), (1, 1, 4));
    let system = snap.system.as_ref().expect("the system message is kept");
    assert_eq!((system.seq, system.tokens, system.counted_by.as_deref()), (1, 5, None));
    assert_eq!(
        snap.messages.iter().map(|m| (m.seq, m.tokens)).collect::<Vec<_>>(),
        [(2, 6), (3, 6)]
    );
    assert_eq!(
        counters(&snap.messages),
        [None, None],
        "layout 1 members have no counter"
    );
    assert_eq!(store.history(&id, 0, 10).await.unwrap(), snap.messages);

    // A memory with a token window writes on top of it; the old members stay as they were.
    let memory = ChatMemory::builder(store.clone())
        .policy(chatmem::WindowPolicy::tokens(4000))
        .counter(Heuristic)
        .build()
        .unwrap();
    memory
        .add(&id, [Message::user("u2"), Message::assistant("a2")])
        .await
        .unwrap();
    assert_eq!(memory.get(&id).await.unwrap().len(), 5);
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.version, 2);
    assert_eq!(
        counters(&snap.messages),
        [None, None, Some("heuristic"), Some("heuristic")]
    );
    assert_eq!(
        snap.system.and_then(|s| s.counted_by),
        None,
        "the system message was not replaced"
    );
    let members = common::members(&mut conn, &msgs).await;
    assert_eq!(members[0], r#"2:6:{"role":"user","content":"u1"}"#);
    assert!(
        members[2].starts_with("4:") && members[2].contains("@heuristic:{"),
        "{}",
        members[2]
    );
    assert_eq!(store.list(None, 10).await.unwrap().ids, [id]);

    // A second connect finds layout 2 and leaves it alone.
    drop(common::store(&url, &prefix).await);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn counter_names_of_any_shape_round_trip() {
    let url = url();
    let prefix = unique_prefix("counter-names");
    let store = store(&url, &prefix).await;
    for (i, name) in ["", "a:b", "100%", "%3A", "x@y:z", "@", "分词器", " spaced "]
        .into_iter()
        .enumerate()
    {
        let id = ConversationId::new(format!("c{i}")).unwrap();
        let c = Commit::on(&Snapshot::empty())
            .counted_by(name)
            .system(Message::system("s"), 2)
            .append(Message::user("u:1"), 3)
            .append(Message::assistant("a@1"), 4)
            .retention(Retention::KeepHistory)
            .build()
            .unwrap();
        store.commit(&id, c).await.unwrap();
        let snap = store.load(&id).await.unwrap();
        assert_eq!(
            snap.system.as_ref().and_then(|s| s.counted_by.as_deref()),
            Some(name),
            "system {name:?}"
        );
        assert_eq!(counters(&snap.messages), [Some(name); 2], "{name:?}");
        assert_eq!(snap.messages[1].tokens, 4);
        assert_eq!(*snap.messages[1].message, Message::assistant("a@1"));
        assert_eq!(store.history(&id, 0, 10).await.unwrap(), snap.messages, "{name:?}");
    }
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn the_system_counter_follows_the_system_message() {
    let url = url();
    let prefix = unique_prefix("system-counter");
    let store = store(&url, &prefix).await;
    let id = ConversationId::new("sys").unwrap();
    let system_counter = |snap: &Snapshot| snap.system.as_ref().and_then(|s| s.counted_by.clone());

    let snap = Snapshot::empty();
    let c = Commit::on(&snap).counted_by("x").system(Message::system("one"), 2);
    store.commit(&id, c.build().unwrap()).await.unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!(system_counter(&snap).as_deref(), Some("x"));

    // A commit that keeps the system message keeps its counter.
    let c = Commit::on(&snap).counted_by("y").append(Message::user("u"), 1);
    store.commit(&id, c.build().unwrap()).await.unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!(system_counter(&snap).as_deref(), Some("x"));
    assert_eq!(counters(&snap.messages), [Some("y")]);

    // A replacement without a counter does not inherit the old one.
    let c = Commit::on(&snap).system(Message::system("two"), 3);
    store.commit(&id, c.build().unwrap()).await.unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.system.as_ref().map(|s| s.tokens), Some(3));
    assert_eq!(system_counter(&snap), None);
    let mut conn = raw(&url).await;
    let meta = meta_key(&prefix, "sys");
    let kept: bool = redis::cmd("HEXISTS")
        .arg(&meta)
        .arg("sys_counted_by")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!kept, "sys_counted_by is removed with the system message it named");

    let c = Commit::on(&snap).counted_by("z").system(Message::system("three"), 4);
    store.commit(&id, c.build().unwrap()).await.unwrap();
    assert_eq!(system_counter(&store.load(&id).await.unwrap()).as_deref(), Some("z"));
    cleanup(&url, &prefix).await;
}
