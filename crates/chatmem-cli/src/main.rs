//! The `chatmem` command: trim and count message lists, and (with a store) inspect and edit
//! conversations.
//!
//! Every failure prints one line on stderr and exits with code 2.

mod chat;
mod export;
mod import;
mod line_format;
mod progress;
mod report;
mod serve;
mod stores;
mod summarize;

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chatmem::{
    ChatMemory, ConversationId, InMemoryStore, Message, Retention, Store, Summarizer, TokenCounter, Tokenizer,
    TurnBoundary, WindowPolicy,
};
use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(name = "chatmem", version, about = "Conversation memory for LLM applications")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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
    /// Print the conversation ids, one per line.
    List(StoreArgs),
    /// Delete a conversation.
    Clear(ConversationArgs),
    /// Delete expired conversations now and print how many.
    Purge(StoreArgs),
    /// Chat with a model through conversation memory (interactive on a terminal; one message
    /// per line in and one answer per line out otherwise).
    Chat(ChatCommand),
    /// Serve conversation memory over HTTP (REST API; see the README's Server section).
    Serve(ServeCommand),
    /// Write conversations as JSON Lines, one conversation per line with all its messages
    /// (see the README's "Export and import" section).
    Export(ExportArgs),
    /// Read conversations written by `chatmem export` into a store, each exactly as it was.
    Import(ImportArgs),
}

