//! Multi-process stress test helpers: many processes append turns to one conversation at
//! once; afterwards no turn may be lost, duplicated or split.
//!
//! The pattern, in a store crate's stress test (the test binary spawns copies of
//! itself as the children):
//!
//! ```no_run
//! use std::sync::Arc;
//! use chatmem_test::stress;
//!
//! // The child: does nothing unless the parent started this process as a child.
//! #[tokio::test(flavor = "multi_thread")]
//! async fn stress_child() {
//!     let Some(child) = stress::child_env() else { return };
//!     let store = chatmem::InMemoryStore::new(); // your store: connect(&child.url)
//!     stress::run_child(Arc::new(store), &child).await;
//! }
//!
//! // The parent: spawns 16 children running `stress_child`, then checks the transcript.
//! #[tokio::test(flavor = "multi_thread")]
//! async fn sixteen_processes() {
//!     if stress::child_env().is_some() { return; }
//!     let url = "sqlite:/tmp/x.db"; // where the children connect
//!     let store = chatmem::InMemoryStore::new(); // your store: connect(url)
//!     stress::run_parent(Arc::new(store), "stress_child", url, stress::PROCESSES, stress::TURNS).await;
//! }
//! ```
//!
//! Each child runs the test binary as `--exact <child test> --nocapture --test-threads 1`
//! with [`ENV_CHILD`], [`ENV_ID`], [`ENV_URL`] and [`ENV_TURNS`] set. Each commits `turns`
//! turns (user + assistant as one `add` batch, [`Retention::KeepHistory`]) whose texts
//! name the child and the turn; [`check_stress_history`] then checks the transcript.

use std::process::{Command, Stdio};
use std::sync::Arc;

use chatmem::store::StoredMessage;
use chatmem::{
    ChatMemory, ChatMemoryBuilder, ConversationId, Heuristic, Message, Retention, Role, Store, Summarizer, WindowPolicy,
};

use crate::Scribe;

/// Environment variable holding the child's index (set only in child processes).
pub const ENV_CHILD: &str = "CHATMEM_STRESS_CHILD";
/// Environment variable holding the conversation id the children write to.
pub const ENV_ID: &str = "CHATMEM_STRESS_ID";
/// Environment variable holding the store URL the children connect to.
pub const ENV_URL: &str = "CHATMEM_STRESS_URL";
/// Environment variable holding how many turns each child commits.
pub const ENV_TURNS: &str = "CHATMEM_STRESS_TURNS";
/// Environment variable set to `1` when the children summarize (see [`run_parent_summarizing`]).
pub const ENV_SUMMARIZE: &str = "CHATMEM_STRESS_SUMMARIZE";

/// The number of child processes the standard stress test spawns.
pub const PROCESSES: usize = 16;
/// The number of turns each child commits in the standard stress test.
pub const TURNS: usize = 50;

/// Held by the tests that measure how long an operation takes and by those that load the
/// machine (16 processes at once), so that in one test binary the first never run beside
/// the second.
static TIMED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits until no other timed or machine-loading test of this process runs: a stress parent
/// takes it for as long as its children run, and so does a test with a time bound.
pub async fn timed() -> tokio::sync::MutexGuard<'static, ()> {
    TIMED.lock().await
}

/// What a child process was told by its parent.
#[derive(Debug, Clone)]
pub struct StressChild {
    /// This child's index, from 0.
    pub index: usize,
    /// The conversation all children write to.
    pub id: ConversationId,
    /// The store URL to connect to.
    pub url: String,
    /// How many turns to commit.
    pub turns: usize,
    /// Whether to summarize what leaves the window (and drop it once summarized).
    pub summarize: bool,
}

/// The child's instructions when this process was started as a stress child, else `None`.
///
/// # Panics
/// When [`ENV_CHILD`] is set but the other variables are missing or malformed.
pub fn child_env() -> Option<StressChild> {
    let index = std::env::var(ENV_CHILD).ok()?;
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("stress child: {name} is not set"));
    Some(StressChild {
        index: index.parse().expect("stress child: bad child index"),
        id: ConversationId::new(var(ENV_ID)).expect("stress child: bad conversation id"),
        url: var(ENV_URL),
        turns: var(ENV_TURNS).parse().expect("stress child: bad turn count"),
        summarize: std::env::var(ENV_SUMMARIZE).is_ok_and(|v| v == "1"),
    })
}

/// The memory children write with: [`Retention::KeepHistory`], a 20-message window, the
/// heuristic counter and enough retries that contention never gives up.
pub fn stress_memory(store: Arc<dyn Store>) -> ChatMemory<Arc<dyn Store>> {
    contended(store, 20, Retention::KeepHistory)
        .build()
        .expect("valid memory settings")
}

