//! The command line: [`Cli`] and its [`Command`]s, each command's flags, and the flag groups
//! several commands share (which store, which conversation, how memory is kept), with what
//! turns those flags into a store or a [`ChatMemory`].
//!
//! The flags of one feature live with its code: `chat`'s model flags in `cmd/chat.rs`,
//! `serve`'s listener flags in `cmd/serve.rs`, `--summarize` in `summarize.rs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use chatmem::{
    ChatMemory, ClearSpec, ConversationId, PolicySpec, Retention, Store, Summarizer, TokenCounter, Tokenizer,
    TurnBoundary, WindowPolicy,
};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cmd::{chat, recall as recall_cmd, serve};
use crate::recall::{self, RecallArgs};
use crate::stores::{self, Access};
use crate::summarize;

/// Conversation memory for LLM applications: keep a conversation's messages in a store and
/// give back the window a model should see.
#[derive(Parser, Debug)]
#[command(
    name = "chatmem",
    version,
    about = "Conversation memory for LLM applications: trim and count messages; add, get, history, \
             recall, list, clear and purge stored conversations; chat, serve, export and import",
    long_about = "Conversation memory for LLM applications.

Without a store, `trim` applies a window policy to a JSON array of messages on stdin and
`count` counts its tokens.

With a store (--store URL, or CHATMEM_STORE; an SQLite file in the user's data directory by
default): `add` appends messages to a conversation, `get` prints its window, `history`
everything stored for it, `recall` what recall finds in it for a question, `list` the
conversation ids, `clear` deletes a conversation and `purge` the expired ones; `chat` talks to
a model through the memory, `serve` offers the memory over HTTP, `export` and `import` move
conversations between stores as JSON Lines.

`get`, `history`, `recall`, `list` and `export` only read: they open an existing store and
never create one."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Read a JSON array of messages on stdin, add them to an empty memory, print the window.
    Trim(TrimArgs),
    /// Read a JSON array of messages on stdin and print its token count.
    Count(CountArgs),
    /// Add a JSON array of messages (stdin) to a conversation, as one atomic batch.
    Add(MemoryArgs),
    /// Print a conversation's window (system message first) as a JSON array.
    Get(MemoryArgs),
    /// Print everything stored for a conversation as a JSON array.
    History(ConversationArgs),
    /// Print, as JSON, the messages recall finds for a question among those that left a
    /// conversation's window, best first, each with what a turn would do with it.
    Recall(recall_cmd::RecallCommand),
    /// Print the conversation ids, one per line.
    List(StoreArgs),
    /// Delete a conversation.
    Clear(ConversationArgs),
    /// Delete expired conversations now and print how many.
    Purge(StoreArgs),
    /// Chat with a model through conversation memory (interactive on a terminal; one message
    /// per line in and one answer per line out otherwise).
    Chat(ChatCommand),
    /// Serve conversation memory over HTTP (REST API; see SERVER.md).
    Serve(ServeCommand),
    /// Write conversations as JSON Lines, one conversation per line with all its messages
    /// (see "Export and import" in docs/cli.md).
    Export(ExportArgs),
    /// Read conversations written by `chatmem export` into a store, each exactly as it was.
    Import(ImportArgs),
    /// Embed every indexed message that lacks a vector of the embedding model (resumable:
    /// run it again after an interruption; it changes no message).
    Reindex(crate::cmd::reindex::ReindexCommand),
    /// A user's facts by hand: list, add, edit, pin, unpin, rm, history, forget (JSON out).
    Facts(crate::cmd::facts::FactsCommand),
}

#[derive(Args, Debug)]
pub(crate) struct TrimArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

#[derive(Args, Debug)]
pub(crate) struct CountArgs {
    /// The tokenizer used to count tokens: cl100k (or cl100k_base), o200k (or o200k_base) or
    /// heuristic.
    #[arg(long, value_name = "NAME", default_value_t = Tokenizer::Cl100k)]
    pub(crate) tokenizer: Tokenizer,
}

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    /// Export only this conversation (repeat for more) [default: every conversation].
    #[arg(long = "conversation", value_name = "ID")]
    pub(crate) conversations: Vec<String>,
    /// Write to FILE (replaced only when the export is complete) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ImportArgs {
    /// Read FILE instead of stdin.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) input: Option<PathBuf>,
    /// Replace a conversation that exists in the store (it is deleted first) instead of
    /// refusing to import it.
    #[arg(long)]
    pub(crate) replace: bool,
    /// Expire each imported conversation this long after the import (e.g. 30m, 12h, 7days)
    /// [default: never; an export does not carry expiry times].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
}

/// `chatmem serve`: its listener and upstream flags, then the memory's.
#[derive(Args, Debug)]
pub(crate) struct ServeCommand {
    #[command(flatten)]
    pub(crate) serve: serve::ServeArgs,
    #[command(flatten)]
    pub(crate) memory: ModelMemoryArgs,
}

