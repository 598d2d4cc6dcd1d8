//! A slow summary model never holds a turn: the commit waits at most `Summarizer::wait`, the
//! call goes on, and its summary rides in a later commit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chatmem::{
    ChatMemory, ChatModel, ChatRequest, ChatResponse, ConversationId, InMemoryStore, Message, ModelError,
    ModelErrorKind, Summarizer, SummaryOutcome, WindowPolicy,
};
use tokio::sync::Semaphore;

const ORDER: &str = "LC202610060018";

/// A summary model that answers only when the test lets it (one permit per answer), with the
/// last line of the transcript it was given, so a test can tell which messages it summarized.
#[derive(Debug)]
struct Gated {
    gate: Semaphore,
}

impl Gated {
    fn new() -> Self {
        Self {
            gate: Semaphore::new(0),
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for Gated {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let permit = self
            .gate
            .acquire()
            .await
            .map_err(|_| ModelError::new(ModelErrorKind::Other, "gate closed"))?;
        permit.forget();
        let input = request.messages.last().and_then(|m| m.text()).unwrap_or_default();
        let last = input.lines().rfind(|l| !l.is_empty()).unwrap_or_default().to_owned();
        Ok(ChatResponse {
            message: Message::assistant(format!("summary up to: {last}")),
            usage: None,
            finish_reason: None,
        })
    }
}

/// A memory of 3 messages whose summarizer calls `model`, waits 50 ms, runs late calls on
/// tokio, and records every outcome.
fn memory(model: Arc<Gated>, spawn: bool) -> (ChatMemory, Arc<Mutex<Vec<SummaryOutcome>>>) {
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&outcomes);
    let mut summarizer = Summarizer::from_arc(model)
        .wait(Duration::from_millis(50))
        .observe(move |o| seen.lock().expect("not poisoned").push(o));
    if spawn {
        summarizer = summarizer.spawn_with(|f| {
            tokio::spawn(f);
        });
    }
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(3))
        .summarizer(summarizer)
        .build()
        .expect("valid settings");
    (memory, outcomes)
}

fn id(s: &str) -> ConversationId {
    ConversationId::new(s).expect("a valid id")
}

fn outcomes(o: &Mutex<Vec<SummaryOutcome>>) -> Vec<SummaryOutcome> {
    o.lock().expect("not poisoned").clone()
}

/// The summary line the model sees above the window, if any.
async fn summary_of(memory: &ChatMemory, c: &ConversationId) -> Option<String> {
    let window = memory.get(c).await.expect("get");
    let first = window.first()?;
    (first.role() == chatmem::Role::System).then(|| first.text().unwrap_or_default().into_owned())
}

#[tokio::test]
async fn a_late_summary_lets_the_turn_commit_and_rides_in_the_next_commit() {
    let model = Arc::new(Gated::new());
    let (m, seen) = memory(Arc::clone(&model), true);
    let c = id("late");
    m.add(
        &c,
        [
            Message::user(format!("order {ORDER} not shipped")),
            Message::assistant("noted"),
        ],
    )
    .await
    .expect("first turn");
    // This turn evicts the first two messages; the model does not answer, yet the turn
    // commits (a 60 s summary call no longer holds it).
    m.add(&c, [Message::user("can it be refunded?"), Message::assistant("yes")])
        .await
        .expect("the turn commits without its summary");
    assert_eq!(outcomes(&seen), [SummaryOutcome::Late]);
    assert_eq!(summary_of(&m, &c).await, None, "no summary yet");
    assert_eq!(
        m.history(&c).await.expect("history").len(),
        4,
        "the evicted messages stay stored until summarized"
    );

    // The model answers; the spawned call finishes, and the next turn's commit carries it.
    model.gate.add_permits(1);
    tokio::time::sleep(Duration::from_millis(20)).await;
    m.add(&c, [Message::user("how long?")]).await.expect("third turn");
    let summary = summary_of(&m, &c).await.expect("the late summary landed");
    assert!(summary.contains("assistant: noted"), "{summary}");
    assert_eq!(outcomes(&seen), [SummaryOutcome::Late, SummaryOutcome::Made]);
    assert_eq!(
        m.history(&c).await.expect("history").len(),
        3,
        "summarized messages are dropped (drop-evicted)"
    );
}

