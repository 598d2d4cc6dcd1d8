//! Tests across processes: 16 processes appending to one conversation, and a process that
//! writes then exits while a new store reads its work back.
//!
//! The children are copies of the test binary, started in child mode through environment
//! variables and a filter naming the child test; run normally, the child tests return at
//! once. Each body that starts children takes that test's full name in its binary (e.g.
//! `processes::stress_child`).

use std::process::Command;
use std::sync::Arc;

use chatmem::{ChatMemory, ConversationId, Heuristic, Message, Retention, WindowPolicy};

use super::{Settings, SqlDb};
use crate::stress;

/// Set (to the conversation id) only in the restart test's writer process.
pub const ENV_RESTART_ID: &str = "CHATMEM_SQL_RESTART_ID";

async fn shared_store<D: SqlDb>(url: &str, pool_size: usize) -> D::Store {
    D::connect(url, Settings::namespace(D::SHARED_NAMESPACE).pool_size(pool_size))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// Whether this process is one of the children.
fn is_child() -> bool {
    stress::child_env().is_some() || std::env::var_os(ENV_RESTART_ID).is_some()
}

/// The stress child: does nothing unless a parent started this process as one.
pub async fn stress_child<D: SqlDb>() {
    let Some(child) = stress::child_env() else { return };
    let store = shared_store::<D>(&child.url, 2).await;
    stress::run_child(Arc::new(store), &child).await;
}

/// 16 processes (running `child_test`) append to one conversation; no turn is lost.
pub async fn sixteen_processes_append_to_one_conversation<D: SqlDb>(child_test: &str) {
    if is_child() {
        return;
    }
    let _timed = super::timed().await;
    let url = D::url();
    let store = shared_store::<D>(&url, 4).await;
    let start = std::time::Instant::now();
    stress::run_parent(Arc::new(store), child_test, &url, stress::PROCESSES, stress::TURNS).await;
    eprintln!(
        "{} processes x {} turns: {:?}",
        stress::PROCESSES,
        stress::TURNS,
        start.elapsed()
    );
}

/// The same with summaries on: evicted turns are summarized and dropped; no turn is lost and
/// the summary never moves backwards.
pub async fn sixteen_summarizing_processes_append_to_one_conversation<D: SqlDb>(child_test: &str) {
    if is_child() {
        return;
    }
    let _timed = super::timed().await;
    let url = D::url();
    let store = shared_store::<D>(&url, 4).await;
    stress::run_parent_summarizing(Arc::new(store), child_test, &url, stress::PROCESSES, stress::TURNS).await;
}

fn restart_memory<S: chatmem::Store>(store: S) -> ChatMemory<S> {
    ChatMemory::builder(store)
        .policy(WindowPolicy::messages(4))
        .retention(Retention::KeepHistory)
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings")
}

/// The restart test's writer: does nothing unless the parent started this process as it.
pub async fn restart_child<D: SqlDb>() {
    let Ok(id) = std::env::var(ENV_RESTART_ID) else { return };
    let url = D::url();
    let id = ConversationId::new(id).expect("id");
    write_restart_conversation(&restart_memory(shared_store::<D>(&url, 1).await), &id).await;
}

async fn write_restart_conversation<S: chatmem::Store>(memory: &ChatMemory<S>, id: &ConversationId) {
    memory.add(id, [Message::system("rules v1")]).await.expect("add");
    for turn in 0..4 {
        memory
            .add(
                id,
                [
                    Message::user(format!("u{turn}")),
                    Message::assistant(format!("a{turn}")),
                ],
            )
            .await
            .expect("add");
    }
}

/// A process (running `child_test`) writes and exits; a new store reads its work back.
pub async fn a_new_process_reads_what_an_exited_one_wrote<D: SqlDb>(child_test: &str) {
    if is_child() {
        return;
    }
    let url = D::url();
    let id = crate::unique_id("restart");
    let exe = std::env::current_exe().expect("current_exe");
    let child_test = child_test.to_owned();
    let out = tokio::task::spawn_blocking({
        let id = id.clone();
        move || {
            Command::new(exe)
                .args(["--exact", &child_test, "--nocapture", "--test-threads", "1"])
                .env(ENV_RESTART_ID, id.as_str())
                .output()
                .expect("spawn the writer")
        }
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "writer failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The writer's process is gone; a new store and memory read its conversation.
    let memory = restart_memory(shared_store::<D>(&url, 1).await);
    let text = |ms: Vec<Message>| {
        ms.iter()
            .map(|m| m.text().unwrap_or_default().into_owned())
            .collect::<Vec<_>>()
    };
    // The same writes in memory give the window to expect.
    let reference = restart_memory(chatmem::InMemoryStore::new());
    write_restart_conversation(&reference, &id).await;
    let window = text(memory.get(&id).await.expect("get"));
    assert_eq!(window, text(reference.get(&id).await.expect("get")));
    assert_eq!(window.first().map(String::as_str), Some("rules v1"));
    assert_eq!(window.last().map(String::as_str), Some("a3"));
    assert_eq!(
        text(memory.history(&id).await.expect("history")),
        ["rules v1", "u0", "a0", "u1", "a1", "u2", "a2", "u3", "a3"]
    );
    assert!(memory.clear(&id).await.expect("clear"));
}
