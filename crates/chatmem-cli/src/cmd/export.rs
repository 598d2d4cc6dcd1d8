//! `chatmem export`: every conversation of a store (or the ones named), one [`Line`] each,
//! to stdout or to a file that appears only once complete. Reads an existing store; creates
//! nothing.
//!
//! It streams: ids come a page at a time from `list`, and only one conversation is held at a
//! time, its messages read a page at a time from `history`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chatmem::{ChatMemory, ConversationId, Store};

use crate::args::ExportArgs;
use crate::line_format::{FORMAT, Line, Record};
use crate::progress::{self, Progress};
use crate::stores::Access;

/// Ids per `list` page.
const IDS_PAGE: usize = 1000;
/// Messages per `history` page.
const MESSAGES_PAGE: usize = 5000;
/// Reads of one conversation before giving up when other writers keep changing it.
const ATTEMPTS: u32 = 5;

/// Runs `chatmem export`.
pub(crate) async fn run(args: ExportArgs) -> anyhow::Result<()> {
    let only = args
        .conversations
        .iter()
        .map(|id| ConversationId::new(id.as_str()).context("--conversation"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let memory = ChatMemory::new(args.store.open(Access::Read).await?);
    let mut progress = progress::Progress::new("exported");
    match &args.output {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            export(&memory, &only, &mut out, &mut progress).await?;
            out.flush().context("writing to stdout")?;
        }
        Some(path) => {
            // Written beside the file and renamed over it when complete: a failed export
            // leaves no half file under the name asked for.
            let partial = partial_path(path);
            let result = async {
                let file =
                    std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
                let mut out = std::io::BufWriter::new(file);
                export(&memory, &only, &mut out, &mut progress).await?;
                out.into_inner()
                    .map_err(std::io::IntoInnerError::into_error)
                    .and_then(|f| f.sync_all())
                    .with_context(|| format!("writing {}", partial.display()))?;
                std::fs::rename(&partial, path).with_context(|| format!("renaming to {}", path.display()))
            }
            .await;
            if result.is_err() {
                let _ = std::fs::remove_file(&partial);
            }
            result?;
        }
    }
    progress.finish();
    Ok(())
}

/// `FILE.partial` beside `FILE`.
fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Writes the conversations `only` names (all when empty) of `memory`'s store to `out`.
async fn export<S: Store>(
    memory: &ChatMemory<S>,
    only: &[ConversationId],
    out: &mut impl Write,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    if !only.is_empty() {
        for id in only {
            if !write_one(memory, id, out, progress).await? {
                bail!("no conversation {:?} in the store", id.as_str());
            }
        }
        return Ok(());
    }
    let mut after = None;
    loop {
        let page = memory.list(after.as_ref(), IDS_PAGE).await?;
        for id in &page.ids {
            // One that expired since the list was read is simply not there any more.
            write_one(memory, id, out, progress).await?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

/// Writes conversation `id`; false if it does not exist.
async fn write_one<S: Store>(
    memory: &ChatMemory<S>,
    id: &ConversationId,
    out: &mut impl Write,
    progress: &mut Progress,
) -> anyhow::Result<bool> {
    let Some(line) = read_one(memory.store(), id).await? else {
        return Ok(false);
    };
    let messages = line.messages.len() as u64;
    serde_json::to_writer(&mut *out, &line)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .context("writing the export")?;
    progress.messages(messages);
    progress.conversation();
    Ok(true)
}

/// Conversation `id` as one consistent [`Line`], or `None` if it does not exist. The state
/// and the messages are two reads; if another writer committed between them (the version
/// moved), they are read again.
async fn read_one(store: &impl Store, id: &ConversationId) -> anyhow::Result<Option<Line>> {
    let failed = |source| chatmem::Error::Store { id: id.clone(), source };
    for _ in 0..ATTEMPTS {
        let snapshot = store.load(id).await.map_err(failed)?;
        if !snapshot.exists() {
            return Ok(None);
        }
        let mut messages: Vec<Record> = Vec::new();
        let mut after = 0;
        loop {
            let page = store.history(id, after, MESSAGES_PAGE).await.map_err(failed)?;
            let full = page.len() == MESSAGES_PAGE;
            let Some(last) = page.last() else { break };
            after = last.seq;
            messages.extend(page.into_iter().map(Record::from));
            if !full || after + 1 >= snapshot.next_seq {
                break;
            }
        }
        let again = store.load(id).await.map_err(failed)?;
        if again.version != snapshot.version {
            continue;
        }
        return Ok(Some(Line {
            format: FORMAT,
            id: id.clone(),
            window_start: snapshot.window_start,
            next_seq: snapshot.next_seq,
            system: snapshot.system.map(Record::from),
            messages,
            summary: snapshot.summary,
        }));
    }
    bail!(
        "conversation {:?} changed on every one of {ATTEMPTS} reads; export it again when it is quiet",
        id.as_str()
    )
}