#[tokio::test]
async fn without_a_spawner_a_late_summary_is_picked_up_by_a_later_turn() {
    let model = Arc::new(Gated::new());
    let (m, seen) = memory(Arc::clone(&model), false);
    let c = id("no-spawner");
    m.add(
        &c,
        [Message::user(format!("order {ORDER}")), Message::assistant("noted")],
    )
    .await
    .expect("first turn");
    m.add(&c, [Message::user("u2"), Message::assistant("a2")])
        .await
        .expect("late");
    model.gate.add_permits(1);
    // The same call, polled again by this turn's wait, answers now: one model call in all.
    m.add(&c, [Message::user("u3")]).await.expect("third turn");
    assert!(summary_of(&m, &c).await.is_some_and(|s| s.contains("assistant: noted")));
    assert_eq!(outcomes(&seen), [SummaryOutcome::Late, SummaryOutcome::Made]);
    assert_eq!(
        model.gate.available_permits(),
        0,
        "the late call was reused, not restarted"
    );
}

#[tokio::test]
async fn a_late_summary_of_a_cleared_conversation_is_not_used() {
    let model = Arc::new(Gated::new());
    let (m, seen) = memory(Arc::clone(&model), true);
    let c = id("cleared");
    m.add(&c, [Message::user("old secret"), Message::assistant("old answer")])
        .await
        .expect("first turn");
    m.add(&c, [Message::user("u2"), Message::assistant("a2")])
        .await
        .expect("late");
    assert!(m.clear(&c).await.expect("clear"));
    // The conversation starts again with the same sequence numbers.
    m.add(&c, [Message::user("new question"), Message::assistant("new answer")])
        .await
        .expect("new first turn");
    model.gate.add_permits(2);
    tokio::time::sleep(Duration::from_millis(20)).await;
    m.add(&c, [Message::user("u2'"), Message::assistant("a2'")])
        .await
        .expect("evicting turn");
    let summary = summary_of(&m, &c).await.expect("a new summary");
    assert!(summary.contains("new answer"), "{summary}");
    assert!(
        !summary.contains("old"),
        "the cleared conversation's summary leaked: {summary}"
    );
    assert_eq!(outcomes(&seen), [SummaryOutcome::Late, SummaryOutcome::Made]);
}

#[tokio::test]
async fn a_summary_call_past_its_timeout_is_reported_failed() {
    let model = Arc::new(Gated::new());
    let outcomes_seen = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&outcomes_seen);
    let summarizer = Summarizer::from_arc(Arc::clone(&model) as Arc<dyn ChatModel>)
        .wait(Duration::from_millis(20))
        .timeout(Duration::from_millis(100))
        .observe(move |o| seen.lock().expect("not poisoned").push(o))
        .spawn_with(|f| {
            tokio::spawn(f);
        });
    let m = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(3))
        .summarizer(summarizer)
        .build()
        .expect("valid settings");
    let c = id("hangs");
    m.add(&c, [Message::user("u1"), Message::assistant("a1")])
        .await
        .expect("first");
    m.add(&c, [Message::user("u2"), Message::assistant("a2")])
        .await
        .expect("late");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        outcomes(&outcomes_seen),
        [SummaryOutcome::Late, SummaryOutcome::Failed(ModelErrorKind::Timeout)]
    );
    // The messages stay pending, and a later turn tries again.
    model.gate.add_permits(1);
    m.add(&c, [Message::user("u3")]).await.expect("third");
    assert!(summary_of(&m, &c).await.is_some());
}
