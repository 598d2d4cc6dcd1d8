//! MySQL-specific behaviour: migrations, corrupt rows, schema versions, expiry reuse,
//! concurrent creation, hostile and long ids, 4-byte characters, exact JSON.

use crate::common;

use std::time::Duration;

use chatmem::store::{StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_mysql::MysqlStore;
use chatmem_test::sql_suite::store::{self as suite, sm};
use chatmem_test::{commit, commit_full};
use mysql_async::prelude::Queryable;

fn id(name: &str) -> ConversationId {
    chatmem_test::unique_id(name)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn migrations_are_idempotent_under_concurrent_connects() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("migrate");
    let connects: Vec<_> = (0..4)
        .map(|_| {
            let (url, prefix) = (url.clone(), prefix.clone());
            tokio::spawn(async move { common::store_in(&url, &prefix).await })
        })
        .collect();
    let mut stores = Vec::new();
    for c in connects {
        stores.push(c.await.expect("connect task"));
    }
    let conv = id("migrate");
    assert_eq!(
        stores[0]
            .commit(&conv, commit(0, vec![sm(1, "u")], 1, Retention::KeepHistory))
            .await
            .expect("commit"),
        1
    );
    // Connecting again runs no DDL and keeps the data.
    let again = common::store_in(&url, &prefix).await;
    assert_eq!(again.load(&conv).await.expect("load").version, 1);
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn newer_schema_is_refused() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("too_new");
    common::store_in(&url, &prefix).await;
    let mut raw = common::raw_conn(&url).await;
    raw.query_drop(format!("INSERT INTO `{prefix}_schema_version` (version) VALUES (999)"))
        .await
        .expect("bump version");
    for migrate in [true, false] {
        let err = MysqlStore::builder(&url)
            .prefix(&prefix)
            .migrate(migrate)
            .connect()
            .await
            .expect_err("a newer schema must be refused");
        assert_eq!(err.kind(), StoreErrorKind::SchemaTooNew, "{err}");
        assert!(err.to_string().contains("999"), "{err}");
    }
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn without_migrations_connect_writes_nothing_and_needs_the_current_schema() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("no_migrate");
    let e = MysqlStore::builder(&url)
        .prefix(&prefix)
        .migrate(false)
        .connect()
        .await
        .expect_err("no tables");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string().contains(&prefix) && e.to_string().contains("no chatmem tables"),
        "{e}"
    );
    let mut raw = common::raw_conn(&url).await;
    let tables: Option<i64> = raw
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?",
            (format!("{prefix}%"),),
        )
        .await
        .expect("catalog");
    assert_eq!(tables, Some(0), "tables were created");

    common::store_in(&url, &prefix).await;
    let store = MysqlStore::builder(&url)
        .prefix(&prefix)
        .migrate(false)
        .connect()
        .await
        .expect("current schema");
    assert!(!store.load(&id("none")).await.expect("load").exists());
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn corrupt_rows_name_conversation_and_seq() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("corrupt");
    let store = common::store_in(&url, &prefix).await;
    let (good, bad_json, bad_role, bad_summary) = (id("good"), id("bad-json"), id("bad-role"), id("bad-summary"));
    suite::create_three_messages(&store, &[&good, &bad_json, &bad_role, &bad_summary]).await;
    let mut raw = common::raw_conn(&url).await;
    let msgs = format!("`{prefix}_messages`");
    raw.exec_drop(
        format!("UPDATE {msgs} SET json = 'not json' WHERE conversation_id = ? AND seq = 2"),
        (bad_json.as_str(),),
    )
    .await
    .expect("corrupt json");
    raw.exec_drop(
        format!(
            "UPDATE {msgs} SET json = '{{\"role\":\"robot\",\"content\":\"x\"}}' WHERE conversation_id = ? AND seq = 3"
        ),
        (bad_role.as_str(),),
    )
    .await
    .expect("corrupt role");
    raw.exec_drop(
        format!("UPDATE `{prefix}_conversations` SET summary = '{{\"text\":1}}' WHERE id = ?"),
        (bad_summary.as_str(),),
    )
    .await
    .expect("corrupt summary");

    suite::assert_corrupt_messages(&store, &[(&bad_json, 2), (&bad_role, 3)]).await;
    let err = store.load(&bad_summary).await.expect_err("corrupt summary");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains(bad_summary.as_str()), "{err}");
    assert_eq!(store.load(&good).await.expect("others stay readable").messages.len(), 3);
    suite::assert_memory_sees_corruption(&store, &bad_role).await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn message_json_is_stored_exactly_as_serde_wrote_it() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("exact");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("exact");
    // NUL, a 4-byte emoji, CJK, quotes, a backslash, trailing spaces.
    let m = Message::user("zeta \u{0} 🦀🎉 会话 \"quoted\" back\\slash  ").with_name("b_name");
    let system = Message::system("规则 🦀");
    let expected = serde_json::to_string(&m).expect("json");
    let c = commit_full(
        0,
        1,
        Some(StoredMessage::new(1, 4, system.clone())),
        vec![StoredMessage::new(1, 9, m.clone())],
        1,
        Retention::KeepHistory,
        None,
    );
    store.commit(&conv, c).await.expect("commit");
    let mut raw = common::raw_conn(&url).await;
    let row: Option<(Vec<u8>, i64)> = raw
        .exec_first(
            format!("SELECT json, tokens FROM `{prefix}_messages` WHERE conversation_id = ?"),
            (conv.as_str(),),
        )
        .await
        .expect("row");
    let (json, tokens) = row.expect("a row");
    assert_eq!(String::from_utf8(json).expect("utf-8"), expected, "byte for byte");
    assert_eq!(tokens, 9);
    let snap = store.load(&conv).await.expect("load");
    assert_eq!(snap.messages[0].message, m.into());
    assert_eq!(snap.system.map(|s| s.message), Some(system.into()));
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn hostile_long_and_four_byte_ids() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("ids");
    let store = common::store_in(&url, &prefix).await;
    let mut names: Vec<String> = [
        "it's",
        "\"dq\"",
        "`bq`",
        "100%",
        "%",
        "_",
        "a:b",
        "?",
        "'; DROP TABLE chatmem_messages; --",
        "\\",
        "\\'",
        "会话",
        "🦀",
        // Under a PAD SPACE collation these would equal "a"; under a case-insensitive one, "A".
        "a",
        "a ",
        "a  ",
        "A",
        "\u{e4}",
        "a\u{308}",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    names.push("x".repeat(256));
    names.push("🦀".repeat(64)); // 256 bytes of 4-byte characters
    names.push("é".repeat(128));
    let ids: Vec<ConversationId> = names
        .iter()
        .map(|n| ConversationId::new(n.as_str()).expect("valid"))
        .collect();
    assert!(ids.iter().all(|i| i.as_str().len() <= 256));
    for (i, conv) in ids.iter().enumerate() {
        store
            .commit(
                conv,
                commit(0, vec![sm(1, &format!("n{i} 🦀"))], 1, Retention::KeepHistory),
            )
            .await
            .unwrap_or_else(|e| panic!("commit {conv:?}: {e}"));
    }
    for (i, conv) in ids.iter().enumerate() {
        let snap = store.load(conv).await.expect("load");
        assert_eq!(snap.version, 1, "{conv:?} is its own conversation");
        assert_eq!(
            snap.messages[0].message.text().unwrap_or_default(),
            format!("n{i} 🦀"),
            "{conv:?}"
        );
    }
    let mut sorted = ids.clone();
    sorted.sort();
    let page = store.list(None, 1000).await.expect("list");
    assert_eq!(page.ids, sorted, "byte order, every id, each exactly as written");
    let first = store.list(None, 3).await.expect("list");
    assert_eq!(first.ids, sorted[..3].to_vec());
    assert_eq!(first.next.as_ref(), Some(&sorted[2]));
    let rest = store.list(first.next.as_ref(), 1000).await.expect("list");
    assert_eq!(rest.ids, sorted[3..].to_vec());
    for conv in &ids {
        assert!(store.clear(conv).await.expect("clear"), "{conv:?}");
    }
    assert!(store.list(None, 10).await.expect("list").ids.is_empty());
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn concurrent_creators_one_wins() {
    suite::concurrent_creators_one_wins::<common::Mysql>().await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn expired_conversations_restart_and_purge() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("expiry");
    let store = common::store_in(&url, &prefix).await;
    let (revive, purge, forever) = (id("revive"), id("purge"), id("forever"));
    let short = Some(Duration::from_millis(300));
    for conv in [&revive, &purge] {
        let c = commit_full(
            0,
            1,
            None,
            vec![sm(1, "old 1"), sm(2, "old 2"), sm(3, "old 3")],
            1,
            Retention::KeepHistory,
            short,
        );
        store.commit(conv, c).await.expect("commit");
    }
    // A TTL too long for DATETIME never expires instead of failing.
    let c = commit_full(
        0,
        1,
        None,
        vec![sm(1, "f")],
        1,
        Retention::KeepHistory,
        Some(Duration::MAX),
    );
    store.commit(&forever, c).await.expect("a very long TTL");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !store.load(&revive).await.expect("load").exists(),
        "expired reads as absent"
    );
    assert!(store.history(&revive, 0, 10).await.expect("history").is_empty());
    // Starting it afresh leaves nothing of the old one.
    store
        .commit(&revive, commit(0, vec![sm(1, "new")], 1, Retention::KeepHistory))
        .await
        .expect("restart");
    let texts: Vec<String> = store
        .history(&revive, 0, 10)
        .await
        .expect("history")
        .iter()
        .map(|m| m.message.text().unwrap_or_default().into_owned())
        .collect();
    assert_eq!(texts, ["new"]);
    assert_eq!(store.purge_expired().await.expect("purge"), 1, "only the expired one");
    assert!(!store.clear(&purge).await.expect("clear"), "purged");
    assert!(store.load(&forever).await.expect("load").exists());
    let mut raw = common::raw_conn(&url).await;
    let left: Option<i64> = raw
        .exec_first(
            format!("SELECT COUNT(*) FROM `{prefix}_messages` WHERE conversation_id = ?"),
            (purge.as_str(),),
        )
        .await
        .expect("count");
    assert_eq!(left, Some(0), "its messages went with it");
    common::drop_prefix(&url, &prefix).await;
}

