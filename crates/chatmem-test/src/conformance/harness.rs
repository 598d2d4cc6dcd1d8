//! What every conformance step shares: the per-call [`Run`] (its store, its id prefix, the
//! store calls that panic with context), the commit builders the store crates' own tests use
//! too, and small helpers over messages.

use std::sync::Arc;
use std::time::Duration;

use chatmem::store::{Commit, RecentCursor, RecentPage, RecentQuery, Snapshot, StoreError, StoredMessage};
use chatmem::{ChatMemory, ConversationId, Message, Retention, Store};

type Mem = ChatMemory<Arc<dyn Store>>;

/// Per-call context: the store and the id prefix unique to this call.
pub(super) struct Run {
    pub(super) store: Arc<dyn Store>,
    pub(super) prefix: String,
}

impl Run {
    pub(super) fn id(&self, name: &str) -> ConversationId {
        ConversationId::new(format!("{}/{name}", self.prefix)).expect("valid test id")
    }

    pub(super) fn memory(&self, max_messages: usize, retention: Retention) -> Mem {
        crate::stress::contended(self.store.clone(), max_messages, retention)
            .build()
            .expect("valid memory settings")
    }

    pub(super) async fn load(&self, id: &ConversationId) -> Snapshot {
        expect_ok("load", id, self.store.load(id).await)
    }

    pub(super) async fn commit(&self, id: &ConversationId, commit: Commit) -> u64 {
        expect_ok("commit", id, self.store.commit(id, commit).await)
    }

    pub(super) async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Vec<StoredMessage> {
        expect_ok("history", id, self.store.history(id, after, limit).await)
    }

    /// [`Store::recent`] under `{prefix}/{sub}`.
    pub(super) async fn recent(&self, sub: &str, before: Option<&RecentCursor>, limit: usize) -> RecentPage {
        let prefix = format!("{}/{sub}", self.prefix);
        self.store
            .recent(&RecentQuery::new(&prefix, before, limit))
            .await
            .unwrap_or_else(|e| panic!("recent {prefix:?}: {e}"))
    }

    pub(super) async fn clear(&self, id: &ConversationId) -> bool {
        expect_ok("clear", id, self.store.clear(id).await)
    }

    /// Every id listed under `{prefix}/{sub}` by paging `limit` at a time from a cursor
    /// just below the range; checks page sizes, `next` and ascending order on the way.
    pub(super) async fn list_range(&self, sub: &str, limit: usize) -> Vec<ConversationId> {
        let range = format!("{}/{sub}", self.prefix);
        let mut after = Some(ConversationId::new(range.clone()).expect("valid cursor"));
        let mut out: Vec<ConversationId> = Vec::new();
        let mut prev = after.clone();
        'pages: while let Some(cursor) = after.take() {
            let page = self
                .store
                .list(Some(&cursor), limit)
                .await
                .unwrap_or_else(|e| panic!("list after {cursor:?}: {e}"));
            assert!(page.ids.len() <= limit.max(1), "list returned more than the limit");
            if let Some(next) = &page.next {
                assert_eq!(
                    Some(next),
                    page.ids.last(),
                    "list: `next` must be the last id of a full page"
                );
                assert_eq!(page.ids.len(), limit.max(1), "list: `next` set on a short page");
            }
            for id in page.ids {
                assert!(
                    prev.as_ref().is_none_or(|p| *p < id),
                    "list: ids not strictly ascending"
                );
                prev = Some(id.clone());
                if !id.as_str().starts_with(&range) {
                    break 'pages;
                }
                out.push(id);
            }
            after = page.next;
        }
        out
    }
}

/// A memory over the run's store that recalls (`recall`), with a window of `max_messages`.
pub(super) fn recalling(run: &Run, max_messages: usize, recall: chatmem::Recall) -> Mem {
    crate::stress::contended(run.store.clone(), max_messages, Retention::KeepHistory)
        .recall(recall)
        .build()
        .expect("a store that searches takes recall")
}

/// The value of a store call's `result`; panics naming the call, the id, the error and its
/// source, so a failing store says where.
fn expect_ok<T>(call: &str, id: &ConversationId, result: Result<T, StoreError>) -> T {
    result.unwrap_or_else(|e| panic!("{call} {id:?}: {e} ({:?})", std::error::Error::source(&e)))
}

pub(super) fn sm(seq: u64, tokens: u32, message: Message) -> StoredMessage {
    StoredMessage::new(seq, tokens, message)
}

/// A commit with no system change and no TTL: the shape most store tests need. `append`
/// must hold consecutive seqs (the first one is the conversation's `next_seq`).
///
/// # Panics
/// When `append` is empty or its seqs are not consecutive: use [`commit_full`].
pub fn commit(expected: u64, append: Vec<StoredMessage>, window_start: u64, retention: Retention) -> Commit {
    let next_seq = append
        .first()
        .map(|m| m.seq)
        .expect("commit() needs messages; use commit_full");
    commit_full(expected, next_seq, None, append, window_start, retention, None)
}

/// Any commit, built through [`Commit::on`] as a writer would: on a conversation at version
/// `expected` whose next seq is `next_seq`.
///
/// # Panics
/// When the seqs of `append` do not run from `next_seq`, or the builder rejects the commit.
pub fn commit_full(
    expected: u64,
    next_seq: u64,
    system: Option<StoredMessage>,
    append: Vec<StoredMessage>,
    window_start: u64,
    retention: Retention,
    ttl: Option<Duration>,
) -> Commit {
    let base = Snapshot {
        version: expected,
        next_seq,
        ..Snapshot::empty()
    };
    let mut builder = Commit::on(&base).retention(retention).ttl(ttl);
    if let Some(s) = system {
        builder = builder.system(s.message, s.tokens);
    }
    for (m, seq) in append.into_iter().zip(next_seq..) {
        assert_eq!(m.seq, seq, "test commits append consecutive seqs from {next_seq}");
        builder = builder.append(m.message, m.tokens);
    }
    builder.window_start(window_start).build().expect("a valid test commit")
}

/// The commit that creates a conversation: expected version 0, seqs and the window from 1,
/// history kept; `system` and `ttl` as given.
pub(super) fn creating(system: Option<StoredMessage>, append: Vec<StoredMessage>, ttl: Option<Duration>) -> Commit {
    commit_full(0, 1, system, append, 1, Retention::KeepHistory, ttl)
}

pub(super) fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.text().unwrap_or_default().into_owned())
        .collect()
}

pub(super) fn stored_texts(messages: &[StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.message.text().unwrap_or_default().into_owned())
        .collect()
}

pub(super) fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// `n` alternating user/assistant messages `u{i}`/`a{i}` stored from `first_seq`.
pub(super) fn turns(first_seq: u64, n: u64) -> Vec<StoredMessage> {
    (0..n)
        .map(|i| {
            let seq = first_seq + i;
            let m = if i % 2 == 0 {
                Message::user(format!("u{seq}"))
            } else {
                Message::assistant(format!("a{seq}"))
            };
            sm(seq, 3, m)
        })
        .collect()
}

pub(super) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}
