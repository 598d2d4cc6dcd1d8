//! What a turn's commit summarizes: the messages its plan leaves pending (evicted, not yet
//! covered by the summary), oldest first and at most one chunk, sent to the
//! [`Summarizer`]'s model. A failed summary fails nothing: the messages stay stored and
//! pending for a later turn.

use crate::commit::Commit;
use crate::id::ConversationId;
use crate::store::{Snapshot, Store};
use crate::summary::{Summarizer, Summary};
use crate::tokens::TokenCounter;

/// A new summary covering what `planned` (a commit planned on `snapshot`) leaves pending,
/// with the `upto` of the summary it extends; `None` when nothing is pending or the summary
/// could not be made.
pub(crate) async fn pending_summary<S: Store>(
    store: &S,
    id: &ConversationId,
    summarizer: &Summarizer,
    counter: &dyn TokenCounter,
    snapshot: &Snapshot,
    planned: &Commit,
) -> Option<(Summary, u64)> {
    let covered = snapshot.summary.as_ref().map_or(0, |s| s.upto);
    let end = planned.window_start(); // pending: covered < seq < end
    if end <= covered.saturating_add(1) {
        return None;
    }
    let mut pending = Vec::new();
    // A backlog below the loaded window (a failed summary, an import) comes from history.
    let mut complete = true;
    if covered.saturating_add(1) < snapshot.window_start {
        let limit = summarizer.chunk_limit();
        let page = match store.history(id, covered, limit).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(conversation = %id, error = %e, "could not read messages to summarize; they stay pending");
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
    let chunk = summarizer.chunk_of(&pending);
    let last = chunk.last()?;
    let upto = if complete && chunk.len() == pending.len() {
        end - 1
    } else {
        last.seq
    };
    match summarizer
        .summarize(snapshot.summary.as_ref(), chunk, upto, counter)
        .await
    {
        Ok(summary) => Some((summary, covered)),
        Err(e) => {
            tracing::warn!(conversation = %id, error = %e, "summary failed; the evicted messages stay stored for a later turn");
            None
        }
    }
}
