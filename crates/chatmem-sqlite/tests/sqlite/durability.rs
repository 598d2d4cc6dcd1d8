//! Crash and restart: a child process (this test binary running one test) writes to a
//! file; the parent kills it with SIGKILL mid-run, or lets it exit, and reads the file.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::{ChatMemory, ConversationId, Heuristic, Message, Retention, Store, WindowPolicy};
use chatmem_sqlite::SqliteStore;

const ENV_URL: &str = "CHATMEM_SQLITE_TEST_URL";
const ENV_ID: &str = "CHATMEM_SQLITE_TEST_ID";
const ENV_TAG: &str = "CHATMEM_SQLITE_TEST_TAG";

/// Messages per batch in the crash test.
const BATCH: usize = 3;

fn child_env() -> Option<(String, ConversationId, String)> {
    let url = std::env::var(ENV_URL).ok()?;
    let id = ConversationId::new(std::env::var(ENV_ID).expect("child id")).expect("valid id");
    let tag = std::env::var(ENV_TAG).expect("child tag");
    Some((url, id, tag))
}

fn spawn_child(test: &str, url: &str, id: &ConversationId, tag: &str) -> Child {
    Command::new(std::env::current_exe().expect("current_exe"))
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(ENV_URL, url)
        .env(ENV_ID, id.as_str())
        .env(ENV_TAG, tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

fn memory(store: SqliteStore) -> ChatMemory<SqliteStore> {
    ChatMemory::builder(store)
        .policy(WindowPolicy::messages(20))
        .retention(Retention::KeepHistory)
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings")
}

fn batch(tag: &str, n: usize) -> [Message; BATCH] {
    [
        Message::user(format!("{tag} b{n} m0")),
        Message::assistant(format!("{tag} b{n} m1")),
        Message::user(format!("{tag} b{n} m2")),
    ]
}

/// Crash child: commits batches until killed (bounded, in case the parent died).
#[tokio::test(flavor = "multi_thread")]
async fn crash_child() {
    let Some((url, id, tag)) = child_env() else { return };
    let memory = memory(SqliteStore::connect(&url).await.expect("child: connect"));
    for n in 0..1_000_000 {
        memory.add(&id, batch(&tag, n)).await.expect("child: add");
    }
}

fn integrity_ok(path: &Path) {
    let conn = rusqlite_open(path);
    let result: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(result, "ok");
}

fn rusqlite_open(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("raw open")
}

/// Every batch whole, in order, numbered from 0 per writer, for the given writer tags.
fn check_batches(history: &[Message], tags: &[String]) -> usize {
    assert_eq!(
        history.len() % BATCH,
        0,
        "history holds a partial batch: {} messages",
        history.len()
    );
    let mut next = vec![0usize; tags.len()];
    for chunk in history.chunks(BATCH) {
        let first = chunk[0].text().unwrap_or_default().into_owned();
        let (tag, rest) = first.rsplit_once(" b").expect("batch marker");
        let (n, _) = rest.split_once(' ').expect("batch marker");
        let n: usize = n.parse().expect("batch number");
        let w = tags.iter().position(|t| t == tag).expect("known writer");
        assert_eq!(n, next[w], "writer {tag}: batch {n} out of order or missing");
        next[w] += 1;
        let expected = batch(tag, n);
        assert_eq!(chunk, &expected[..], "batch {tag} b{n} is not whole");
    }
    next.iter().sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_commit_leaves_only_whole_batches() {
    if child_env().is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crash.db");
    let url = format!("sqlite:{}", path.display());
    let id = chatmem_test::unique_id("crash");
    let mut tags = Vec::new();
    let mut total_batches = 0;
    for round in 0..5u64 {
        let tag = format!("round{round}");
        tags.push(tag.clone());
        let watcher = memory(SqliteStore::connect(&url).await.expect("connect"));
        let mut child = spawn_child("durability::crash_child", &url, &id, &tag);
        // Let it commit a while, then kill it while it is busy committing.
        let started = Instant::now();
        let before = watcher.history(&id).await.expect("history").len();
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = watcher.history(&id).await.expect("history").len();
            if now >= before + 60 * BATCH {
                break;
            }
            if let Some(status) = child.try_wait().expect("try_wait") {
                let out = child.wait_with_output().expect("output");
                panic!(
                    "crash child exited early ({status}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "crash child made no progress"
            );
        }
        // A varying extra delay so the kill lands at different points of a commit.
        std::thread::sleep(Duration::from_micros(round * 1_777 % 5_000));
        child.kill().expect("SIGKILL the child");
        child.wait().expect("reap the child");
        drop(watcher);

        integrity_ok(&path);
        // A fresh store (as after a restart) reads it and can write to it.
        let fresh = memory(SqliteStore::connect(&url).await.expect("reopen after kill"));
        let history = fresh.history(&id).await.expect("history after kill");
        let batches = check_batches(&history, &tags);
        assert!(batches > total_batches, "round {round} wrote nothing");
        total_batches = batches;
        eprintln!(
            "round {round}: killed after {:?}; {batches} whole batches on disk",
            started.elapsed()
        );
        assert!(fresh.get(&id).await.expect("window").len() <= 20);
    }
}

/// Restart child: writes one conversation and exits.
#[tokio::test(flavor = "multi_thread")]
async fn restart_writer() {
    let Some((url, id, tag)) = child_env() else { return };
    let memory = memory(SqliteStore::connect(&url).await.expect("child: connect"));
    memory
        .add(&id, [Message::system(format!("{tag} rules"))])
        .await
        .expect("add");
    for n in 0..10 {
        memory.add(&id, batch(&tag, n)).await.expect("add");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_process_reads_what_one_wrote() {
    if child_env().is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("restart.db").display());
    let id = chatmem_test::unique_id("restart");
    let out = spawn_child("durability::restart_writer", &url, &id, "writer")
        .wait_with_output()
        .expect("writer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "writer failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let memory = memory(SqliteStore::connect(&url).await.expect("connect"));
    let history = memory.history(&id).await.expect("history");
    assert_eq!(history[0], Message::system("writer rules"));
    assert_eq!(check_batches(&history[1..], &["writer".to_owned()]), 10);
    let window = memory.get(&id).await.expect("get");
    assert_eq!(window[0], Message::system("writer rules"));
    // System + the newest 19 messages: 19 back from the end lands on a user message.
    assert_eq!(window.len(), 20);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_store_reads_what_a_dropped_one_wrote() {
    if child_env().is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("reopen.db");
    let id = chatmem_test::unique_id("reopen");
    let first = memory(SqliteStore::open(&path).await.expect("open"));
    first.add(&id, batch("before", 0)).await.expect("add");
    let expected = first.get(&id).await.expect("get");
    let version = first.store().load(&id).await.expect("load").version;
    drop(first);
    let second = memory(SqliteStore::open(&path).await.expect("reopen"));
    assert_eq!(second.get(&id).await.expect("get"), expected);
    assert_eq!(second.store().load(&id).await.expect("load").version, version);
    second.add(&id, batch("before", 1)).await.expect("add after reopen");
    assert_eq!(second.history(&id).await.expect("history").len(), 6);
}
