//! A turn is planned once: every new message of a turn is tokenized exactly once, and
//! messages already in memory never again — through `call`, `stream`, the tool loop, eager
//! mode and a commit retried after losing to a concurrent writer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chatmem::{
    ChatMemory, ChatModel, ChatRequest, ChatResponse, ConversationId, Heuristic, InMemoryStore, Message, ModelError,
    TokenCounter, ToolCall, WindowPolicy,
};
use chatmem_advisor::{MemoryAdvisor, ToolError, ToolExecutor, TurnRequest, WriteMode};
use futures_util::StreamExt;
use tokio::sync::Notify;

/// Counts like [`Heuristic`] and records which message each count was for.
#[derive(Debug, Default)]
struct Recording {
    counted: Mutex<Vec<String>>,
}

impl Recording {
    /// How often each message (by role and text) was counted.
    fn tally(&self) -> BTreeMap<String, usize> {
        let mut tally = BTreeMap::new();
        for key in self.counted.lock().unwrap().iter() {
            *tally.entry(key.clone()).or_insert(0) += 1;
        }
        tally
    }
}

fn key(m: &Message) -> String {
    let calls: Vec<&str> = m.tool_calls().iter().map(|c| c.id.as_str()).collect();
    format!(
        "{}:{}:{}",
        m.role().as_str(),
        m.text().unwrap_or_default(),
        calls.join(",")
    )
}

impl TokenCounter for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn count_text(&self, text: &str) -> usize {
        Heuristic.count_text(text)
    }
    fn count_message(&self, message: &Message) -> usize {
        self.counted.lock().unwrap().push(key(message));
        Heuristic.count_message(message)
    }
}

/// Asks for the `lookup` tool once when the user says "tool", answers otherwise; waits for
/// `gate` first when the user says "wait".
#[derive(Debug, Default)]
struct Scripted {
    gate: Arc<Notify>,
}

#[async_trait]
impl ChatModel for Scripted {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let last = request
            .messages
            .last()
            .map(|m| Message::clone(m))
            .unwrap_or_else(|| Message::user(""));
        let text = last.text().unwrap_or_default().into_owned();
        if last.role() == chatmem::Role::User && text.contains("wait") {
            self.gate.notified().await;
        }
        let message = if last.role() == chatmem::Role::User && text.contains("tool") {
            Message::assistant_tool_calls(vec![ToolCall::new(format!("call-{text}"), "lookup", "{}")])
        } else {
            Message::assistant(format!("answer to {text} after {} messages", request.messages.len()))
        };
        Ok(ChatResponse {
            message,
            usage: None,
            finish_reason: Some("stop".into()),
        })
    }
}

#[derive(Debug)]
struct Lookup;

#[async_trait]
impl ToolExecutor for Lookup {
    async fn execute(&self, _name: &str, _arguments: &str) -> Result<String, ToolError> {
        Ok("order LC202610060018: not shipped".into())
    }
}

/// An advisor whose memory keeps evicted messages, so that the store's history is the whole
/// conversation to compare the counts with (the 60-token window evicts on purpose; a token
/// window, since a message-count window counts nothing).
fn advisor(counter: Arc<Recording>, mode: WriteMode) -> MemoryAdvisor<Scripted, InMemoryStore> {
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::tokens(60))
        .retention(chatmem::Retention::KeepHistory)
        .counter(counter)
        .build()
        .expect("valid memory settings");
    MemoryAdvisor::new(Scripted::default(), memory)
        .with_write_mode(mode)
        .with_tool_executor(Lookup)
}

/// Every message in history counted exactly once, and nothing else counted.
async fn assert_counted_once(
    advisor: &MemoryAdvisor<Scripted, InMemoryStore>,
    ids: &[&ConversationId],
    counter: &Recording,
) {
    let mut expected = BTreeMap::new();
    for id in ids {
        for m in advisor.memory().store().history_all(id).await {
            *expected.entry(key(&m)).or_insert(0) += 1;
        }
    }
    assert!(!expected.is_empty());
    assert_eq!(counter.tally(), expected, "each stored message counted exactly once");
}

/// Everything the store holds for a conversation: the system message and the whole log.
trait HistoryAll {
    async fn history_all(&self, id: &ConversationId) -> Vec<Message>;
}

impl HistoryAll for InMemoryStore {
    async fn history_all(&self, id: &ConversationId) -> Vec<Message> {
        use chatmem::Store;
        let snapshot = self.load(id).await.expect("load");
        let mut out: Vec<Message> = snapshot.system.into_iter().map(|s| s.into_message()).collect();
        out.extend(
            self.history(id, 0, 10_000)
                .await
                .expect("history")
                .into_iter()
                .map(|m| m.into_message()),
        );
        out
    }
}

