//! What a turn's commit summarizes, how long it waits for it, and the summaries that come
//! late.
//!
//! The messages a turn's plan leaves pending (evicted, not yet covered by the summary), oldest
//! first and at most one chunk, go to the [`Summarizer`]'s model. The commit waits for the
//! summary at most [`Summarizer::wait`]; a summary that is late is kept, still running (on the
//! summarizer's spawner, if it has one) until its own timeout, and rides in the conversation's
//! next commit that finds it ready, version-checked like every commit. A failed summary fails
//! nothing: the messages stay stored and pending for a later turn.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared};

use crate::commit::Commit;
use crate::counter::TokenCounter;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::model::ModelErrorKind;
use crate::snapshot::Snapshot;
use crate::stored_message::StoredMessage;
use crate::summarizer::Summarizer;
use crate::summary::Summary;

/// What became of a summary a turn asked for, as a [`Summarizer::observe`] callback hears it
/// (a server counts these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SummaryOutcome {
    /// The summary was ready within the wait and rides in the turn's commit.
    Made,
    /// The turn committed without it after [`Summarizer::wait`]; the call goes on and its
    /// summary lands in a later commit.
    Late,
    /// The call failed (or timed out, [`ModelErrorKind::Timeout`]); the messages stay pending.
    Failed(ModelErrorKind),
}

/// Runs a late summary to its end, off the turn: `|f| { tokio::spawn(f); }`.
pub(crate) type Spawn = Arc<dyn Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync>;

/// Reports each [`SummaryOutcome`].
pub(crate) type Observe = Arc<dyn Fn(SummaryOutcome) + Send + Sync>;

/// At most this many late summaries are kept (one per conversation); past it, the finished
/// ones are dropped, and then new late ones are not kept (their messages stay pending).
const MAX_LATE: usize = 4096;

/// A summary call, shared between the turn that started it and the later turn that uses it.
type Call = Shared<BoxFuture<'static, Option<Summary>>>;

/// A summary still running after its turn committed without it.
struct Late {
    /// The `upto` of the summary it extends.
    extends: u64,
    /// The last message it summarizes: a later turn uses the summary only if this message is
    /// still pending there (a conversation cleared and written again is not the same one).
    last: StoredMessage,
    call: Call,
}

/// The late summaries of a [`Summarizer`], by conversation.
#[derive(Default)]
pub(crate) struct LateSummaries(Mutex<HashMap<ConversationId, Late>>);

impl LateSummaries {
    /// The late summary of `id` if it still fits what is pending (it extends the summary
    /// `covered` and its last message is among `pending`) and has not failed; a stale or
    /// failed one is dropped.
    fn take_fitting(&self, id: &ConversationId, covered: u64, pending: &[StoredMessage]) -> Option<Late> {
        let mut late = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = late.remove(id)?;
        let failed = matches!(entry.call.peek(), Some(None));
        let fits = !failed
            && entry.extends == covered
            && pending
                .iter()
                .any(|m| m.seq == entry.last.seq && m.message == entry.last.message);
        fits.then_some(entry)
    }

    fn keep(&self, id: &ConversationId, entry: Late) {
        let mut late = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if late.len() >= MAX_LATE {
            late.retain(|_, l| l.call.peek().is_none());
        }
        if late.len() < MAX_LATE {
            late.insert(id.clone(), entry);
        }
    }
}

/// A new summary covering what `planned` (a commit planned on `snapshot`) leaves pending,
/// with the `upto` of the summary it extends; `None` when nothing is pending, the summary
/// failed, or it was not ready within the summarizer's wait (then it is kept for a later
/// turn). A backlog below the loaded window is read with `history` (the store's
/// [`history`](crate::Store::history) of conversation `id`: up to `limit` messages after a
/// sequence).
pub(crate) async fn pending_summary<H, F>(
    history: H,
    id: &ConversationId,
    summarizer: &Summarizer,
    counter: &Arc<dyn TokenCounter>,
    snapshot: &Snapshot,
    planned: &Commit,
) -> Option<(Summary, u64)>
where
    H: FnOnce(u64, usize) -> F,
    F: Future<Output = Result<Vec<StoredMessage>, StoreError>>,
{
    let covered = snapshot.summary.as_ref().map_or(0, |s| s.upto);
    let end = planned.window_start(); // pending: covered < seq < end
    if end <= covered.saturating_add(1) {
        return None;
    }
    let mut pending = Vec::new();
    // A backlog below the loaded window (a failed or late summary, an import) comes from
    // history.
    let mut complete = true;
    if covered.saturating_add(1) < snapshot.window_start {
        let limit = summarizer.chunk_limit();
        let page = match history(covered, limit).await {
            Ok(page) => page,
            Err(e) => {
                // Ids and store errors (which name the conversation) only at trace: they are
                // the user's data.
                tracing::warn!(kind = ?e.kind(), "could not read messages to summarize; they stay pending");
                tracing::trace!(conversation = %id, error = %e, "the history read that failed");
                return None;
            }
        };
        complete = page.len() < limit || page.last().is_some_and(|m| m.seq + 1 >= snapshot.window_start);
        pending.extend(page.into_iter().filter(|m| m.seq < snapshot.window_start.min(end)));
    }
    if complete {
        let loaded_and_new = snapshot.messages.iter().chain(planned.appended());
        pending.extend(loaded_and_new.filter(|m| m.seq > covered && m.seq < end).cloned());
    }
    let late = summarizer.late();
    let (entry, fresh) = match late.take_fitting(id, covered, &pending) {
        Some(entry) => (entry, false),
        None => {
            let chunk = summarizer.chunk_of(&pending);
            let last = chunk.last()?.clone();
            let upto = if complete && chunk.len() == pending.len() {
                end - 1
            } else {
                last.seq
            };
            let call = start(summarizer, id, snapshot.summary.clone(), chunk.to_vec(), upto, counter);
            let entry = Late {
                extends: covered,
                last,
                call,
            };
            (entry, true)
        }
    };
    match super::with_timeout(entry.call.clone(), summarizer.wait_value()).await {
        Some(made) => made.map(|summary| {
            summarizer.report(SummaryOutcome::Made);
            (summary, covered)
        }),
        None => {
            tracing::debug!("the summary is late; the turn commits without it");
            summarizer.report(SummaryOutcome::Late);
            if fresh {
                summarizer.run_late(entry.call.clone());
            }
            late.keep(id, entry);
            None
        }
    }
}

/// Starts the summary call of `chunk` (extending `old`, covering up to `upto`): a future
/// that owns what it needs, so that it can outlive the turn.
fn start(
    summarizer: &Summarizer,
    id: &ConversationId,
    old: Option<Summary>,
    chunk: Vec<StoredMessage>,
    upto: u64,
    counter: &Arc<dyn TokenCounter>,
) -> Call {
    let (summarizer, id, counter) = (summarizer.clone(), id.clone(), Arc::clone(counter));
    async move {
        match summarizer.summarize(old.as_ref(), &chunk, upto, counter.as_ref()).await {
            Ok(summary) => Some(summary),
            Err(e) => {
                tracing::warn!(kind = ?e.kind(), "summary failed; the evicted messages stay stored for a later turn");
                tracing::trace!(conversation = %id, error = %e, "the summary call that failed");
                summarizer.report(SummaryOutcome::Failed(e.kind()));
                None
            }
        }
    }
    .boxed()
    .shared()
}

/// How long [`Summarizer::wait`] waits by default.
pub(crate) const DEFAULT_SUMMARY_WAIT: Duration = Duration::from_secs(2);