/// The memory summarizing children write with: a 20-message window, evicted messages
/// summarized by a [`Scribe`] (which keeps every line) and dropped once summarized.
pub fn summarizing_memory(store: Arc<dyn Store>) -> ChatMemory<Arc<dyn Store>> {
    contended(store, 20, Retention::DropEvicted)
        .summarizer(Summarizer::new(Scribe::default()).max_tokens(u32::MAX))
        .build()
        .expect("valid memory settings")
}

/// A memory builder for writers that contend for one conversation: a `max_messages` window,
/// `retention`, the heuristic counter and enough retries that contention never gives up.
pub(crate) fn contended(
    store: Arc<dyn Store>,
    max_messages: usize,
    retention: Retention,
) -> ChatMemoryBuilder<Arc<dyn Store>> {
    ChatMemory::builder(store)
        .policy(WindowPolicy::messages(max_messages))
        .retention(retention)
        .counter(Arc::new(Heuristic))
        .max_attempts(100_000)
}

/// The two messages of turn `turn` of writer `writer`.
pub fn turn_messages(writer: usize, turn: usize) -> [Message; 2] {
    [
        Message::user(format!("stress w{writer} t{turn} user")),
        Message::assistant(format!("stress w{writer} t{turn} assistant")),
    ]
}

/// Commits `turns` turns of writer `writer` to `id`, one `add` batch per turn.
///
/// # Panics
/// When a commit fails.
pub async fn write_turns(memory: &ChatMemory<Arc<dyn Store>>, id: &ConversationId, writer: usize, turns: usize) {
    for turn in 0..turns {
        if let Err(e) = memory.add(id, turn_messages(writer, turn)).await {
            panic!("writer {writer} turn {turn}: {e} ({:?})", std::error::Error::source(&e));
        }
    }
}

/// The body of the child test: commits the child's turns through `store`; a summarizing
/// child also checks after each turn that the summary never moved backwards.
pub async fn run_child(store: Arc<dyn Store>, child: &StressChild) {
    if !child.summarize {
        write_turns(&stress_memory(store), &child.id, child.index, child.turns).await;
        return;
    }
    let memory = summarizing_memory(store.clone());
    let mut covered = 0;
    for turn in 0..child.turns {
        if let Err(e) = memory.add(&child.id, turn_messages(child.index, turn)).await {
            panic!(
                "writer {} turn {turn}: {e} ({:?})",
                child.index,
                std::error::Error::source(&e)
            );
        }
        let now = store.load(&child.id).await.expect("load").summary.map_or(0, |s| s.upto);
        assert!(now >= covered, "the summary moved backwards from {covered} to {now}");
        covered = now;
    }
}

/// Spawns `processes` copies of the current test binary running test `child_test` as
/// stress children writing to `id` at `url`, and waits for all of them.
///
/// # Panics
/// When a child cannot be started, fails, or did not run exactly one test (a wrong
/// `child_test` name would otherwise pass silently).
pub fn spawn_children(child_test: &str, id: &ConversationId, url: &str, processes: usize, turns: usize) {
    spawn(child_test, id, url, processes, turns, false);
}

fn spawn(child_test: &str, id: &ConversationId, url: &str, processes: usize, turns: usize, summarize: bool) {
    let exe = std::env::current_exe().expect("stress: no current_exe");
    let children: Vec<_> = (0..processes)
        .map(|index| {
            Command::new(&exe)
                .args(["--exact", child_test, "--nocapture", "--test-threads", "1"])
                .env(ENV_CHILD, index.to_string())
                .env(ENV_ID, id.as_str())
                .env(ENV_URL, url)
                .env(ENV_TURNS, turns.to_string())
                .env(ENV_SUMMARIZE, if summarize { "1" } else { "0" })
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("stress: spawning a child failed")
        })
        .collect();
    // One thread per child drains its pipes so no child blocks on a full pipe.
    let waiters: Vec<_> = children
        .into_iter()
        .map(|child| std::thread::spawn(move || child.wait_with_output()))
        .collect();
    for (index, waiter) in waiters.into_iter().enumerate() {
        let out = waiter
            .join()
            .expect("stress: waiter thread panicked")
            .expect("stress: waiting for a child failed");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "stress child {index} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            out.status
        );
    }
}

