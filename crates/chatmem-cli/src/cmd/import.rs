//! `chatmem import`: conversations written by `chatmem export`, one [`Line`] at a time, each
//! rebuilt exactly (sequence numbers, token counts, system message, window start).
//!
//! A line is read and checked whole before anything of it is written. A conversation larger
//! than one commit may carry (`ChatMemory::max_batch`, a `BatchLimits`) is written in several
//! commits; if one of them fails, what the earlier ones wrote is deleted again, so no conversation is left
//! half-imported (unless that delete fails too, which the error then says). Meanwhile other
//! clients can see the conversation grow; its window is set by the last commit.
//!
//! A missing store is created.

use std::io::BufRead;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use chatmem::store::{Commit, StoredMessage};
use chatmem::{ChatMemory, Retention, Store};

use crate::args::ImportArgs;
use crate::line_format::{self, Line};
use crate::progress::Progress;
use crate::stores::Access;

/// What to do with each conversation.
#[derive(Debug, Clone, Copy)]
struct Options {
    /// Replace a conversation that exists instead of refusing it.
    replace: bool,
    /// Expire each imported conversation this long after it was imported.
    ttl: Option<Duration>,
}

/// Runs `chatmem import`.
pub(crate) async fn run(args: ImportArgs) -> anyhow::Result<()> {
    let mut input: Box<dyn BufRead> = match &args.input {
        None => Box::new(std::io::stdin().lock()),
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
    };
    let memory = ChatMemory::new(args.store.open(Access::Write).await?);
    let options = Options {
        replace: args.replace,
        ttl: args.ttl,
    };
    let mut progress = Progress::new("imported");
    import_all(&memory, &mut input, options, &mut progress).await?;
    progress.finish();
    Ok(())
}

/// Imports every line of `input` into `memory`'s store, in order; stops at the first error.
async fn import_all<S: Store>(
    memory: &ChatMemory<S>,
    input: &mut impl BufRead,
    options: Options,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    let mut number = 0;
    let mut imported = 0;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf).context("reading the import")? == 0 {
            return Ok(());
        }
        number += 1;
        let text = std::str::from_utf8(&buf).map_err(|e| anyhow!("line {number}: not UTF-8: {e}"))?;
        // A UTF-8 byte-order mark (some editors write one) is not part of the JSON.
        let text = if number == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if text.trim().is_empty() {
            continue;
        }
        let line = line_format::parse(number, text)?;
        write_one(memory, line, options, progress)
            .await
            .with_context(|| match imported {
                0 => format!("line {number}"),
                n => format!("line {number} ({n} conversation(s) before it were imported)"),
            })?;
        imported += 1;
        progress.conversation();
    }
}

