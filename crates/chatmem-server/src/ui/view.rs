//! What the memory inspector shows of one conversation, computed from what the core loaded
//! (pure: no I/O, no HTML). The page (`page.rs`) only lays it out; the rules (which messages
//! the model sees, what the summary covers, the budget) stay the core's.

use std::collections::{HashMap, HashSet};

use chatmem::store::StoredMessage;
use chatmem::{BlockEviction, Body, Budget, Content, ContentPart, LoadedWindow, Message, TokenCounter, WindowPolicy};

/// Where a history message stands for the next model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// In the window: the model sees it.
    Window,
    /// Left the window; the summary the model sees covers it.
    Summarized,
    /// Left the window and no summary covers it: the model no longer sees it at all.
    Evicted,
}

impl Place {
    /// The CSS class and the words a reader (and a screen reader) gets.
    pub(crate) fn label(self) -> (&'static str, &'static str) {
        match self {
            Place::Window => ("in-window", "in the window"),
            Place::Summarized => ("summarized", "evicted, covered by the summary"),
            Place::Evicted => ("evicted", "evicted"),
        }
    }
}

/// One piece of a message's content, as text to show (never as markup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Text.
    Text(String),
    /// An image, shown by its URL (the page loads nothing a message names).
    Image(String),
    /// An assistant's refusal.
    Refusal(String),
    /// Another content part, as its JSON.
    Other(String),
}

/// One history message as the page shows it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) seq: u64,
    pub(crate) role: &'static str,
    pub(crate) name: Option<String>,
    pub(crate) content: Vec<Piece>,
    /// DeepSeek's `reasoning_content`: kept in memory, never sent to the model.
    pub(crate) reasoning: Option<String>,
    /// `(id, name, arguments)` of each call an assistant message makes.
    pub(crate) tool_calls: Vec<(String, String, String)>,
    /// The call a tool result answers, and whether the tool failed.
    pub(crate) answers: Option<(String, bool)>,
    /// The cached token count (0 when a message-count window stored it uncounted).
    pub(crate) tokens: u32,
    pub(crate) place: Place,
    /// In the window but cleared from the prompt (`clear_tool_results`): what the model is
    /// sent instead, the stored message being the original.
    pub(crate) sent: Option<Sent>,
}

/// What the model is sent instead of a message clearing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sent {
    /// A tool result sent as this placeholder.
    Placeholder(String),
    /// An assistant's calls sent with their arguments as `{}`.
    NoArguments,
}

impl Sent {
    /// What `replacement`, sent instead of a stored message, is.
    fn of(replacement: &Message) -> Self {
        match &replacement.body {
            Body::Tool { content, .. } => Sent::Placeholder(match content {
                Content::Text(text) => text.clone(),
                Content::Parts(_) => serde_json::to_string(content).unwrap_or_default(),
            }),
            _ => Sent::NoArguments,
        }
    }
}

impl Row {
    /// The row of `stored`, its tokens by `counter` as the window counts them
    /// ([`StoredMessage::tokens_by`]: a message-count window stores messages uncounted).
    fn new(stored: &StoredMessage, place: Place, counter: &dyn TokenCounter, sent: Option<Sent>) -> Self {
        let message: &Message = &stored.message;
        let tokens = stored.tokens_by(counter);
        let mut row = Row {
            seq: stored.seq,
            role: message.role().as_str(),
            name: message.name.clone(),
            content: Vec::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            answers: None,
            tokens,
            place,
            sent,
        };
        match &message.body {
            Body::System { content } | Body::Developer { content } | Body::User { content } => {
                row.content = pieces(content);
            }
            Body::Assistant {
                content,
                reasoning_content,
                tool_calls,
            } => {
                row.content = content.as_ref().map(pieces).unwrap_or_default();
                row.reasoning.clone_from(reasoning_content);
                row.tool_calls = tool_calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
                    .collect();
            }
            Body::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                row.content = pieces(content);
                row.answers = Some((tool_call_id.clone(), *is_error));
            }
        }
        row
    }
}

fn pieces(content: &Content) -> Vec<Piece> {
    match content {
        Content::Text(text) => vec![Piece::Text(text.clone())],
        Content::Parts(parts) => parts.iter().map(piece).collect(),
    }
}

fn piece(part: &ContentPart) -> Piece {
    match part {
        ContentPart::Text(text) => Piece::Text(text.clone()),
        ContentPart::ImageUrl(image) => Piece::Image(image.url.clone()),
        ContentPart::Refusal(text) => Piece::Refusal(text.clone()),
        ContentPart::Other(part) => Piece::Other(serde_json::to_string(part).unwrap_or_default()),
    }
}

/// Messages shown together: one message, or an assistant's tool calls with the results that
/// answer them (the window never splits them, so neither does the page).
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    pub(crate) rows: Vec<Row>,
}