/// `chatmem chat`: its model and conversation flags, then the memory's.
#[derive(Args, Debug)]
pub(crate) struct ChatCommand {
    #[command(flatten)]
    pub(crate) chat: chat::ChatArgs,
    #[command(flatten)]
    pub(crate) memory: ModelMemoryArgs,
}

/// The memory of a command that calls a model (`serve`, `chat`): the store, how memory is kept,
/// and the summaries — one list, in one order in `--help`.
#[derive(Args, Debug)]
pub(crate) struct ModelMemoryArgs {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) options: MemoryOptions,
    #[command(flatten)]
    pub(crate) summary: summarize::SummaryArgs,
}

impl ModelMemoryArgs {
    /// The memory over the store, opened for writing (created if missing), with `summarizer`.
    pub(crate) async fn open(&self, summarizer: Option<Summarizer>) -> anyhow::Result<ChatMemory<Arc<dyn Store>>> {
        // Flags that contradict each other are refused before the store is created.
        self.options.retention()?;
        self.options.memory(self.store.open(Access::Write).await?, summarizer)
    }
}

/// Which store to use.
#[derive(Args, Debug, Clone)]
pub(crate) struct StoreArgs {
    /// Store URL: memory:, sqlite:PATH, postgres://…, mysql://…, redis://… [default: an SQLite
    /// file in the user's data directory]
    #[arg(long, value_name = "URL", env = stores::STORE_ENV)]
    pub(crate) store: Option<String>,
}

impl StoreArgs {
    /// Opens the store the flag (or the environment, or the default) names, for `access`.
    pub(crate) async fn open(&self, access: Access) -> anyhow::Result<Arc<dyn Store>> {
        let url = match &self.store {
            Some(url) => url.clone(),
            None => stores::default_url()?,
        };
        stores::open(&url, access).await
    }
}

#[derive(Args, Debug)]
pub(crate) struct ConversationArgs {
    /// The conversation id.
    #[arg(long, value_name = "ID")]
    pub(crate) conversation: String,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
}

impl ConversationArgs {
    /// The conversation id, and a memory with the default settings over the store.
    pub(crate) async fn memory(&self, access: Access) -> anyhow::Result<(ChatMemory<Arc<dyn Store>>, ConversationId)> {
        let id = ConversationId::new(self.conversation.as_str()).context("--conversation")?;
        Ok((ChatMemory::new(self.store.open(access).await?), id))
    }
}

#[derive(Args, Debug)]
pub(crate) struct MemoryArgs {
    #[command(flatten)]
    pub(crate) target: ConversationArgs,
    #[command(flatten)]
    pub(crate) options: MemoryOptions,
}

impl MemoryArgs {
    /// The conversation id, and a memory with the flags' settings over the store.
    pub(crate) async fn memory(&self, access: Access) -> anyhow::Result<(ChatMemory<Arc<dyn Store>>, ConversationId)> {
        let id = ConversationId::new(self.target.conversation.as_str()).context("--conversation")?;
        self.options.retention()?;
        let store = self.target.store.open(access).await?;
        Ok((self.options.memory(store, None)?, id))
    }
}

/// How memory is kept: window policy, retention, TTL, recall.
#[derive(Args, Debug)]
pub(crate) struct MemoryOptions {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Whether evicted messages are deleted or kept as history [default: drop-evicted;
    /// keep-history with --recall].
    #[arg(long, value_enum)]
    retention: Option<RetentionArg>,
    /// Expire the conversation this long after its last write (e.g. 30m, 12h, 7days).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    ttl: Option<Duration>,
    #[command(flatten)]
    pub(crate) recall: RecallArgs,
}

impl MemoryOptions {
    /// The retention the flags ask for: `--retention`, else keep-history with `--recall` (it
    /// searches what left the window) and drop-evicted without.
    ///
    /// # Errors
    /// `--recall` with `--retention drop-evicted`.
    pub(crate) fn retention(&self) -> anyhow::Result<Retention> {
        Ok(match (self.retention, self.recall.enabled()) {
            (Some(RetentionArg::DropEvicted), true) => bail!(
                "--recall searches the messages that left the window, so it keeps them: it cannot be combined with --retention drop-evicted (leave --retention out, or give keep-history)"
            ),
            (Some(RetentionArg::DropEvicted), false) | (None, false) => Retention::DropEvicted,
            (Some(RetentionArg::KeepHistory), _) | (None, true) => Retention::KeepHistory,
        })
    }

