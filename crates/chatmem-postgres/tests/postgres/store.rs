//! PostgreSQL-specific behaviour: migrations, corrupt rows, schema versions, expiry reuse,
//! concurrent creation, many tasks at once, awkward ids.

use crate::common;

use std::time::Duration;

use chatmem::recall::SearchQuery;
use chatmem::store::{Commit, RecentConversation, Snapshot, StoreErrorKind, StoredMessage, now_micros};
use chatmem::{ConversationId, Heuristic, Message, Retention, Store, Summary};
use chatmem_postgres::PostgresStore;
use chatmem_test::sql_suite::store::{self as suite, sm};
use chatmem_test::{commit, commit_full};

fn id(name: &str) -> ConversationId {
    chatmem_test::unique_id(name)
}

/// The schema versions recorded in `schema`, in order.
async fn schema_versions(raw: &deadpool_postgres::tokio_postgres::Client, schema: &str) -> Vec<i32> {
    let rows = raw
        .query(
            &format!("SELECT version FROM \"{schema}\".chatmem_schema_version ORDER BY version"),
            &[],
        )
        .await
        .expect("read versions");
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn migrations_are_idempotent_under_concurrent_connects() {
    let url = common::pg_url();
    let schema = common::fresh_schema("migrate");
    let connects: Vec<_> = (0..6)
        .map(|_| {
            let (url, schema) = (url.clone(), schema.clone());
            tokio::spawn(async move { common::store_in(&url, &schema).await })
        })
        .collect();
    for c in connects {
        c.await.expect("connect task");
    }
    let raw = common::raw_client(&url).await;
    // Each migration once, whoever ran it.
    assert_eq!(
        schema_versions(&raw, &schema).await,
        (1..=chatmem_postgres::SCHEMA_VERSION).collect::<Vec<_>>()
    );
    // And once more, now that everything exists.
    common::store_in(&url, &schema).await;
    common::drop_schema(&url, &schema).await;
}

/// The migrations as shipped, in order: an older schema is made with these themselves.
const MIGRATIONS: [&str; 8] = [
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_commit_token.sql"),
    include_str!("../../migrations/0003_counted_by.sql"),
    include_str!("../../migrations/0004_summary.sql"),
    include_str!("../../migrations/0005_updated_at.sql"),
    include_str!("../../migrations/0006_recall.sql"),
    include_str!("../../migrations/0007_vectors.sql"),
    include_str!("../../migrations/0008_facts.sql"),
];

/// A schema as chatmem-postgres wrote it at schema version `version`, with one
/// conversation in it (two messages, a system message, version 3), inserted with the
/// columns version 1 had.
async fn schema_at_version(url: &str, schema: &str, conv: &ConversationId, version: i32) {
    let raw = common::raw_client(url).await;
    let upto = usize::try_from(version).expect("a positive version");
    raw.batch_execute(&format!(
        "CREATE SCHEMA \"{schema}\";
         SET search_path TO \"{schema}\";
         CREATE TABLE chatmem_schema_version (
             version    INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         );
         {}
         INSERT INTO chatmem_schema_version (version) SELECT generate_series(1, {version});",
        MIGRATIONS[..upto].concat()
    ))
    .await
    .expect("an older schema");
    raw.execute(
        "INSERT INTO chatmem_conversations
             (id, version, system_json, system_seq, system_tokens, window_start, next_seq, expires_at)
         VALUES ($1, 3, '{\"role\":\"system\",\"content\":\"be brief\"}', 1, 3, 1, 3, NULL)",
        &[&conv.as_str()],
    )
    .await
    .expect("an older conversation");
    raw.execute(
        "INSERT INTO chatmem_messages (conversation_id, seq, tokens, json) VALUES
             ($1, 1, 3, '{\"role\":\"user\",\"content\":\"u1\"}'),
             ($1, 2, 3, '{\"role\":\"assistant\",\"content\":\"a2\"}')",
        &[&conv.as_str()],
    )
    .await
    .expect("older messages");
}

#[test]
fn every_migration_is_listed_here() {
    assert_eq!(
        MIGRATIONS.len(),
        usize::try_from(chatmem_postgres::SCHEMA_VERSION).expect("a positive version")
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn older_schemas_migrate_and_keep_their_conversations() {
    let url = common::pg_url();
    assert_eq!(chatmem_postgres::SCHEMA_VERSION, 8);
    for old in 1..chatmem_postgres::SCHEMA_VERSION {
        let schema = common::fresh_schema(&format!("v{old}"));
        let conv = id(&format!("v{old}"));
        schema_at_version(&url, &schema, &conv, old).await;

        let store = common::store_in(&url, &schema).await;
        let raw = common::raw_client(&url).await;
        assert_eq!(
            schema_versions(&raw, &schema).await,
            (1..=chatmem_postgres::SCHEMA_VERSION).collect::<Vec<_>>(),
            "from version {old}"
        );

        // The old conversation reads as before, its counts without a counter.
        let snap = store.load(&conv).await.expect("load an older conversation");
        assert_eq!((snap.version, snap.window_start, snap.next_seq), (3, 1, 3));
        assert_eq!(snap.summary, None, "rows from before version 4 have no summary");
        assert_eq!(
            snap.system.as_ref().map(|s| (s.seq, s.tokens, s.counted_by.clone())),
            Some((1, 3, None))
        );
        let texts: Vec<_> = snap
            .messages
            .iter()
            .map(|m| m.message.text().unwrap_or_default())
            .collect();
        assert_eq!(texts, ["u1", "a2"]);
        assert!(
            snap.messages.iter().all(|m| m.counted_by.is_none()),
            "rows from before version 3 have no counter"
        );
        // Listed by recency with time 0: last written before the store recorded it.
        let listed = store
            .recent(&chatmem::store::RecentQuery::new(conv.as_str(), None, 10))
            .await
            .expect("recent");
        assert_eq!(
            listed.conversations,
            vec![RecentConversation {
                id: conv.clone(),
                updated_micros: 0,
                expires_micros: None
            }],
            "from version {old}"
        );
        let started = now_micros();
        // Nothing written before version 6 is indexed: the conversation searches as empty.
        let search = |terms: &[&str]| {
            let query = SearchQuery::new(terms.iter().map(|t| (*t).to_owned()).collect(), u64::MAX, 10);
            let (store, conv) = (&store, &conv);
            async move { store.search(conv, &query).await.expect("search") }
        };
        let found = search(&["u1"]).await;
        assert_eq!(
            (found.docs, found.total_len, found.df, found.hits.len()),
            (0, 0, vec![0], 0),
            "from version {old}"
        );

        // It takes commits, resent ones included; the new rows keep their counter and are
        // indexed.
        let next = Commit::on(&snap)
            .index(true)
            .counted_by("heuristic")
            .system(Message::system("be briefer"), 4)
            .append(Message::user("u3"), 3)
            .append(Message::assistant("a4"), 3)
            .retention(Retention::KeepHistory)
            .build()
            .expect("a valid commit");
        assert_eq!(store.commit(&conv, next.clone()).await.expect("commit"), 4);
        assert_eq!(
            store.commit(&conv, next.clone()).await.expect("the same commit again"),
            4
        );
        // The commit stamped it by the server's clock (on this machine: the test's, give or
        // take a little).
        let updated = store
            .recent(&chatmem::store::RecentQuery::new(conv.as_str(), None, 10))
            .await
            .expect("recent")
            .conversations[0]
            .updated_micros;
        assert!(
            (started - 60_000_000..=now_micros() + 60_000_000).contains(&updated),
            "{updated} from version {old}"
        );
        let snap = store.load(&conv).await.expect("load after the commit");
        assert_eq!(
            snap.system.as_ref().map(|s| (s.seq, s.counted_by.as_deref())),
            Some((3, Some("heuristic")))
        );
        let found = search(&["u3", "a4", "u1"]).await;
        assert_eq!((found.docs, found.total_len, found.df.clone()), (2, 2, vec![1, 1, 0]));
        let seqs: Vec<u64> = found.hits.iter().map(|h| h.message.seq).collect();
        assert_eq!(seqs, [4, 3], "from version {old}");
        assert!(
            (started - 60_000_000..=now_micros() + 60_000_000).contains(&found.hits[0].at_micros),
            "indexed at the commit's time"
        );
        let by: Vec<_> = snap.messages.iter().map(|m| m.counted_by.as_deref()).collect();
        assert_eq!(by, [None, None, Some("heuristic"), Some("heuristic")]);
        assert_eq!(store.history(&conv, 0, 10).await.expect("history"), snap.messages);
        let token: Option<i64> = raw
            .query_one(
                &format!("SELECT commit_token FROM \"{schema}\".chatmem_conversations WHERE id = $1"),
                &[&conv.as_str()],
            )
            .await
            .expect("read the token")
            .get(0);
        assert_eq!(
            token.map(|t| t as u64),
            Some(next.token()),
            "the commit's token, all 64 bits"
        );

        // Then it keeps a summary, in the new column as `Summary::to_json` wrote it, and
        // deletes only what the summary covers (1-2), not everything below the window (3).
        let summary = Summary::new("用户问了 u1，\"答\" a2", 2, &Heuristic);
        let next = Commit::on(&snap)
            .index(true)
            .keep_unsummarized()
            .summary(summary.clone(), snap.summary.as_ref().map_or(0, |s| s.upto))
            .append(Message::user("u5"), 3)
            .window_start(4)
            .retention(Retention::DropEvicted)
            .build()
            .expect("a valid commit");
        assert_eq!(next.delete_below(), Some(3));
        assert_eq!(store.commit(&conv, next.clone()).await.expect("commit a summary"), 5);
        assert_eq!(store.commit(&conv, next).await.expect("the same commit again"), 5);
        let snap = store.load(&conv).await.expect("load after the summary");
        assert_eq!(snap.summary.as_ref(), Some(&summary));
        let seqs = |v: &[StoredMessage]| v.iter().map(|m| m.seq).collect::<Vec<_>>();
        assert_eq!(seqs(&snap.messages), [4, 5]);
        assert_eq!(seqs(&store.history(&conv, 0, 10).await.expect("history")), [3, 4, 5]);
        let stored: Option<String> = raw
            .query_one(
                &format!("SELECT summary FROM \"{schema}\".chatmem_conversations WHERE id = $1"),
                &[&conv.as_str()],
            )
            .await
            .expect("read the summary")
            .get(0);
        assert_eq!(stored, Some(summary.to_json()), "one text value, the shared encoding");
        // Deleting the unindexed messages 1-2 left the index as it was, plus u5.
        let found = search(&["u3", "u5"]).await;
        assert_eq!(
            (found.docs, found.total_len, found.df),
            (3, 3, vec![1, 1]),
            "from version {old}"
        );

        // Facts, apart from the conversation: none before version 8, kept once committed.
        let user = chatmem::UserId::new(conv.as_str()).expect("a conversation id is a user id");
        assert_eq!(
            store.load_facts(&user).await.expect("load facts"),
            chatmem::store::StoredFacts::default()
        );
        let (added, _) =
            chatmem::facts::add(&Default::default(), "Prefers email", None, &Default::default(), 1).expect("add");
        let facts = chatmem::store::FactsCommit::new(&Default::default(), added)
            .expect("a valid facts commit")
            .expect("a change");
        assert_eq!(store.commit_facts(&user, facts).await.expect("commit facts"), 1);
        assert_eq!(store.load_facts(&user).await.expect("load facts").set.len(), 1);

        // Connecting again finds the schema current and changes nothing.
        common::store_in(&url, &schema).await;
        let snap = store.load(&conv).await.expect("load");
        assert_eq!((snap.version, snap.summary), (5, Some(summary)));
        common::drop_schema(&url, &schema).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn a_commit_without_a_counter_keeps_the_system_messages_counter() {
    let url = common::pg_url();
    let schema = common::fresh_schema("counter");
    let store = common::store_in(&url, &schema).await;
    let conv = id("counter");
    let first = Commit::on(&Snapshot::empty())
        .counted_by("cl100k_base")
        .system(Message::system("rules"), 2)
        .append(Message::user("u1"), 3)
        .build()
        .expect("a valid commit");
    assert_eq!(store.commit(&conv, first).await.expect("create"), 1);
    // No new system message: its counter stays with it, whatever this commit names.
    let snap = store.load(&conv).await.expect("load");
    let second = Commit::on(&snap)
        .counted_by("heuristic")
        .append(Message::assistant("a2"), 3)
        .build()
        .expect("a valid commit");
    assert_eq!(store.commit(&conv, second).await.expect("update"), 2);
    let snap = store.load(&conv).await.expect("load");
    assert_eq!(
        snap.system.as_ref().and_then(|s| s.counted_by.as_deref()),
        Some("cl100k_base")
    );
    // A new system message without a counter replaces the old one's.
    let third = Commit::on(&snap)
        .system(Message::system("new rules"), 3)
        .build()
        .expect("a valid commit");
    assert_eq!(store.commit(&conv, third).await.expect("new system"), 3);
    let snap = store.load(&conv).await.expect("load");
    assert_eq!(
        snap.system.as_ref().map(|s| (s.seq, s.counted_by.as_deref())),
        Some((3, None))
    );
    let by: Vec<_> = snap.messages.iter().map(|m| m.counted_by.as_deref()).collect();
    assert_eq!(by, [Some("cl100k_base"), Some("heuristic")]);
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn the_same_commit_sent_twice_is_stored_once() {
    let url = common::pg_url();
    let schema = common::fresh_schema("resend");
    let store = common::store_in(&url, &schema).await;
    let conv = id("resend");

    // Creating, then updating (with a system message, a TTL and eviction): each commit sent
    // twice answers with the same version the second time and writes nothing more.
    let create = commit(0, vec![sm(1, "u1"), sm(2, "a2")], 1, Retention::KeepHistory);
    assert_eq!(store.commit(&conv, create.clone()).await.expect("create"), 1);
    assert_eq!(store.commit(&conv, create.clone()).await.expect("create again"), 1);
    let update = commit_full(
        1,
        3,
        Some(sm(3, "rules")),
        vec![sm(3, "u3"), sm(4, "a4")],
        3,
        Retention::DropEvicted,
        Some(Duration::from_secs(3600)),
    );
    assert_eq!(store.commit(&conv, update.clone()).await.expect("update"), 2);
    assert_eq!(store.commit(&conv, update.clone()).await.expect("update again"), 2);
    let snap = store.load(&conv).await.expect("load");
    assert_eq!(snap.version, 2);
    let seqs: Vec<u64> = snap.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [3, 4]);
    assert_eq!(store.history(&conv, 0, 10).await.expect("history").len(), 2);

    // Another commit on the same version is still a conflict: the token is the commit's own.
    let other = commit(1, vec![sm(3, "x")], 1, Retention::KeepHistory);
    assert_ne!(other.token(), update.token());
    let err = store.commit(&conv, other).await.expect_err("a different commit");
    assert!(err.is_conflict(), "{err}");
    // Once a later commit has landed, the old one is a conflict too, not a success.
    let later = commit(2, vec![sm(5, "u5")], 3, Retention::DropEvicted);
    assert_eq!(store.commit(&conv, later).await.expect("later"), 3);
    let err = store.commit(&conv, update).await.expect_err("overtaken");
    assert!(err.is_conflict(), "{err}");
    let err = store.commit(&conv, create.clone()).await.expect_err("overtaken create");
    assert!(err.is_conflict(), "{err}");

    // After a clear the conversation is new again: the old create is a fresh commit.
    assert!(store.clear(&conv).await.expect("clear"));
    assert_eq!(store.commit(&conv, create).await.expect("create after clear"), 1);
    assert_eq!(store.history(&conv, 0, 10).await.expect("history").len(), 2);
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn newer_schema_is_refused() {
    let url = common::pg_url();
    let schema = common::fresh_schema("too_new");
    common::store_in(&url, &schema).await;
    let raw = common::raw_client(&url).await;
    raw.batch_execute(&format!(
        "INSERT INTO \"{schema}\".chatmem_schema_version (version) VALUES (999)"
    ))
    .await
    .expect("bump version");
    let err = PostgresStore::builder(&url)
        .schema(&schema)
        .connect()
        .await
        .expect_err("a newer schema must be refused");
    assert_eq!(err.kind(), StoreErrorKind::SchemaTooNew, "{err}");
    assert!(err.to_string().contains("999"), "{err}");
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn corrupt_rows_name_conversation_and_seq() {
    let url = common::pg_url();
    let schema = common::fresh_schema("corrupt");
    let store = common::store_in(&url, &schema).await;
    let good = id("good");
    let bad_json = id("bad-json");
    let bad_role = id("bad-role");
    suite::create_three_messages(&store, &[&good, &bad_json, &bad_role]).await;
    let raw = common::raw_client(&url).await;
    let table = format!("\"{schema}\".chatmem_messages");
    raw.execute(
        &format!("UPDATE {table} SET json = 'not json' WHERE conversation_id = $1 AND seq = 2"),
        &[&bad_json.as_str()],
    )
    .await
    .expect("corrupt json");
    raw.execute(
        &format!("UPDATE {table} SET json = '{{\"role\":\"robot\",\"content\":\"x\"}}' WHERE conversation_id = $1 AND seq = 3"),
        &[&bad_role.as_str()],
    )
    .await
    .expect("corrupt role");

    let corrupt = [(&bad_json, 2), (&bad_role, 3)];
    suite::assert_corrupt_messages(&store, &corrupt).await;
    // History's error names the seq too.
    for (conv, seq) in corrupt {
        let err = store.history(conv, 0, 10).await.expect_err("corrupt history");
        assert!(err.to_string().contains(&format!("seq {seq}")), "{err}");
    }
    let snap = store.load(&good).await.expect("others stay readable");
    assert_eq!(snap.messages.len(), 3);

    // A summary that is not a summary's JSON: the load fails naming the conversation,
    // history (which does not read the summary) still works.
    let bad_summary = id("bad-summary");
    store
        .commit(&bad_summary, commit(0, vec![sm(1, "u")], 1, Retention::KeepHistory))
        .await
        .expect("commit");
    raw.execute(
        &format!("UPDATE \"{schema}\".chatmem_conversations SET summary = '{{\"text\":1}}' WHERE id = $1"),
        &[&bad_summary.as_str()],
    )
    .await
    .expect("corrupt summary");
    let err = store.load(&bad_summary).await.expect_err("corrupt summary");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    assert!(
        err.to_string().contains(bad_summary.as_str()) && err.to_string().contains("summary"),
        "{err}"
    );
    assert_eq!(store.history(&bad_summary, 0, 10).await.expect("history").len(), 1);

    suite::assert_memory_sees_corruption(&store, &bad_role).await;
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn message_json_is_stored_exactly_as_serde_wrote_it() {
    let url = common::pg_url();
    let schema = common::fresh_schema("exact");
    let store = common::store_in(&url, &schema).await;
    let conv = id("exact");
    let m = Message::user("zeta \u{0} and 会话 \"quoted\"").with_name("b_name");
    let expected = serde_json::to_string(&m).expect("json");
    store
        .commit(
            &conv,
            commit(0, vec![StoredMessage::new(1, 9, m.clone())], 1, Retention::KeepHistory),
        )
        .await
        .expect("commit");
    let raw = common::raw_client(&url).await;
    let row = raw
        .query_one(
            &format!("SELECT json, tokens FROM \"{schema}\".chatmem_messages WHERE conversation_id = $1"),
            &[&conv.as_str()],
        )
        .await
        .expect("row");
    assert_eq!(row.get::<_, String>(0), expected);
    assert_eq!(row.get::<_, i64>(1), 9);
    assert_eq!(store.load(&conv).await.expect("load").messages[0].message, m.into());
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn expired_conversation_restarts_without_purge() {
    let url = common::pg_url();
    let schema = common::fresh_schema("revive");
    let store = common::store_in(&url, &schema).await;
    let conv = id("revive");
    // Counted by a counter the fresh start does not name: none of it may linger.
    let old = (1..=5)
        .fold(
            Commit::on(&Snapshot::empty())
                .counted_by("old-counter")
                .system(Message::system("old rules"), 3),
            |b, s| b.append(sm(s, &format!("old {s}")).message, 3),
        )
        .summary(Summary::new("old summary", 1, &Heuristic), 0)
        .window_start(2)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_millis(50)))
        .build()
        .expect("a valid commit");
    store.commit(&conv, old).await.expect("commit");
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(store.load(&conv).await.expect("load"), Snapshot::empty());
    assert_eq!(
        store
            .commit(&conv, commit(3, vec![sm(6, "late")], 2, Retention::KeepHistory))
            .await
            .map_err(|e| e.kind()),
        Err(StoreErrorKind::Conflict),
        "an expired conversation has version 0"
    );
    // Started afresh without a purge: seqs 1-2 overwrite old rows, 3-5 must disappear.
    let fresh = vec![sm(1, "new 1"), sm(2, "new 2")];
    let rules = StoredMessage::new(1, 2, Message::system("new rules"));
    assert_eq!(
        store
            .commit(
                &conv,
                commit_full(
                    0,
                    1,
                    Some(rules.clone()),
                    fresh.clone(),
                    1,
                    Retention::KeepHistory,
                    None
                )
            )
            .await
            .expect("revive"),
        1
    );
    let snap = store.load(&conv).await.expect("load");
    assert_eq!((snap.version, snap.window_start, snap.next_seq), (1, 1, 3));
    assert_eq!(snap.system, Some(rules), "the old system message's counter is gone too");
    assert_eq!(snap.summary, None, "and so is the old summary");
    assert_eq!(snap.messages, fresh);
    assert_eq!(store.history(&conv, 0, 100).await.expect("history"), fresh);
    assert_eq!(
        store.purge_expired().await.expect("purge"),
        0,
        "the revived conversation is live"
    );
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn purge_deletes_expired_rows_and_their_messages() {
    let url = common::pg_url();
    let schema = common::fresh_schema("purge");
    let store = common::store_in(&url, &schema).await;
    for i in 0..3 {
        let ttl = if i == 0 { None } else { Some(Duration::from_millis(10)) };
        store
            .commit(
                &id(&format!("p{i}")),
                commit_full(0, 1, None, vec![sm(1, "x")], 1, Retention::KeepHistory, ttl),
            )
            .await
            .expect("commit");
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.purge_expired().await.expect("purge"), 2);
    assert_eq!(store.purge_expired().await.expect("purge"), 0);
    let raw = common::raw_client(&url).await;
    let count: i64 = raw
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".chatmem_messages"), &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 1, "messages of purged conversations are gone");
    common::drop_schema(&url, &schema).await;
}

/// A TTL PostgreSQL's timestamps could not hold means "never expires"; a long one that fits
/// is stored as it is, not capped.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn ttls_too_long_to_store_never_expire() {
    let url = common::pg_url();
    let schema = common::fresh_schema("long_ttl");
    let store = common::store_in(&url, &schema).await;
    let years = |n: u64| Duration::from_secs(n * 365 * 24 * 3600);
    let (forever, long) = (id("forever"), id("long"));
    for (conv, ttl) in [(&forever, Duration::MAX), (&long, years(2_000))] {
        store
            .commit(
                conv,
                commit_full(0, 1, None, vec![sm(1, "x")], 1, Retention::KeepHistory, Some(ttl)),
            )
            .await
            .unwrap_or_else(|e| panic!("commit with a TTL of {ttl:?}: {e}"));
        assert!(store.load(conv).await.expect("load").exists());
    }
    let raw = common::raw_client(&url).await;
    let row = raw
        .query_one(
            &format!(
                "SELECT expires_at IS NULL
                 FROM \"{schema}\".chatmem_conversations WHERE id = $1"
            ),
            &[&forever.as_str()],
        )
        .await
        .expect("row");
    assert_eq!(row.get::<_, Option<bool>>(0), Some(true), "Duration::MAX never expires");
    let row = raw
        .query_one(
            &format!(
                "SELECT expires_at > now() + INTERVAL '1990 years'
                 FROM \"{schema}\".chatmem_conversations WHERE id = $1"
            ),
            &[&long.as_str()],
        )
        .await
        .expect("row");
    assert_eq!(row.get::<_, Option<bool>>(0), Some(true), "2,000 years are kept whole");
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn drop_evicted_never_stores_messages_below_the_window() {
    let url = common::pg_url();
    let schema = common::fresh_schema("evict");
    let store = common::store_in(&url, &schema).await;
    let conv = id("evict");
    // One batch of 10 whose window starts inside it.
    let batch: Vec<_> = (1..=10).map(|s| sm(s, &format!("m{s}"))).collect();
    store
        .commit(&conv, commit(0, batch, 7, Retention::DropEvicted))
        .await
        .expect("commit");
    let seqs = |v: &[StoredMessage]| v.iter().map(|m| m.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(&store.history(&conv, 0, 100).await.expect("history")),
        vec![7, 8, 9, 10]
    );
    let more: Vec<_> = (11..=14).map(|s| sm(s, &format!("m{s}"))).collect();
    store
        .commit(&conv, commit(1, more, 13, Retention::DropEvicted))
        .await
        .expect("commit");
    assert_eq!(
        seqs(&store.history(&conv, 0, 100).await.expect("history")),
        vec![13, 14]
    );
    let snap = store.load(&conv).await.expect("load");
    assert_eq!((snap.window_start, snap.next_seq), (13, 15));
    common::drop_schema(&url, &schema).await;
}

/// The delete bound can lie below the window start (messages wait for a summary): one
/// statement then keeps, and inserts, the uncovered messages below the window, on the
/// create path and the update path alike.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn uncovered_messages_below_the_window_wait_for_a_summary() {
    let url = common::pg_url();
    let schema = common::fresh_schema("pending");
    let store = common::store_in(&url, &schema).await;
    let seqs = |v: &[StoredMessage]| v.iter().map(|m| m.seq).collect::<Vec<_>>();
    let batch = |from: u64, to: u64, b: chatmem::store::CommitBuilder| {
        (from..=to).fold(b, |b, s| b.append(sm(s, &format!("m{s}")).message, 3))
    };

    // Created with a window from 7 and no summary: all ten stay.
    let conv = id("pending");
    let create = batch(1, 10, Commit::on(&Snapshot::empty()).keep_unsummarized())
        .window_start(7)
        .build()
        .expect("a valid commit");
    assert_eq!(create.delete_below(), Some(1));
    store.commit(&conv, create).await.expect("create");
    let snap = store.load(&conv).await.expect("load");
    assert_eq!((seqs(&snap.messages), snap.summary.clone()), (vec![7, 8, 9, 10], None));
    assert_eq!(
        seqs(&store.history(&conv, 0, 100).await.expect("history")),
        (1..=10).collect::<Vec<_>>()
    );

    // A summary up to 4 with the window moving to 13: 1-4 go, 5-12 wait, 11-12 are
    // inserted below the window.
    let s4 = Summary::new("m1-m4", 4, &Heuristic);
    let next = batch(
        11,
        14,
        Commit::on(&snap)
            .keep_unsummarized()
            .summary(s4.clone(), snap.summary.as_ref().map_or(0, |s| s.upto)),
    )
    .window_start(13)
    .build()
    .expect("a valid commit");
    assert_eq!(next.delete_below(), Some(5));
    store.commit(&conv, next).await.expect("commit");
    let snap = store.load(&conv).await.expect("load");
    assert_eq!((seqs(&snap.messages), snap.summary.as_ref()), (vec![13, 14], Some(&s4)));
    assert_eq!(
        seqs(&store.history(&conv, 0, 100).await.expect("history")),
        (5..=14).collect::<Vec<_>>()
    );

    // The summary catches up to the window: everything below it goes.
    let s12 = Summary::new("m1-m12", 12, &Heuristic);
    let next = batch(
        15,
        15,
        Commit::on(&snap)
            .keep_unsummarized()
            .summary(s12.clone(), snap.summary.as_ref().map_or(0, |s| s.upto)),
    )
    .build()
    .expect("a valid commit");
    assert_eq!(next.delete_below(), Some(13));
    store.commit(&conv, next).await.expect("commit");
    assert_eq!(
        seqs(&store.history(&conv, 0, 100).await.expect("history")),
        vec![13, 14, 15]
    );
    assert_eq!(store.load(&conv).await.expect("load").summary, Some(s12));

    // Created with a summary that covers part of the batch: only the covered part is
    // never stored.
    let conv = id("pending-create");
    let s3 = Summary::new("m1-m3", 3, &Heuristic);
    let create = batch(
        1,
        10,
        Commit::on(&Snapshot::empty())
            .keep_unsummarized()
            .summary(s3.clone(), 0),
    )
    .window_start(7)
    .build()
    .expect("a valid commit");
    assert_eq!(create.delete_below(), Some(4));
    store.commit(&conv, create).await.expect("create");
    assert_eq!(
        seqs(&store.history(&conv, 0, 100).await.expect("history")),
        (4..=10).collect::<Vec<_>>()
    );
    assert_eq!(store.load(&conv).await.expect("load").summary, Some(s3));
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn concurrent_creators_one_wins() {
    suite::concurrent_creators_one_wins::<common::Pg>().await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn awkward_and_long_ids() {
    let url = common::pg_url();
    let schema = common::fresh_schema("ids");
    let store = common::store_in(&url, &schema).await;
    let mut names: Vec<String> = [
        "it's",
        "\"dq\"",
        "100%",
        "%",
        "_",
        "*",
        "a:b",
        "{",
        "}",
        "{x}",
        "'; DROP TABLE chatmem_messages; --",
        "$1",
        "\\",
        "会话",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    names.push("é".repeat(128));
    names.push("x".repeat(256));
    let ids: Vec<ConversationId> = names
        .iter()
        .map(|n| ConversationId::new(n.as_str()).expect("valid"))
        .collect();
    for (i, conv) in ids.iter().enumerate() {
        store
            .commit(
                conv,
                commit(0, vec![sm(1, &format!("n{i}"))], 1, Retention::KeepHistory),
            )
            .await
            .unwrap_or_else(|e| panic!("commit {conv:?}: {e}"));
    }
    for (i, conv) in ids.iter().enumerate() {
        let snap = store.load(conv).await.expect("load");
        assert_eq!(
            snap.messages[0].message.text().unwrap_or_default(),
            format!("n{i}"),
            "{conv:?}"
        );
    }
    let mut sorted = ids.clone();
    sorted.sort();
    let page = store.list(None, 1000).await.expect("list");
    assert_eq!(page.ids, sorted, "byte order, every id");
    assert_eq!(page.next, None);
    let first = store.list(None, 3).await.expect("list");
    assert_eq!(first.ids, sorted[..3].to_vec());
    assert_eq!(first.next.as_ref(), Some(&sorted[2]));
    for conv in &ids {
        assert!(store.clear(conv).await.expect("clear"), "{conv:?}");
    }
    assert!(store.list(None, 10).await.expect("list").ids.is_empty());
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_schema_names_are_rejected_before_connecting() {
    let err = PostgresStore::builder("postgres://postgres@127.0.0.1:1/test")
        .schema("x\"; DROP SCHEMA public; --")
        .connect()
        .await
        .expect_err("bad schema");
    assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
    let err = PostgresStore::connect("postgres://u:pw@host:notaport/db")
        .await
        .expect_err("bad url");
    assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
    assert!(!err.to_string().contains("pw"), "{err}");
}

/// Whether schema `schema` exists on the server.
async fn schema_exists(url: &str, schema: &str) -> bool {
    let raw = common::raw_client(url).await;
    let rows = raw
        .query("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .await
        .expect("read the catalog");
    !rows.is_empty()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn without_migrations_connect_writes_nothing_and_needs_the_current_schema() {
    let url = common::pg_url();
    let without = |schema: &str| PostgresStore::builder(&url).schema(schema).migrate(false).connect();

    // Nothing there: refused, and nothing created.
    let schema = common::fresh_schema("no_migrate");
    let e = without(&schema).await.expect_err("no tables");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string().contains(&schema) && e.to_string().contains("no chatmem tables"),
        "{e}"
    );
    assert!(!schema_exists(&url, &schema).await, "the schema was created");

    // An older schema is not upgraded.
    let conv = id("old");
    schema_at_version(&url, &schema, &conv, 3).await;
    let e = without(&schema).await.expect_err("an older schema");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("version 3"), "{e}");
    let raw = common::raw_client(&url).await;
    let max: i32 = raw
        .query_one(
            &format!("SELECT max(version) FROM \"{schema}\".chatmem_schema_version"),
            &[],
        )
        .await
        .expect("read versions")
        .get(0);
    assert_eq!(max, 3, "not upgraded");

    // The current schema reads.
    common::store_in(&url, &schema).await;
    let store = without(&schema).await.expect("the current schema");
    assert_eq!(store.load(&conv).await.expect("load").version, 3);
    common::drop_schema(&url, &schema).await;
}