/// Groups `rows` (in order) into [`Unit`]s: a tool result joins the unit of the assistant
/// message whose call it answers, when that message is on the page.
pub(crate) fn units(rows: Vec<Row>) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    let mut open: HashSet<String> = HashSet::new();
    for row in rows {
        let joins = row
            .answers
            .as_ref()
            .is_some_and(|(id, _)| open.contains(id) && !units.is_empty());
        if joins {
            if let Some(last) = units.last_mut() {
                last.rows.push(row);
            }
            continue;
        }
        open = row.tool_calls.iter().map(|(id, _, _)| id.clone()).collect();
        units.push(Unit { rows: vec![row] });
    }
    units
}

/// The budget bar: what the next prompt takes of the policy's budget, by part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BudgetBar {
    /// `messages` or `tokens`.
    pub(crate) unit: &'static str,
    pub(crate) budget: u64,
    pub(crate) system: u64,
    pub(crate) summary: u64,
    pub(crate) window: u64,
    /// Tokens of the message list itself (a token budget only).
    pub(crate) overhead: u64,
}

impl BudgetBar {
    /// The bar of `loaded` under `policy` (the policy it was loaded with).
    pub(crate) fn new(loaded: &LoadedWindow, policy: &WindowPolicy) -> Self {
        let snapshot = loaded.snapshot();
        match policy.budget() {
            Budget::Messages(n) => Self {
                unit: "messages",
                budget: n as u64,
                // The system message and the summary are one message, as the model gets them.
                system: u64::from(loaded.rendered_system().is_some()),
                summary: 0,
                window: loaded.stored_turns().count() as u64,
                overhead: 0,
            },
            Budget::Tokens(n) => {
                let system = snapshot.system.as_ref().map_or(0, |s| u64::from(s.tokens));
                // As sent: a cleared result costs its placeholder.
                let stored: u64 = loaded.stored_turns().map(|m| u64::from(m.tokens)).sum();
                let window = stored.saturating_sub(loaded.cleared().tokens_saved);
                let total = loaded.tokens();
                // The summary's share is what the total holds beyond the rest.
                let summary = loaded.summary().map_or(0, |s| u64::from(s.tokens));
                Self {
                    unit: "tokens",
                    budget: n as u64,
                    system,
                    summary,
                    window,
                    overhead: total.saturating_sub(system + summary + window),
                }
            }
        }
    }

    /// Everything the next prompt takes.
    pub(crate) fn used(&self) -> u64 {
        self.system + self.summary + self.window + self.overhead
    }
}

/// The summary as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SummaryView {
    pub(crate) text: String,
    /// It covers every message up to this sequence number.
    pub(crate) upto: u64,
    pub(crate) tokens: u32,
}

/// One conversation's page: the pinned system message, the summary, a page of history with
/// each message's place, the budget and the prompt.
#[derive(Debug, Clone)]
pub(crate) struct ConversationView {
    pub(crate) system: Option<Row>,
    pub(crate) summary: Option<SummaryView>,
    pub(crate) units: Vec<Unit>,
    pub(crate) budget: BudgetBar,
    pub(crate) eviction: Option<BlockEviction>,
    /// Messages in the window (the system slot aside).
    pub(crate) window_len: usize,
    /// Sequence numbers written so far (the next message gets this one plus one).
    pub(crate) written: u64,
    /// The first sequence number of the window, if it holds any message.
    pub(crate) window_first: Option<u64>,
}

impl ConversationView {
    /// The view of `loaded` (loaded under `policy`, counting with `counter`) with `history`, a
    /// page of its stored messages in order.
    pub(crate) fn new(
        loaded: &LoadedWindow,
        policy: &WindowPolicy,
        counter: &dyn TokenCounter,
        history: &[StoredMessage],
    ) -> Self {
        let in_window: HashSet<u64> = loaded.stored_turns().map(|m| m.seq).collect();
        let summary = loaded.summary().map(|s| SummaryView {
            text: s.text.clone(),
            upto: s.upto,
            tokens: s.tokens,
        });
        let upto = summary.as_ref().map_or(0, |s| s.upto);
        let place = |seq: u64| {
            if in_window.contains(&seq) {
                Place::Window
            } else if seq <= upto {
                Place::Summarized
            } else {
                Place::Evicted
            }
        };
        let sent: HashMap<u64, Sent> = loaded
            .entries()
            .filter_map(|(stored, instead)| instead.map(|m| (stored.seq, Sent::of(m))))
            .collect();
        let rows = history
            .iter()
            .map(|m| Row::new(m, place(m.seq), counter, sent.get(&m.seq).cloned()))
            .collect();
        let snapshot = loaded.snapshot();
        Self {
            system: snapshot
                .system
                .as_ref()
                .map(|s| Row::new(s, Place::Window, counter, None)),
            summary,
            units: units(rows),
            budget: BudgetBar::new(loaded, policy),
            eviction: loaded.block_eviction(),
            window_len: in_window.len(),
            written: snapshot.next_seq.saturating_sub(1),
            window_first: loaded.stored_turns().next().map(|m| m.seq),
        }
    }
}