    /// A memory over `store` with these settings (and `summarizer`, if any).
    pub(crate) fn memory(
        &self,
        store: Arc<dyn Store>,
        summarizer: Option<Summarizer>,
    ) -> anyhow::Result<ChatMemory<Arc<dyn Store>>> {
        let retention = self.retention()?;
        let recall = self.recall.settings()?;
        if recall.is_some() {
            recall::check_store(store.as_ref(), "--recall")?;
        }
        let (policy, counter) = self.policy.build()?;
        let store_ref = Arc::clone(&store);
        let mut builder = ChatMemory::builder(store)
            .policy(policy)
            .counter(counter)
            .retention(retention);
        if let Some(recall) = recall {
            builder = builder.recall(recall);
        }
        if let Some(embeddings) = self.recall.embedding.embeddings()? {
            if !self.recall.enabled() {
                bail!("--embedding-base-url embeds what recall searches: give --recall K too");
            }
            recall::check_vectors(store_ref.as_ref())?;
            builder = builder.embeddings(embeddings);
        }
        if let Some(ttl) = self.ttl {
            builder = builder.ttl(ttl);
        }
        if let Some(summarizer) = summarizer {
            builder = builder.summarizer(summarizer);
        }
        Ok(builder.build()?)
    }
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum RetentionArg {
    DropEvicted,
    KeepHistory,
}

/// Window policy flags shared by the commands that apply a window: a [`PolicySpec`], whose
/// names and checks are the core's (a server request's `"policy"` is the same spec).
#[derive(Args, Debug, Clone)]
pub(crate) struct PolicyArgs {
    /// Keep at most N messages, the system message included (default 20).
    #[arg(long, value_name = "N", conflicts_with = "max_tokens", value_parser = positive)]
    max_messages: Option<usize>,
    /// Keep at most N tokens, the system message and list overhead included.
    #[arg(long, value_name = "N", value_parser = positive)]
    max_tokens: Option<usize>,
    /// The tokenizer used to count tokens: cl100k (or cl100k_base), o200k (or o200k_base) or
    /// heuristic [default: cl100k].
    #[arg(long, value_name = "NAME")]
    tokenizer: Option<Tokenizer>,
    /// Where the window may start: user (on a user message) or pair-safe (on any message that
    /// is not a tool result) [default: user].
    #[arg(long, visible_alias = "turn-boundary", value_name = "user|pair-safe")]
    boundary: Option<TurnBoundary>,
    /// Block eviction: once the window outgrows the budget, evict until it fits N (messages
    /// with --max-messages, tokens with --max-tokens); until then the prompt's beginning stays
    /// the same, so a provider's prompt cache serves it. N must be below the budget.
    #[arg(long, value_name = "N", value_parser = positive)]
    evict_to: Option<usize>,
    /// Clear old tool results from the prompt, never from memory: each is sent as a short
    /// placeholder naming the tool, the call and its size, except the KEEP most recent tool
    /// uses (1 to 1000). Under --max-tokens the window then holds more turns.
    #[arg(long, value_name = "KEEP")]
    clear_tool_results: Option<usize>,
    /// Clear only once the window, uncleared, would exceed N tokens [default: --max-tokens, or
    /// 100000 under --max-messages].
    #[arg(long, value_name = "N", requires = "clear_tool_results")]
    clear_trigger_tokens: Option<usize>,
    /// Clear in blocks that save at least N tokens each, so the prompt's beginning changes only
    /// when a block is cleared [default: 0, one result at a time].
    #[arg(long, value_name = "N", requires = "clear_tool_results")]
    clear_at_least_tokens: Option<usize>,
    /// Never clear the results of the tool NAME (repeat for more tools).
    #[arg(long, value_name = "NAME", requires = "clear_tool_results")]
    clear_exclude_tool: Vec<String>,
    /// Also send the cleared calls' arguments as {}.
    #[arg(long, requires = "clear_tool_results")]
    clear_inputs: bool,
}

impl PolicyArgs {
    /// The window policy and token counter the flags describe.
    pub(crate) fn build(&self) -> anyhow::Result<(WindowPolicy, Arc<dyn TokenCounter>)> {
        let spec = PolicySpec {
            max_messages: self.max_messages,
            max_tokens: self.max_tokens,
            evict_to: self.evict_to,
            tokenizer: self.tokenizer,
            boundary: self.boundary,
            clear_tool_results: self.clear_tool_results.map(|keep| ClearSpec {
                keep: Some(keep),
                trigger_tokens: self.clear_trigger_tokens,
                clear_at_least_tokens: self.clear_at_least_tokens,
                exclude_tools: (!self.clear_exclude_tool.is_empty()).then(|| self.clear_exclude_tool.clone()),
                clear_inputs: Some(self.clear_inputs),
            }),
        };
        Ok(spec.build()?)
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be longer than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (examples: 90s, 30m, 12h, 7days)")),
    }
}

/// Parses a whole number of at least 1.
pub(crate) fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number from 1 to {}", usize::MAX)),
    }
}
