//! `chatmem reindex`: embeds every indexed message of a store that lacks a vector of the
//! given model (all of them after a model change), conversation by conversation, with a
//! progress line. What is done is kept as it goes: after a kill, the same command goes on
//! from what is still missing. It writes vectors only: no message is changed or dropped.

use anyhow::{Context, Result, bail};
use chatmem::{ConversationId, Store};

use crate::args::StoreArgs;
use crate::progress::Progress;
use crate::recall::{EmbeddingArgs, check_vectors};
use crate::stores::Access;

/// How many messages one round embeds (and one store read lists).
const PAGE: usize = 64;

/// `chatmem reindex`: the store and the embedding model.
#[derive(clap::Args, Debug)]
pub(crate) struct ReindexCommand {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    embedding: EmbeddingArgs,
    /// Only this conversation (default: every conversation of the store).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
}

/// Runs `chatmem reindex`.
pub(crate) async fn run(command: ReindexCommand) -> Result<()> {
    let Some(embeddings) = command.embedding.embeddings()? else {
        bail!("reindex needs --embedding-base-url and --embedding-model");
    };
    let store = command.store.open(Access::Write).await?;
    check_vectors(store.as_ref())?;
    embeddings
        .calibrate()
        .await
        .context("the embedding model did not answer")?;
    let dim = embeddings
        .dimension()
        .context("the embedding model answered no dimension")?;
    let model = embeddings.model().to_owned();
    let mut progress = Progress::new("embedded");
    let (mut conversations, mut messages) = (0u64, 0u64);
    let one = |id: ConversationId| {
        let (store, embeddings, model) = (&store, &embeddings, &model);
        async move {
            // Seqs start at 1 (a conversation's first message), so after 0 is from the start.
            let mut after = 0u64;
            let mut kept = 0u64;
            loop {
                let page = store.unembedded(&id, model, dim, after, PAGE).await?;
                let Some(last) = page.last() else { break };
                after = last.message.seq;
                let n = embeddings
                    .embed_indexed(store.as_ref(), &id, &page)
                    .await
                    .with_context(|| format!("embedding conversation {id}"))?;
                kept += n as u64;
            }
            anyhow::Ok(kept)
        }
    };
    match &command.conversation {
        Some(id) => {
            let n = one(ConversationId::new(id.clone())?).await?;
            progress.messages(n);
            progress.conversation();
            (conversations, messages) = (1, n);
        }
        None => {
            let mut after: Option<ConversationId> = None;
            loop {
                let page = store.list(after.as_ref(), 100).await?;
                for id in &page.ids {
                    let n = one(id.clone()).await?;
                    progress.messages(n);
                    progress.conversation();
                    conversations += 1;
                    messages += n;
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
    }
    progress.finish();
    eprintln!("chatmem: embedded {messages} message(s) in {conversations} conversation(s) with {model} ({dim} values)");
    Ok(())
}