/// Rebuilds one conversation.
async fn write_one<S: Store>(
    memory: &ChatMemory<S>,
    line: Line,
    options: Options,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let store = memory.store();
    let id = line.id;
    let failed = |source| chatmem::Error::Store { id: id.clone(), source };
    if store.load(&id).await.map_err(failed)?.exists() {
        if !options.replace {
            bail!(
                "conversation {:?} exists in the store; pass --replace to overwrite it",
                id.as_str()
            );
        }
        store.clear(&id).await.map_err(failed)?;
    }
    let mut limits = memory.max_batch();
    let mut system: Option<StoredMessage> = line.system.map(Into::into);
    let mut summary = line.summary;
    // The system message travels in the last commit: keep room for it in every one.
    limits.bytes = limits
        .bytes
        .saturating_sub(system.as_ref().map_or(0, |s| s.message.payload_len()))
        .max(1);
    let total = line.messages.len();
    let first_seq = line.messages.first().map_or(line.next_seq, |m| m.seq);
    let mut messages = line.messages.into_iter().map(StoredMessage::from).peekable();
    // Indexed where the store can search, so recall finds what was imported.
    let mut builder = Commit::restore(first_seq)
        .retention(Retention::KeepHistory)
        .ttl(options.ttl)
        .index(store.searches());
    let mut written = 0;
    loop {
        let (mut count, mut bytes) = (0, 0);
        // A commit carries at least one message, whatever its size.
        while let Some(m) =
            messages.next_if(|m| count == 0 || limits.admits(count + 1, bytes + m.message.payload_len()))
        {
            (count, bytes) = (count + 1, bytes + m.message.payload_len());
            builder = builder.append_stored(m);
        }
        let last = messages.peek().is_none();
        if last {
            builder = builder.window_start(line.window_start);
            if let Some(system) = system.take() {
                builder = builder.system_stored(system);
            }
            if let Some(summary) = summary.take() {
                // The first summary of a conversation new to this store: it extends none.
                builder = builder.summary(summary, 0);
            }
        }
        // The line was checked against the rules `build` enforces: this does not fail.
        let commit = builder.build().map_err(failed)?;
        let next = commit.then();
        if let Err(e) = store.commit(&id, commit).await {
            let e = if e.is_conflict() {
                anyhow!(
                    "conversation {:?} was written by another client during the import",
                    id.as_str()
                )
            } else {
                anyhow::Error::from(failed(e))
            };
            if written == 0 {
                return Err(e.context("nothing of it was written"));
            }
            return Err(match store.clear(&id).await {
                Ok(_) => e.context(format!(
                    "importing stopped after {written} of {total} messages; what was written is deleted"
                )),
                Err(clear) => e.context(format!(
                    "importing stopped after {written} of {total} messages, which are still in the store: deleting them failed too ({})",
                    crate::report::error_line(&clear)
                )),
            });
        }
        written += count;
        progress.messages(count as u64);
        if last {
            return Ok(());
        }
        builder = next;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use chatmem::store::{Snapshot, StoreError, StoreErrorKind, StoredMessage};
    use chatmem::{ConversationId, InMemoryStore, Message, Page};

    use super::*;

    /// An in-memory store whose commit number `fail_at` (from 1) fails as a lost connection.
    #[derive(Debug, Default)]
    struct FailingAt {
        inner: InMemoryStore,
        commits: AtomicUsize,
        fail_at: usize,
    }

    #[async_trait]
    impl Store for FailingAt {
        async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
            self.inner.load(id).await
        }
        async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
            if self.commits.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
                return Err(StoreError::new(StoreErrorKind::Unavailable, "test: connection lost"));
            }
            self.inner.commit(id, commit).await
        }
        async fn history(
            &self,
            id: &ConversationId,
            after: u64,
            limit: usize,
        ) -> Result<Vec<StoredMessage>, StoreError> {
            self.inner.history(id, after, limit).await
        }
        async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
            self.inner.clear(id).await
        }
        async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
            self.inner.list(after, limit).await
        }
        async fn recent(&self, query: &chatmem::store::RecentQuery) -> Result<chatmem::store::RecentPage, StoreError> {
            self.inner.recent(query).await
        }
        fn searches(&self) -> bool {
            true
        }
        async fn search(
            &self,
            id: &ConversationId,
            query: &chatmem::store::SearchQuery,
        ) -> Result<chatmem::store::SearchResult, StoreError> {
            self.inner.search(id, query).await
        }
    }

    /// Five messages from seq 3, the window from seq 6, a system message set at seq 4.
    const LINE: &str = r#"{"format":1,"id":"c","window_start":6,"next_seq":8,"system":{"seq":4,"tokens":5,"message":{"role":"system","content":"s"}},"messages":[{"seq":3,"tokens":1,"message":{"role":"user","content":"u3"}},{"seq":4,"tokens":1,"message":{"role":"assistant","content":"a4"}},{"seq":5,"tokens":1,"message":{"role":"user","content":"u5"}},{"seq":6,"tokens":1,"counted_by":"heuristic","message":{"role":"user","content":"u6"}},{"seq":7,"tokens":1,"message":{"role":"assistant","content":"a7"}}],"summary":{"text":"u1 a2","upto":2,"tokens":9,"counted_by":"heuristic"}}"#;

    async fn import(fail_at: usize) -> (ChatMemory<FailingAt>, anyhow::Result<()>) {
        let store = FailingAt {
            fail_at,
            ..FailingAt::default()
        };
        // Two messages per commit: the five messages take three.
        let memory = ChatMemory::builder(store).max_batch(2, 1 << 20).build().unwrap();
        let options = Options {
            replace: false,
            ttl: None,
        };
        let result = import_all(&memory, &mut LINE.as_bytes(), options, &mut Progress::new("imported")).await;
        (memory, result)
    }

    #[tokio::test]
    async fn a_conversation_larger_than_a_batch_is_rebuilt_exactly() {
        let (memory, result) = import(0).await;
        result.unwrap();
        assert_eq!(memory.store().commits.load(Ordering::SeqCst), 3);
        let id = ConversationId::new("c").unwrap();
        let loaded = memory.store().load(&id).await.unwrap();
        assert_eq!((loaded.version, loaded.window_start, loaded.next_seq), (3, 6, 8));
        assert_eq!(loaded.system, Some(StoredMessage::new(4, 5, Message::system("s"))));
        let summary = loaded.summary.expect("the summary travels");
        assert_eq!((summary.text.as_str(), summary.upto, summary.tokens), ("u1 a2", 2, 9));
        let all = memory.store().history(&id, 0, 10).await.unwrap();
        assert_eq!(all.iter().map(|m| m.seq).collect::<Vec<_>>(), [3, 4, 5, 6, 7]);
        assert_eq!(all[3].counted_by.as_deref(), Some("heuristic"));
        assert_eq!(all[4].counted_by, None);
        // Indexed in the store that searches: recall finds what left the window.
        let found = memory.recall(&id, "u3 u5", 5).await.unwrap().unwrap();
        let seqs: Vec<u64> = found.considered.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, [5, 3]);
    }

    #[tokio::test]
    async fn a_failed_commit_leaves_nothing_of_the_conversation() {
        for (fail_at, said) in [
            (1, "nothing of it was written"),
            (
                3,
                "importing stopped after 4 of 5 messages; what was written is deleted",
            ),
        ] {
            let (memory, result) = import(fail_at).await;
            let e = format!("{:#}", result.expect_err("a commit failed"));
            assert!(e.starts_with("line 1: "), "{e}");
            assert!(e.contains(said) && e.contains("test: connection lost"), "{e}");
            let id = ConversationId::new("c").unwrap();
            assert!(!memory.store().load(&id).await.unwrap().exists(), "{e}");
        }
    }
}
