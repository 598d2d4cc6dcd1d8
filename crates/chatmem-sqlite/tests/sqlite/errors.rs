//! Bad data, newer schemas, locked files and unopenable paths give typed errors, never a
//! panic or a hang.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::store::{RecentConversation, StoreErrorKind, now_micros};
use chatmem::{ChatMemory, Heuristic, Message, Retention, Store};
use chatmem_sqlite::SqliteStore;

fn memory(store: SqliteStore) -> ChatMemory<SqliteStore> {
    ChatMemory::builder(store)
        .retention(Retention::KeepHistory)
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings")
}

fn turn(n: usize) -> [Message; 2] {
    [Message::user(format!("u{n}")), Message::assistant(format!("a{n}"))]
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_rows_name_conversation_and_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.db");
    let mem = memory(SqliteStore::open(&path).await.expect("open"));
    let bad = chatmem_test::unique_id("it's \"bad\"");
    let robot = chatmem_test::unique_id("robot");
    let bad_system = chatmem_test::unique_id("bad-system");
    let good = chatmem_test::unique_id("good");
    for id in [&bad, &robot, &bad_system, &good] {
        mem.add(id, [Message::system("rules")]).await.expect("add");
        for n in 0..2 {
            mem.add(id, turn(n)).await.expect("add");
        }
    }
    let raw = rusqlite::Connection::open(&path).expect("raw open");
    raw.execute(
        "UPDATE messages SET json = '{not json' WHERE conversation_id = ?1 AND seq = 2",
        [bad.as_str()],
    )
    .expect("corrupt");
    raw.execute(
        r#"UPDATE messages SET json = '{"role":"robot","content":"x"}' WHERE conversation_id = ?1 AND seq = 3"#,
        [robot.as_str()],
    )
    .expect("corrupt");
    raw.execute(
        "UPDATE conversations SET system_json = '[]' WHERE id = ?1",
        [bad_system.as_str()],
    )
    .expect("corrupt");

    let store = mem.store();
    for (id, seq) in [(&bad, 2), (&robot, 3)] {
        let e = store.load(id).await.expect_err("load of a corrupt row");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        assert_eq!(e.conversation(), Some(id), "names the conversation: {e}");
        assert!(
            e.to_string().contains(&format!("{id:?}")),
            "names the conversation: {e}"
        );
        assert!(e.to_string().contains(&format!("seq {seq}")), "names the seq: {e}");
        let e = store.history(id, 0, 100).await.expect_err("history of a corrupt row");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        assert!(e.to_string().contains(&format!("seq {seq}")), "{e}");
        // Rows before the bad one still read.
        assert_eq!(
            store.history(id, 0, seq as usize - 1).await.expect("history").len(),
            seq as usize - 1
        );
        let e = mem.get(id).await.expect_err("ChatMemory::get");
        assert_eq!(e.store_error().map(|s| s.kind()), Some(StoreErrorKind::Corrupt));
    }
    let e = store.load(&bad_system).await.expect_err("corrupt system message");
    assert_eq!(e.kind(), StoreErrorKind::Corrupt);
    assert!(e.to_string().contains("message seq 1 is not a valid message"), "{e}");
    assert!(e.to_string().contains(&format!("{bad_system:?}")), "{e}");

    // Others stay readable and writable.
    assert_eq!(mem.get(&good).await.expect("good conversation").len(), 5);
    mem.add(&good, turn(2)).await.expect("write beside corrupt rows");
    assert!(store.list(None, 10).await.expect("list").ids.contains(&good));
    // Clearing a corrupt conversation fixes it.
    assert!(mem.clear(&bad).await.expect("clear"));
    assert!(mem.get(&bad).await.expect("get").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("schema.db");
    let id = chatmem_test::unique_id("schema");
    {
        let mem = memory(SqliteStore::open(&path).await.expect("open"));
        mem.add(&id, turn(0)).await.expect("add");
    }
    // Opening again is idempotent and keeps the data.
    let mem = memory(SqliteStore::open(&path).await.expect("reopen"));
    assert_eq!(mem.get(&id).await.expect("get").len(), 2);
    drop(mem);
    let raw = rusqlite::Connection::open(&path).expect("raw open");
    let v: i64 = raw
        .query_row("SELECT version FROM chatmem_schema", [], |r| r.get(0))
        .expect("schema version");
    assert_eq!(v, chatmem_sqlite::SCHEMA_VERSION);
    raw.execute(
        "UPDATE chatmem_schema SET version = ?1",
        [chatmem_sqlite::SCHEMA_VERSION + 1],
    )
    .expect("bump");
    let e = SqliteStore::open(&path).await.expect_err("newer schema");
    assert_eq!(e.kind(), StoreErrorKind::SchemaTooNew, "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn not_a_database_and_unopenable_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 8192]).expect("write junk");
    let e = SqliteStore::open(&junk).await.expect_err("junk file");
    assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");

    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").expect("write");
    let e = SqliteStore::open(file.join("x.db"))
        .await
        .expect_err("parent is a file");
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");

    let e = SqliteStore::connect("postgres://user:secret@host/db")
        .await
        .expect_err("wrong scheme");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput);
    assert!(!e.to_string().contains("secret"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_file_times_out_then_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("locked.db");
    let store = SqliteStore::builder(&path)
        .timeout(Duration::from_millis(300))
        .open()
        .await
        .expect("open");
    let mem = memory(store.clone());
    let id = chatmem_test::unique_id("locked");
    mem.add(&id, turn(0)).await.expect("add");

    // Another "process" holds the write lock.
    let raw = rusqlite::Connection::open(&path).expect("raw open");
    raw.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    let started = Instant::now();
    let e = mem.add(&id, turn(1)).await.expect_err("commit while locked");
    let elapsed = started.elapsed();
    assert_eq!(
        e.store_error().map(|s| s.kind()),
        Some(StoreErrorKind::Unavailable),
        "{e}"
    );
    assert!(elapsed < Duration::from_secs(3), "gave up after {elapsed:?}");
    // Readers are not blocked by a writer in WAL mode.
    assert_eq!(mem.get(&id).await.expect("read while locked").len(), 2);
    // Opening the file anew while it is locked is a read, too (the schema is current): no
    // wait for the writer (it used to fail with "starting the schema check ... locked").
    let started = Instant::now();
    let reader = memory(
        SqliteStore::builder(&path)
            .timeout(Duration::from_millis(300))
            .open()
            .await
            .expect("open while another connection writes"),
    );
    assert_eq!(reader.get(&id).await.expect("read while locked").len(), 2);
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    raw.execute_batch("ROLLBACK").expect("release");
    mem.add(&id, turn(1)).await.expect("works again once released");
    assert_eq!(mem.get(&id).await.expect("get").len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn statement_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("count.db")).await.expect("open");
    let mem = memory(store.clone());
    let id = chatmem_test::unique_id("count");
    mem.add(&id, turn(0)).await.expect("add");
    let count = |before: u64| store.statements_executed() - before;

    let before = store.statements_executed();
    let mut window = mem.begin(&id).await.expect("load");
    assert_eq!(count(before), 1, "load = 1 statement");

    let before = store.statements_executed();
    window.extend(turn(1));
    window.commit().await.expect("commit");
    // BEGIN IMMEDIATE, SELECT version, 2 x INSERT, upsert, COMMIT.
    assert_eq!(
        count(before),
        6,
        "commit of a turn (KeepHistory) = 6 statements in 1 transaction"
    );

    let drop_mem = ChatMemory::builder(store.clone())
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings");
    let mut window = drop_mem.begin(&id).await.expect("load");
    let before = store.statements_executed();
    window.extend(turn(2));
    window.commit().await.expect("commit");
    assert_eq!(count(before), 7, "DropEvicted adds one DELETE");

    let before = store.statements_executed();
    store.history(&id, 0, 100).await.expect("history");
    assert_eq!(count(before), 1, "history = 1 statement");
    let before = store.statements_executed();
    store.list(None, 10).await.expect("list");
    assert_eq!(count(before), 1, "list = 1 statement");
    let before = store.statements_executed();
    store
        .recent(&chatmem::store::RecentQuery::new("", None, 10))
        .await
        .expect("recent");
    assert_eq!(count(before), 1, "recent = 1 statement");
    let before = store.statements_executed();
    store.purge_expired().await.expect("purge");
    assert_eq!(
        count(before),
        6,
        "purge = 1 transaction of 6 statements (2 for the recall index)"
    );
    let before = store.statements_executed();
    assert!(store.clear(&id).await.expect("clear"));
    assert_eq!(
        count(before),
        6,
        "clear = 1 transaction of 6 statements (2 for the recall index)"
    );

    // With recall on, a turn's commit writes each message's index entry in its row: the
    // same statements.
    let recalling = ChatMemory::builder(store.clone())
        .retention(Retention::KeepHistory)
        .counter(Arc::new(Heuristic))
        .recall(chatmem::Recall::new(3).expect("k"))
        .build()
        .expect("valid memory settings");
    let id = chatmem_test::unique_id("count-recall");
    recalling.add(&id, turn(0)).await.expect("add");
    let mut window = recalling.begin(&id).await.expect("load");
    let before = store.statements_executed();
    window.extend(turn(1));
    window.commit().await.expect("commit");
    assert_eq!(count(before), 6, "commit of a turn with recall = 6 statements");
    let query = chatmem::store::SearchQuery::new(vec!["u0".into(), "a1".into(), "absent".into()], 100, 10);
    let before = store.statements_executed();
    let found = store.search(&id, &query).await.expect("search");
    assert_eq!(found.hits.len(), 2);
    // BEGIN, the totals, the newest messages (all four), 2 hits, COMMIT.
    assert_eq!(count(before), 6, "search = 1 read transaction");
    // A commit that fills the newest messages' part of the index makes them a segment;
    // then a search reads each query term's rows in the segments with one statement.
    let mut window = recalling.begin(&id).await.expect("load");
    window.extend((0..130).map(|n| chatmem::Message::user(format!("filler {n}"))));
    window.commit().await.expect("commit");
    let before = store.statements_executed();
    let found = store.search(&id, &query).await.expect("search");
    assert_eq!(found.hits.len(), 2);
    // BEGIN, the totals, 3 terms' rows, 2 hits, COMMIT.
    assert_eq!(count(before), 8, "search = 1 read transaction");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_file_can_be_read_and_not_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ro.db");
    let id = chatmem_test::unique_id("ro");
    let writer = memory(SqliteStore::open(&path).await.expect("open"));
    writer.add(&id, turn(0)).await.expect("add");

    // Another connection holds the write lock meanwhile: a read-only open does not wait.
    let raw = rusqlite::Connection::open(&path).expect("raw open");
    raw.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    let url = format!("sqlite:{}?mode=ro", path.display());
    let store = SqliteStore::connect(&url).await.expect("open read-only");
    let reader = memory(store);
    assert_eq!(reader.get(&id).await.expect("read").len(), 2);
    assert_eq!(reader.history(&id).await.expect("history").len(), 2);
    raw.execute_batch("ROLLBACK").expect("release");

    let e = reader
        .add(&id, turn(1))
        .await
        .expect_err("a read-only store refuses writes");
    assert_eq!(
        e.store_error().map(|s| s.kind()),
        Some(StoreErrorKind::InvalidInput),
        "{e}"
    );
    let store_error = e.store_error().map(ToString::to_string).unwrap_or_default();
    assert!(store_error.contains("opened read-only"), "{store_error}");
    assert_eq!(writer.get(&id).await.expect("get").len(), 2, "nothing written");

    // A file without the schema is refused read-only, with a hint.
    let empty = dir.path().join("empty.db");
    rusqlite::Connection::open(&empty)
        .expect("create")
        .execute_batch("CREATE TABLE t (x)")
        .expect("table");
    let e = SqliteStore::connect(&format!("sqlite:{}?mode=ro", empty.display()))
        .await
        .expect_err("no schema");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
}

/// A database file at `path` as chatmem-sqlite wrote it at schema `version`: its version
/// table, then `tables` (the tables and rows of that version).
fn file_at_version(path: &std::path::Path, version: i64, tables: &str) {
    let raw = rusqlite::Connection::open(path).expect("create");
    raw.execute_batch(&format!(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE chatmem_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
         INSERT INTO chatmem_schema VALUES (1, {version});
         {tables}"
    ))
    .unwrap_or_else(|e| panic!("a version {version} file: {e}"));
}

/// The schema version the file at `path` records.
fn file_version(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .expect("raw")
        .query_row("SELECT version FROM chatmem_schema", [], |r| r.get(0))
        .expect("version")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_1_file_is_upgraded_and_keeps_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v1.db");
    // The schema chatmem-sqlite 1 wrote, with one conversation in it.
    file_at_version(
        &path,
        1,
        r#"
            CREATE TABLE conversations (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, system_json TEXT,
                system_tokens INTEGER, system_seq INTEGER, window_start INTEGER NOT NULL, next_seq INTEGER NOT NULL,
                expires_at INTEGER) WITHOUT ROWID;
            CREATE TABLE messages (conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, tokens INTEGER NOT NULL,
                json TEXT NOT NULL, PRIMARY KEY (conversation_id, seq)) WITHOUT ROWID;
            INSERT INTO conversations VALUES ('old', 1, '{"role":"system","content":"s"}', 5, 1, 1, 3, NULL);
            INSERT INTO messages VALUES ('old', 1, 6, '{"role":"user","content":"u1"}');
            INSERT INTO messages VALUES ('old', 2, 6, '{"role":"assistant","content":"a1"}');
            "#,
    );
    let store = SqliteStore::open(&path).await.expect("open upgrades");
    let id = chatmem::ConversationId::new("old").unwrap();
    let snap = store.load(&id).await.expect("load");
    assert_eq!(snap.version, 1);
    assert_eq!(snap.messages.len(), 2);
    assert!(
        snap.messages.iter().all(|m| m.counted_by.is_none()),
        "old rows have no counter"
    );
    let mem = memory(store.clone());
    mem.add(&id, turn(1)).await.expect("write after the upgrade");
    assert_eq!(mem.get(&id).await.expect("get").len(), 5);
    assert_eq!(file_version(&path), chatmem_sqlite::SCHEMA_VERSION);
    // Upgraded through every version to the recall index: searchable, nothing indexed yet.
    let query = chatmem::store::SearchQuery::new(vec!["u1".into()], u64::MAX, 10);
    let found = store.search(&id, &query).await.expect("search");
    assert_eq!((found.docs, found.hits.len()), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_2_file_is_upgraded_and_then_keeps_a_summary_and_commit_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v2.db");
    // The schema chatmem-sqlite 2 wrote (no summary column), with one conversation.
    file_at_version(
        &path,
        2,
        r#"
            CREATE TABLE conversations (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, system_json TEXT,
                system_tokens INTEGER, system_seq INTEGER, system_counted_by TEXT, commit_token INTEGER,
                window_start INTEGER NOT NULL, next_seq INTEGER NOT NULL, expires_at INTEGER) WITHOUT ROWID;
            CREATE TABLE messages (conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, tokens INTEGER NOT NULL,
                json TEXT NOT NULL, counted_by TEXT, PRIMARY KEY (conversation_id, seq)) WITHOUT ROWID;
            INSERT INTO conversations VALUES ('old', 1, NULL, NULL, NULL, NULL, 7, 1, 3, NULL);
            INSERT INTO messages VALUES ('old', 1, 6, '{"role":"user","content":"u1"}', 'heuristic');
            INSERT INTO messages VALUES ('old', 2, 6, '{"role":"assistant","content":"a1"}', 'heuristic');
            "#,
    );
    let store = SqliteStore::open(&path).await.expect("open upgrades");
    let id = chatmem::ConversationId::new("old").unwrap();
    let snap = store.load(&id).await.expect("load");
    assert_eq!(
        (snap.version, snap.messages.len(), snap.summary.is_none()),
        (1, 2, true)
    );
    // Written before the store recorded commit times: listed, with time 0.
    let listed = store
        .recent(&chatmem::store::RecentQuery::new("", None, 10))
        .await
        .expect("recent");
    assert_eq!(
        listed.conversations,
        vec![RecentConversation {
            id: id.clone(),
            updated_micros: 0,
            expires_micros: None
        }]
    );
    let summary = chatmem::Summary::new("u1 asked", 1, &chatmem::Heuristic);
    let commit = chatmem::store::Commit::on(&snap)
        .summary(summary.clone(), 0)
        .append(chatmem::Message::user("u3"), 6)
        .window_start(2)
        .build()
        .expect("commit");
    let started = now_micros();
    store.commit(&id, commit).await.expect("commit after the upgrade");
    assert_eq!(store.load(&id).await.expect("load").summary, Some(summary));
    // A commit after the upgrade records its time.
    let listed = store
        .recent(&chatmem::store::RecentQuery::new("", None, 10))
        .await
        .expect("recent");
    let updated = listed.conversations[0].updated_micros;
    assert!((started..=now_micros()).contains(&updated), "{listed:?}");
    assert_eq!(file_version(&path), chatmem_sqlite::SCHEMA_VERSION);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_4_file_is_upgraded_keeps_its_data_and_then_indexes_new_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v4.db");
    // The schema chatmem-sqlite 4 wrote (no recall index), with one conversation.
    file_at_version(
        &path,
        4,
        r#"
            CREATE TABLE conversations (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, system_json TEXT,
                system_tokens INTEGER, system_seq INTEGER, system_counted_by TEXT, commit_token INTEGER,
                summary TEXT, window_start INTEGER NOT NULL, next_seq INTEGER NOT NULL, expires_at INTEGER,
                updated_at INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
            CREATE TABLE messages (conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, tokens INTEGER NOT NULL,
                json TEXT NOT NULL, counted_by TEXT, PRIMARY KEY (conversation_id, seq)) WITHOUT ROWID;
            CREATE INDEX conversations_expires_at ON conversations (expires_at) WHERE expires_at IS NOT NULL;
            CREATE INDEX conversations_updated_at ON conversations (updated_at DESC, id DESC, expires_at);
            INSERT INTO conversations VALUES ('old', 1, NULL, NULL, NULL, NULL, 7, NULL, 1, 3, NULL, 1700000000000000);
            INSERT INTO messages VALUES ('old', 1, 6, '{"role":"user","content":"walrus u1"}', 'heuristic');
            INSERT INTO messages VALUES ('old', 2, 6, '{"role":"assistant","content":"walrus a1"}', 'heuristic');
            "#,
    );
    let store = SqliteStore::open(&path).await.expect("open upgrades");
    assert_eq!(file_version(&path), chatmem_sqlite::SCHEMA_VERSION);
    let id = chatmem::ConversationId::new("old").unwrap();
    let snap = store.load(&id).await.expect("load");
    assert_eq!((snap.version, snap.next_seq, snap.messages.len()), (1, 3, 2));
    let listed = store
        .recent(&chatmem::store::RecentQuery::new("", None, 10))
        .await
        .expect("recent");
    assert_eq!(listed.conversations[0].updated_micros, 1_700_000_000_000_000);
    // Messages written before the upgrade are not indexed: the index starts empty.
    let query = |terms: &[&str]| {
        chatmem::store::SearchQuery::new(terms.iter().map(|t| (*t).to_string()).collect(), u64::MAX, 10)
    };
    let found = store.search(&id, &query(&["walrus"])).await.expect("search");
    assert_eq!((found.docs, found.df.clone(), found.hits.len()), (0, vec![0], 0));
    // The next commits are indexed, beside the old messages.
    let commit = chatmem::store::Commit::on(&snap)
        .index(true)
        .retention(Retention::KeepHistory)
        .append(Message::user("walrus u3"), 6)
        .append(Message::assistant("walrus a3"), 6)
        .build()
        .expect("commit");
    store.commit(&id, commit).await.expect("commit after the upgrade");
    let found = store.search(&id, &query(&["walrus", "u3"])).await.expect("search");
    assert_eq!((found.docs, found.df.clone()), (2, vec![2, 1]));
    let hits: Vec<u64> = found.hits.iter().map(|h| h.message.seq).collect();
    assert_eq!(hits, [3, 4]);
    assert_eq!(*found.hits[0].message.message, Message::user("walrus u3"));
    assert_eq!(store.history(&id, 0, 10).await.expect("history").len(), 4);
    // Reopening the upgraded file changes nothing.
    drop(store);
    let store = SqliteStore::open(&path).await.expect("reopen");
    let again = store.search(&id, &query(&["walrus", "u3"])).await.expect("search");
    assert_eq!(again, found);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_file_is_not_created_when_it_must_exist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("no").join("such").join("x.db");
    let builders = [
        (
            "create_if_missing(false)",
            SqliteStore::builder(&path).create_if_missing(false),
        ),
        ("read_only", SqliteStore::builder(&path).read_only(true)),
        (
            "?mode=ro",
            SqliteStore::builder_from_url(&format!("sqlite:{}?mode=ro", path.display())).expect("url"),
        ),
    ];
    for (how, builder) in builders {
        let e = builder.open().await.expect_err("the file is missing");
        assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{how}: {e}");
        let missing = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<chatmem_sqlite::MissingDatabase>())
            .unwrap_or_else(|| panic!("{how}: the source is MissingDatabase: {e:?}"));
        assert_eq!(missing.path(), path, "{how}");
        assert!(
            missing.to_string().contains(&path.display().to_string()),
            "{how}: {missing}"
        );
        assert!(
            std::fs::read_dir(dir.path()).expect("read dir").next().is_none(),
            "{how}: nothing created"
        );
    }

    // An existing file opens as usual, and writes work (the option is only about creating).
    let path = dir.path().join("x.db");
    drop(SqliteStore::open(&path).await.expect("create"));
    let store = SqliteStore::builder(&path)
        .create_if_missing(false)
        .open()
        .await
        .expect("the file exists");
    memory(store)
        .add(&chatmem_test::unique_id("c"), turn(0))
        .await
        .expect("write");
}