/// The largest batch a commit may carry (10,000 messages, 16 MiB of text) is one parameter
/// larger than MariaDB's default `max_allowed_packet`; it still lands whole.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn a_batch_at_the_commit_limit_lands_whole() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("big");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("big");
    let (n, bytes) = (chatmem::DEFAULT_MAX_BATCH_MESSAGES, chatmem::DEFAULT_MAX_BATCH_BYTES);
    let text = "x".repeat(bytes / n - 8);
    let n = n as u64;
    let batch: Vec<StoredMessage> = (1..=n).map(|seq| sm(seq, &format!("{seq:07} {text}"))).collect();
    let c = commit(0, batch, n - 19, Retention::KeepHistory);
    assert_eq!(store.commit(&conv, c).await.expect("the largest batch"), 1);
    assert_eq!(store.load(&conv).await.expect("load").messages.len(), 20);
    let all = store.history(&conv, 0, usize::MAX).await.expect("history");
    assert_eq!(all.len() as u64, n);
    assert_eq!(all[9_999].message.text().unwrap_or_default(), format!("{n:07} {text}"));
    common::drop_prefix(&url, &prefix).await;
}

/// A message too large for the server's `max_allowed_packet` once stored as JSON (3 MiB of
/// U+0001 is 21 MiB: each is `\\u0001` in the row's JSON text) is refused as too large before
/// anything is sent, not sent for the server to drop the connection (an outage whose outcome
/// is unknown); nothing is written and the store goes on.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn a_message_over_max_allowed_packet_is_refused_as_too_large() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("packet");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("packet");
    let control = "\u{1}".repeat(3 << 20);
    let err = store
        .commit(&conv, commit(0, vec![sm(1, &control)], 1, Retention::KeepHistory))
        .await
        .expect_err("over max_allowed_packet");
    assert_eq!(err.kind(), StoreErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("too large") && text.contains("max_allowed_packet") && !text.contains("unknown"),
        "{text}"
    );
    assert!(
        store.load(&conv).await.expect("load").messages.is_empty(),
        "nothing written"
    );
    assert_eq!(
        store
            .commit(&conv, commit(0, vec![sm(1, "small")], 1, Retention::KeepHistory))
            .await
            .expect("the store goes on"),
        1
    );
    common::drop_prefix(&url, &prefix).await;
}