#[tokio::test]
async fn call_and_stream_count_each_new_message_once() {
    for mode in [WriteMode::AfterSuccess, WriteMode::Eager] {
        let counter = Arc::new(Recording::default());
        let advisor = advisor(counter.clone(), mode);
        let id = ConversationId::new("counting").unwrap();
        let system = "be brief";
        for n in 0..6 {
            let text = if n % 3 == 1 {
                format!("tool {n}")
            } else {
                format!("question {n}")
            };
            let request = TurnRequest::user(text).with_system(system);
            if n % 2 == 0 {
                advisor.call(&id, request).await.expect("call");
            } else {
                let stream = advisor.stream(&id, request).await.expect("stream");
                let events: Vec<_> = stream.collect().await;
                assert!(events.iter().all(Result::is_ok), "{mode:?}");
            }
        }
        // 6 user messages, 6 answers, 2 tool calls and 2 results, 1 system message.
        assert_eq!(counter.counted.lock().unwrap().len(), 17, "{mode:?}");
        assert_counted_once(&advisor, &[&id], &counter).await;
        let window = advisor.memory().get(&id).await.expect("get");
        assert!(window.len() < 16, "the window evicted: {} messages", window.len());
    }
}

/// A message-count window needs no token counts: nothing is tokenized, and a token window
/// that later reads the conversation counts what it loads.
#[tokio::test]
async fn a_message_window_tokenizes_nothing() {
    let counter = Arc::new(Recording::default());
    let store = Arc::new(InMemoryStore::new());
    let memory = ChatMemory::builder(store.clone())
        .policy(WindowPolicy::messages(4))
        .counter(counter.clone())
        .build()
        .expect("valid memory settings");
    let advisor = MemoryAdvisor::new(Scripted::default(), memory).with_tool_executor(Lookup);
    let id = ConversationId::new("message-window").unwrap();
    for n in 0..4 {
        advisor
            .call(&id, TurnRequest::user(format!("question {n}")).with_system("be brief"))
            .await
            .expect("call");
    }
    assert!(counter.counted.lock().unwrap().is_empty(), "nothing tokenized");

    let tokens = ChatMemory::builder(store)
        .policy(WindowPolicy::tokens(10_000))
        .counter(counter.clone())
        .build()
        .expect("valid memory settings");
    let loaded = tokens.load(&id).await.expect("load");
    assert_eq!(loaded.tokens() as usize, counter.count_messages(&loaded.messages()));
}

#[tokio::test]
async fn a_retried_commit_recounts_nothing() {
    let counter = Arc::new(Recording::default());
    let advisor = Arc::new(advisor(counter.clone(), WriteMode::AfterSuccess));
    let id = ConversationId::new("contended").unwrap();
    advisor.call(&id, TurnRequest::user("first")).await.expect("first");

    // Turn A loads, then waits in the model while turn B commits: A's commit loses the
    // version check, reloads and commits again from the counts it already has.
    let gate = advisor.get_ref().gate.clone();
    let a = tokio::spawn({
        let advisor = advisor.clone();
        let id = id.clone();
        async move { advisor.call(&id, TurnRequest::user("wait for B")).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    advisor.call(&id, TurnRequest::user("B")).await.expect("B");
    gate.notify_one();
    a.await.expect("join").expect("A");

    let history = advisor.memory().store().history_all(&id).await;
    assert_eq!(history.len(), 6, "both turns stored");
    assert_counted_once(&advisor, &[&id], &counter).await;
}

#[tokio::test]
async fn old_messages_are_never_counted_again() {
    let counter = Arc::new(Recording::default());
    let advisor = advisor(counter.clone(), WriteMode::AfterSuccess);
    let id = ConversationId::new("old").unwrap();
    advisor
        .call(&id, TurnRequest::user("question 1"))
        .await
        .expect("turn 1");
    let before = counter.counted.lock().unwrap().len();
    advisor
        .call(&id, TurnRequest::user("question 2"))
        .await
        .expect("turn 2");
    let during: Vec<String> = counter.counted.lock().unwrap()[before..].to_vec();
    assert_eq!(
        during,
        [
            "user:question 2:".to_string(),
            "assistant:answer to question 2 after 3 messages:".to_string()
        ],
        "turn 2 counts its own two messages and nothing of turn 1"
    );
}
