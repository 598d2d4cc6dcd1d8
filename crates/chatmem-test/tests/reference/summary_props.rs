//! Property tests of summaries over random conversations: at every moment each message is
//! either stored or covered by the summary (never both deleted and uncovered), the summary
//! never moves backwards, a covered message is in the summary's text, and the window keeps
//! its budget.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use chatmem::{
    Budget, ChatMemory, ChatModel, ChatRequest, ChatResponse, ConversationId, Heuristic, InMemoryStore, Message,
    ModelError, Retention, Store, Summarizer, WindowPolicy,
};
use chatmem_test::Scribe;
use proptest::prelude::*;

/// A [`Scribe`] that fails the calls `fails` marks (cycled): outages at random moments.
#[derive(Debug)]
struct Flaky {
    scribe: Scribe,
    fails: Vec<bool>,
    calls: AtomicUsize,
}

#[async_trait]
impl ChatModel for Flaky {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fails.get(n % self.fails.len().max(1)).copied().unwrap_or(false) {
            return chatmem_test::Failing.complete(request).await;
        }
        self.scribe.complete(request).await
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// A user message and an answer.
    Turn,
    /// A user message, a tool call, its result and an answer.
    ToolTurn,
    /// A new system message.
    System,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![6 => Just(Step::Turn), 2 => Just(Step::ToolTurn), 1 => Just(Step::System)]
}

fn policy() -> impl Strategy<Value = WindowPolicy> {
    prop_oneof![
        (2usize..9).prop_map(WindowPolicy::messages),
        (2usize..9, 1usize..8).prop_map(|(max, low)| {
            WindowPolicy::messages(max)
                .evict_to(low.min(max - 1))
                .expect("low water below the budget")
        }),
        (40usize..200).prop_map(WindowPolicy::tokens),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_message_is_stored_or_summarized(
        steps in prop::collection::vec(step(), 1..30),
        policy in policy(),
        keep in any::<bool>(),
        fails in prop::collection::vec(any::<bool>(), 1..6),
        chunk in 1usize..6,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        runtime.block_on(check(steps, policy, keep, fails, chunk));
    }
}

async fn check(steps: Vec<Step>, policy: WindowPolicy, keep: bool, fails: Vec<bool>, chunk: usize) {
    let store = Arc::new(InMemoryStore::new());
    let model = Flaky {
        scribe: Scribe::default(),
        fails,
        calls: AtomicUsize::new(0),
    };
    let memory = ChatMemory::builder(store.clone())
        .policy(policy.clone())
        .retention(if keep {
            Retention::KeepHistory
        } else {
            Retention::DropEvicted
        })
        .counter(Heuristic)
        .summarizer(Summarizer::new(model).chunk(chunk, 10_000).max_tokens(100_000))
        .build()
        .expect("memory");
    let id = ConversationId::new("prop").expect("id");
    // Every non-system message ever added, by seq: its line in a Scribe summary.
    let mut lines: BTreeMap<u64, String> = BTreeMap::new();
    let mut covered_before = 0;
    for (n, step) in steps.iter().enumerate() {
        let batch = match step {
            Step::Turn => vec![Message::user(format!("u{n}")), Message::assistant(format!("a{n}"))],
            Step::ToolTurn => vec![
                Message::user(format!("u{n}")),
                Message::assistant_tool_calls(vec![chatmem::ToolCall::new(format!("c{n}"), "lookup", "{}")]),
                Message::tool_result(format!("c{n}"), format!("r{n}")),
                Message::assistant(format!("a{n}")),
            ],
            Step::System => vec![Message::system(format!("rules {n}"))],
        };
        let first_seq = store.load(&id).await.expect("load").next_seq;
        for (i, m) in batch.iter().filter(|m| !m.is_system()).enumerate() {
            let text = m.text().unwrap_or_default();
            if !text.is_empty() {
                lines.insert(first_seq + i as u64, format!("{}: {text}", m.role().as_str()));
            }
        }
        memory
            .add(&id, batch)
            .await
            .expect("a turn never fails because of its summary");

        let snapshot = store.load(&id).await.expect("load");
        let stored: Vec<u64> = store
            .history(&id, 0, usize::MAX)
            .await
            .expect("history")
            .iter()
            .map(|m| m.seq)
            .collect();
        let covered = snapshot.summary.as_ref().map_or(0, |s| s.upto);
        assert!(covered >= covered_before, "the summary moved backwards");
        covered_before = covered;
        for (&seq, line) in &lines {
            assert!(
                seq <= covered || stored.contains(&seq),
                "message {seq} ({line}) was deleted but no summary covers it (covered up to {covered})"
            );
            if seq <= covered {
                let text = &snapshot.summary.as_ref().expect("a summary").text;
                assert!(
                    text.lines().any(|l| l == line),
                    "covered message {seq} ({line}) is not in the summary"
                );
            }
        }
        let seen = memory.get(&id).await.expect("get");
        assert!(seen.iter().skip(1).all(|m| !m.is_system()), "one system message, first");
        if let Budget::Messages(max) = policy.budget() {
            assert!(seen.len() <= max, "{} messages in a {max}-message window", seen.len());
        }
    }
}