/// The parent side: a fresh conversation id, `processes` children of `turns` turns each
/// (see [`spawn_children`]), then [`check_stress_history`] on the transcript read through
/// `store`, which is cleared afterwards.
pub async fn run_parent(store: Arc<dyn Store>, child_test: &str, url: &str, processes: usize, turns: usize) {
    let id = crate::unique_id("stress");
    spawn_and_wait(child_test, &id, url, processes, turns, false).await;
    let history = stress_memory(store.clone())
        .history(&id)
        .await
        .expect("stress: reading the history failed");
    check_stress_history(&history, processes, turns);
    store.clear(&id).await.expect("stress: clearing failed");
}

async fn spawn_and_wait(
    child_test: &str,
    id: &ConversationId,
    url: &str,
    processes: usize,
    turns: usize,
    summarize: bool,
) {
    let (child_test, url, id) = (child_test.to_owned(), url.to_owned(), id.clone());
    tokio::task::spawn_blocking(move || spawn(&child_test, &id, &url, processes, turns, summarize))
        .await
        .expect("stress: the spawning task panicked");
}

/// [`run_parent`] with summarizing children ([`summarizing_memory`]): evicted turns are
/// summarized and dropped, so the transcript checked is the summary's lines (a [`Scribe`]
/// keeps each message as `role: text`) followed by the messages it does not cover. Each
/// child checks that the summary never moves backwards.
pub async fn run_parent_summarizing(
    store: Arc<dyn Store>,
    child_test: &str,
    url: &str,
    processes: usize,
    turns: usize,
) {
    let id = crate::unique_id("stress-summary");
    spawn_and_wait(child_test, &id, url, processes, turns, true).await;
    let snapshot = store.load(&id).await.expect("stress: load");
    let summary = snapshot.summary.expect("stress: evicted turns were summarized");
    let mut transcript: Vec<Message> = summary
        .text
        .lines()
        .map(|line| match line.split_once(": ") {
            Some(("user", text)) => Message::user(text),
            Some(("assistant", text)) => Message::assistant(text),
            _ => panic!("stress: unexpected summary line {line:?}"),
        })
        .collect();
    let rest = store
        .history(&id, summary.upto, usize::MAX)
        .await
        .expect("stress: history");
    transcript.extend(rest.into_iter().map(StoredMessage::into_message));
    check_stress_history(&transcript, processes, turns);
    store.clear(&id).await.expect("stress: clearing failed");
}

fn parse(text: &str) -> Option<(usize, usize, &str)> {
    let rest = text.strip_prefix("stress w")?;
    let (writer, rest) = rest.split_once(" t")?;
    let (turn, role) = rest.split_once(' ')?;
    Some((writer.parse().ok()?, turn.parse().ok()?, role))
}

/// Checks a transcript written by `processes` writers of `turns` turns each (texts from
/// [`turn_messages`]): exactly `processes * turns * 2` messages, each turn's user and
/// assistant message adjacent, every turn exactly once, each writer's turns in order.
///
/// # Panics
/// When any of that does not hold.
pub fn check_stress_history(messages: &[Message], processes: usize, turns: usize) {
    assert_eq!(
        messages.len(),
        processes * turns * 2,
        "stress: expected {processes} writers x {turns} turns x 2 messages"
    );
    let mut seen = vec![vec![false; turns]; processes];
    let mut last_turn: Vec<Option<usize>> = vec![None; processes];
    for (i, pair) in messages.chunks(2).enumerate() {
        let [user, assistant] = pair else {
            panic!("stress: odd number of messages");
        };
        let u_text = user.text().unwrap_or_default().into_owned();
        let a_text = assistant.text().unwrap_or_default().into_owned();
        let (w, t, r) = parse(&u_text).unwrap_or_else(|| panic!("stress: unexpected message {u_text:?} at {}", 2 * i));
        assert!(
            user.role() == Role::User && r == "user",
            "stress: message {} should start a turn: {u_text:?}",
            2 * i
        );
        assert_eq!(
            assistant.role(),
            Role::Assistant,
            "stress: turn {u_text:?} is not followed by its answer but {a_text:?}"
        );
        assert_eq!(
            parse(&a_text),
            Some((w, t, "assistant")),
            "stress: turn {u_text:?} was split: next is {a_text:?}"
        );
        assert!(w < processes && t < turns, "stress: out of range {u_text:?}");
        assert!(!seen[w][t], "stress: turn {u_text:?} appears twice");
        seen[w][t] = true;
        assert!(
            last_turn[w].is_none_or(|prev| prev < t),
            "stress: writer {w}'s turns are out of order at {u_text:?}"
        );
        last_turn[w] = Some(t);
    }
}