#[derive(Args, Debug)]
struct ExportArgs {
    /// Export only this conversation (repeat for more) [default: every conversation].
    #[arg(long = "conversation", value_name = "ID")]
    conversations: Vec<String>,
    /// Write to FILE (replaced only when the export is complete) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
struct ImportArgs {
    /// Read FILE instead of stdin.
    #[arg(long, short, value_name = "FILE")]
    input: Option<PathBuf>,
    /// Replace a conversation that exists in the store (it is deleted first) instead of
    /// refusing to import it.
    #[arg(long)]
    replace: bool,
    /// Expire each imported conversation this long after the import (e.g. 30m, 12h, 7days)
    /// [default: never; an export does not carry expiry times].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    ttl: Option<Duration>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
struct ServeCommand {
    #[command(flatten)]
    serve: serve::ServeArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    options: MemoryOptions,
    #[command(flatten)]
    summary: summarize::SummaryArgs,
}

#[derive(Args, Debug)]
struct ChatCommand {
    #[command(flatten)]
    chat: chat::ChatArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    options: MemoryOptions,
    #[command(flatten)]
    summary: summarize::SummaryArgs,
}

/// Which store to use.
#[derive(Args, Debug, Clone)]
struct StoreArgs {
    /// Store URL: memory:, sqlite:PATH, postgres://…, redis://… [default: an SQLite file in the
    /// user's data directory]
    #[arg(long, value_name = "URL", env = stores::STORE_ENV)]
    store: Option<String>,
}

impl StoreArgs {
    async fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        let url = match &self.store {
            Some(url) => url.clone(),
            None => stores::default_url()?,
        };
        stores::open(&url).await
    }
}

#[derive(Args, Debug)]
struct ConversationArgs {
    /// The conversation id.
    #[arg(long, value_name = "ID")]
    conversation: String,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
struct MemoryArgs {
    #[command(flatten)]
    target: ConversationArgs,
    #[command(flatten)]
    options: MemoryOptions,
}

/// How memory is kept: window policy, retention, TTL.
#[derive(Args, Debug)]
struct MemoryOptions {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Whether evicted messages are deleted or kept as history.
    #[arg(long, value_enum, default_value_t = RetentionArg::DropEvicted)]
    retention: RetentionArg,
    /// Expire the conversation this long after its last write (e.g. 30m, 12h, 7days).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    ttl: Option<Duration>,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum RetentionArg {
    DropEvicted,
    KeepHistory,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be longer than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (examples: 90s, 30m, 12h, 7days)")),
    }
}

impl MemoryArgs {
    async fn memory(&self) -> anyhow::Result<(ChatMemory<Arc<dyn Store>>, ConversationId)> {
        let id = ConversationId::new(self.target.conversation.as_str()).context("--conversation")?;
        let store = self.target.store.open().await?;
        Ok((self.options.memory(store, None)?, id))
    }
}

impl MemoryOptions {
    fn memory(
        &self,
        store: Arc<dyn Store>,
        summarizer: Option<Summarizer>,
    ) -> anyhow::Result<ChatMemory<Arc<dyn Store>>> {
        let retention = match self.retention {
            RetentionArg::DropEvicted => Retention::DropEvicted,
            RetentionArg::KeepHistory => Retention::KeepHistory,
        };
        let mut builder = ChatMemory::builder(store)
            .policy(self.policy.policy()?)
            .counter(self.policy.counter())
            .retention(retention);
        if let Some(ttl) = self.ttl {
            builder = builder.ttl(ttl);
        }
        if let Some(summarizer) = summarizer {
            builder = builder.summarizer(summarizer);
        }
        Ok(builder.build()?)
    }
}

impl ConversationArgs {
    async fn memory(&self) -> anyhow::Result<(ChatMemory<Arc<dyn Store>>, ConversationId)> {
        let id = ConversationId::new(self.conversation.as_str()).context("--conversation")?;
        Ok((ChatMemory::new(self.store.open().await?), id))
    }
}

#[derive(Args, Debug)]
struct TrimArgs {
    #[command(flatten)]
    policy: PolicyArgs,
}

/// Window policy flags shared by the commands that apply a window.
#[derive(Args, Debug, Clone)]
struct PolicyArgs {
    /// Keep at most N messages, the system message included (default 20).
    #[arg(long, value_name = "N", conflicts_with = "max_tokens", value_parser = positive)]
    max_messages: Option<usize>,
    /// Keep at most N tokens, the system message and list overhead included.
    #[arg(long, value_name = "N", value_parser = positive)]
    max_tokens: Option<usize>,
    /// The tokenizer used to count tokens.
    #[arg(long, value_enum, default_value_t = TokenizerArg::Cl100k)]
    tokenizer: TokenizerArg,
    /// Where the window may start.
    #[arg(long, value_enum, default_value_t = BoundaryArg::User)]
    turn_boundary: BoundaryArg,
    /// Block eviction: once the window outgrows the budget, evict until it fits N (messages
    /// with --max-messages, tokens with --max-tokens); until then the prompt's beginning stays
    /// the same, so a provider's prompt cache serves it. N must be below the budget.
    #[arg(long, value_name = "N", value_parser = positive)]
    evict_to: Option<usize>,
}

#[derive(Args, Debug)]
struct CountArgs {
    /// The tokenizer used to count tokens.
    #[arg(long, value_enum, default_value_t = TokenizerArg::Cl100k)]
    tokenizer: TokenizerArg,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum TokenizerArg {
    Cl100k,
    O200k,
    Heuristic,
}

impl From<TokenizerArg> for Tokenizer {
    fn from(t: TokenizerArg) -> Self {
        match t {
            TokenizerArg::Cl100k => Tokenizer::Cl100k,
            TokenizerArg::O200k => Tokenizer::O200k,
            TokenizerArg::Heuristic => Tokenizer::Heuristic,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum BoundaryArg {
    User,
    PairSafe,
}

impl PolicyArgs {
    fn policy(&self) -> anyhow::Result<WindowPolicy> {
        let boundary = match self.turn_boundary {
            BoundaryArg::User => TurnBoundary::User,
            BoundaryArg::PairSafe => TurnBoundary::PairSafe,
        };
        let policy = match (self.max_messages, self.max_tokens) {
            (_, Some(t)) => WindowPolicy::try_tokens(t)?,
            (Some(n), None) => WindowPolicy::try_messages(n)?,
            (None, None) => WindowPolicy::default(),
        };
        let policy = policy.with_boundary(boundary);
        Ok(match self.evict_to {
            Some(n) => policy.evict_to(n)?,
            None => policy,
        })
    }

    fn counter(&self) -> Arc<dyn TokenCounter> {
        Tokenizer::from(self.tokenizer).counter()
    }
}

/// Parses a whole number of at least 1.
fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number from 1 to {}", usize::MAX)),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut line = lines.next().unwrap_or("invalid arguments").to_owned();
            // "the following required arguments were not provided:" names them on the next line.
            if line.ends_with(':')
                && let Some(next) = lines.next()
            {
                line = format!("{line} {next}");
            }
            eprintln!("chatmem: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    // The server uses every core; the other commands are short and start faster on one thread.
    let mut builder = match cli.command {
        Command::Serve(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chatmem: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`chatmem list | head -1`): nothing to say.
        Err(e) if report::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chatmem: {}", report::error_line(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Trim(args) => trim(args).await,
        Command::Count(args) => count(args),
        Command::Add(args) => {
            let messages = read_messages()?;
            let (memory, id) = args.memory().await?;
            memory.add(&id, messages).await?;
            Ok(())
        }
        Command::Get(args) => {
            let (memory, id) = args.memory().await?;
            print_json(&memory.get(&id).await?)
        }
        Command::History(args) => {
            let (memory, id) = args.memory().await?;
            print_json(&memory.history(&id).await?)
        }
        Command::Clear(args) => {
            let (memory, id) = args.memory().await?;
            if !memory.clear(&id).await? {
                eprintln!("chatmem: no conversation {:?} (nothing to clear)", id.as_str());
            }
            Ok(())
        }
        Command::List(args) => list(args).await,
        Command::Chat(args) => {
            let summarizer = args.summary.summarizer(|model| args.chat.model(model))?;
            let memory = args.options.memory(args.store.open().await?, summarizer)?;
            chat::run(args.chat, memory).await
        }
        Command::Serve(args) => {
            let summary_model = args.summary.required_model()?;
            let summarizer = args.summary.summarizer(|_| args.serve.summary_model(summary_model))?;
            let memory = args.options.memory(args.store.open().await?, summarizer)?;
            serve::serve(&args.serve, memory).await
        }
        Command::Export(args) => export(args).await,
        Command::Import(args) => import(args).await,
        Command::Purge(args) => {
            let memory = ChatMemory::new(args.open().await?);
            let purged = memory.purge_expired().await?;
            write_line(purged)
        }
    }
}

async fn list(args: StoreArgs) -> anyhow::Result<()> {
    const PAGE: usize = 1000;
    let memory = ChatMemory::new(args.open().await?);
    let mut out = std::io::stdout().lock();
    let mut after = None;
    loop {
        let page = memory.list(after.as_ref(), PAGE).await?;
        for id in &page.ids {
            writeln!(out, "{id}").context("writing to stdout")?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let only = args
        .conversations
        .iter()
        .map(|id| ConversationId::new(id.as_str()).context("--conversation"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let memory = ChatMemory::new(args.store.open().await?);
    let mut progress = progress::Progress::new("exported");
    match &args.output {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            export::run(&memory, &only, &mut out, &mut progress).await?;
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
                export::run(&memory, &only, &mut out, &mut progress).await?;
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

async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let mut input: Box<dyn BufRead> = match &args.input {
        None => Box::new(std::io::stdin().lock()),
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
    };
    let memory = ChatMemory::new(args.store.open().await?);
    let options = import::Options {
        replace: args.replace,
        ttl: args.ttl,
    };
    let mut progress = progress::Progress::new("imported");
    import::run(&memory, &mut input, options, &mut progress).await?;
    progress.finish();
    Ok(())
}

fn read_messages() -> anyhow::Result<Vec<Message>> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).context("reading stdin")?;
    if input.trim().is_empty() {
        anyhow::bail!("stdin is empty: expected a JSON array of messages");
    }

    Ok(chatmem::parse_messages(&input)?)
}

/// Writes `value` and a newline to stdout; a failed write is an error (never a panic).
fn write_line(value: impl std::fmt::Display) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}").context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    // Serialised first, so that a failed write is an `io::Error` (a closed pipe is then told
    // apart from a full disk).
    let json = serde_json::to_string_pretty(value)?;
    write_line(json)
}

async fn trim(args: TrimArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(args.policy.policy()?)
        .counter(args.policy.counter())
        .build()?;
    let id = ConversationId::new("trim")?;
    memory.add(&id, messages).await?;
    print_json(&memory.get(&id).await?)
}

fn count(args: CountArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let counter = Tokenizer::from(args.tokenizer).counter();
    write_line(counter.count_messages(&messages))
}