#[cfg(test)]
mod tests {
    use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, Retention, ToolCall};

    use super::*;

    async fn loaded(policy: WindowPolicy, messages: Vec<Message>) -> (LoadedWindow, Vec<StoredMessage>) {
        let memory = ChatMemory::builder(InMemoryStore::new())
            .policy(policy)
            .retention(Retention::KeepHistory)
            .build()
            .expect("a memory");
        let id = ConversationId::new("c").expect("an id");
        memory.add(&id, messages).await.expect("added");
        let page = memory.history_page(&id, 0, 1000).await.expect("a page");
        (memory.load(&id).await.expect("loaded"), page.messages)
    }

    #[tokio::test]
    async fn each_message_is_placed_where_the_model_sees_it_and_tool_turns_stay_whole() {
        let (loaded, history) = loaded(
            WindowPolicy::messages(3),
            vec![
                Message::system("be brief"),
                Message::user("order LC202610060018 hasn't shipped"),
                Message::assistant_tool_calls(vec![ToolCall::new("c1", "track", "{}")]),
                Message::tool_result("c1", "in transit"),
                Message::assistant("it is in transit"),
                Message::user("can that order be refunded?"),
            ],
        )
        .await;
        let view = ConversationView::new(&loaded, &WindowPolicy::messages(3), &chatmem::Cl100k, &history);
        let places: Vec<(u64, Place)> = view
            .units
            .iter()
            .flat_map(|u| u.rows.iter().map(|r| (r.seq, r.place)))
            .collect();
        let windowed: Vec<u64> = places
            .iter()
            .filter(|(_, p)| *p == Place::Window)
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(windowed, loaded.stored_turns().map(|m| m.seq).collect::<Vec<_>>());
        assert!(places.iter().any(|(_, p)| *p == Place::Evicted), "{places:?}");
        // The call and its result are one unit.
        let tool_unit = view
            .units
            .iter()
            .find(|u| !u.rows[0].tool_calls.is_empty())
            .expect("a tool unit");
        assert_eq!(tool_unit.rows.len(), 2);
        assert_eq!(tool_unit.rows[1].answers, Some(("c1".to_owned(), false)));
        // Budget: the system message and the window, as the model gets them.
        assert_eq!(view.budget.used(), loaded.len() as u64);
        assert_eq!(view.system.as_ref().map(|r| r.role), Some("system"));
        // A message-count window stores no counts: the page counts them.
        assert!(view.units.iter().all(|u| u.rows.iter().all(|r| r.tokens > 0)));
    }

    #[tokio::test]
    async fn a_token_budget_bar_adds_up_to_the_windows_tokens() {
        let policy = WindowPolicy::tokens(60);
        let (loaded, history) = loaded(
            policy.clone(),
            vec![
                Message::system("be brief"),
                Message::user("hello"),
                Message::assistant("hi"),
            ],
        )
        .await;
        let bar = BudgetBar::new(&loaded, &policy);
        assert_eq!((bar.unit, bar.budget), ("tokens", 60));
        assert_eq!(bar.used(), loaded.tokens());
        assert!(bar.system > 0 && bar.window > 0 && bar.overhead > 0, "{bar:?}");
        assert_eq!(history.len(), 2);
    }
    #[tokio::test]
    async fn a_cleared_result_is_marked_and_the_bar_counts_what_is_sent() {
        let clear = chatmem::ClearToolResults::new(1).expect("keep 1").trigger_tokens(40);
        let policy = WindowPolicy::tokens(2_000).with_clearing(clear).expect("a policy");
        let record = "order LC202610060018, in transit, ".repeat(20);
        let (loaded, history) = loaded(
            policy.clone(),
            vec![
                Message::user("where are my orders?"),
                Message::assistant_tool_calls(vec![ToolCall::new("c1", "track", "{}")]),
                Message::tool_result("c1", record.as_str()),
                Message::assistant_tool_calls(vec![ToolCall::new("c2", "track", "{}")]),
                Message::tool_result("c2", record.as_str()),
            ],
        )
        .await;
        let view = ConversationView::new(&loaded, &policy, &chatmem::Cl100k, &history);
        let rows: Vec<&Row> = view.units.iter().flat_map(|u| &u.rows).collect();
        match &rows[2].sent {
            Some(Sent::Placeholder(p)) => assert!(p.starts_with("[cleared: track result for call c1, "), "{p}"),
            other => panic!("not cleared: {other:?}"),
        }
        // The row keeps the stored original and its size.
        assert_eq!(rows[2].content, vec![Piece::Text(record.clone())]);
        assert!(rows[2].tokens > 100);
        assert_eq!(rows[4].sent, None, "the most recent use is kept");
        assert!(loaded.cleared().tokens_saved > 0);
        assert_eq!(view.budget.used(), loaded.tokens());
    }
}
