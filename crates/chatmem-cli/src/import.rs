//! `chatmem import`: conversations written by `chatmem export`, one [`Line`] at a time, each
//! rebuilt exactly (sequence numbers, token counts, system message, window start).
//!
//! A line is read and checked whole before anything of it is written. A conversation larger
//! than one commit may carry (`ChatMemory::max_batch`) is written in several commits; if one
//! of them fails, what the earlier ones wrote is deleted again, so no conversation is left
//! half-imported (unless that delete fails too, which the error then says). Meanwhile other
//! clients can see the conversation grow; its window is set by the last commit.

use std::io::BufRead;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use chatmem::{ChatMemory, Commit, Retention, Store, StoredMessage};

use crate::line_format::{self, Line};
use crate::progress::Progress;

/// What to do with each conversation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Replace a conversation that exists instead of refusing it.
    pub(crate) replace: bool,
    /// Expire each imported conversation this long after it was imported.
    pub(crate) ttl: Option<Duration>,
}

/// Imports every line of `input` into `memory`'s store, in order; stops at the first error.
pub(crate) async fn run<S: Store>(
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
        let text = if number == 1 { text.trim_start_matches('\u{feff}') } else { text };
        if text.trim().is_empty() {
            continue;
        }
        let line = line_format::parse(number, text)?;
        write_one(memory, line, options, progress).await.with_context(|| match imported {
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
    let (max_messages, max_bytes) = memory.max_batch();
    let system: Option<StoredMessage> = line.system.map(Into::into);
    // The system message travels in the last commit: keep room for it in every one.
    let max_bytes = max_bytes
        .saturating_sub(system.as_ref().map_or(0, |s| s.message.payload_len()))
        .max(1);
    let total = line.messages.len();
    let first_seq = line.messages.first().map_or(line.next_seq, |m| m.seq);
    let mut messages = line.messages.into_iter().map(StoredMessage::from).peekable();
    let mut builder = Commit::restore(first_seq)
        .retention(Retention::KeepHistory)
        .ttl(options.ttl);
    let mut written = 0;
    let mut system = system;
    loop {
        let (mut count, mut bytes) = (0, 0);
        while let Some(m) = messages.next_if(|m| {
            count == 0 || (count < max_messages && bytes + m.message.payload_len() <= max_bytes)
        }) {
            (count, bytes) = (count + 1, bytes + m.message.payload_len());
            builder = builder.append_stored(m);
        }
        let last = messages.peek().is_none();
        if last {
            builder = builder.window_start(line.window_start);
            if let Some(system) = system.take() {
                builder = builder.system_stored(system);
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
