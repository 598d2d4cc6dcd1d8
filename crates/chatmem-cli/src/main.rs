//! The `chatmem` command: trim and count message lists, and (with a store) inspect and edit
//! conversations.
//!
//! Every failure prints one line on stderr and exits with code 2.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, TokenCounter, Tokenizer, TurnBoundary, WindowPolicy};
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
            (_, Some(t)) => WindowPolicy::tokens(t)?,
            (Some(n), None) => WindowPolicy::messages(n)?,
            (None, None) => WindowPolicy::default(),
        };
        Ok(policy.with_boundary(boundary))
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
        Err(_) => Err(format!("{s:?} is not a whole number")),
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
            let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
            eprintln!("chatmem: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chatmem: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: every layer of the error chain, outermost first.
            let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
            eprintln!("chatmem: {}", chain.join(": ").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Trim(args) => trim(args).await,
        Command::Count(args) => count(args),
    }
}

fn read_messages() -> anyhow::Result<Vec<Message>> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).context("reading stdin")?;
    Ok(chatmem::parse_messages(&input)?)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

async fn trim(args: TrimArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(args.policy.policy()?)
        .counter(args.policy.counter())
        .build();
    let id = ConversationId::new("trim")?;
    memory.add(&id, messages).await?;
    print_json(&memory.get(&id).await?)
}

fn count(args: CountArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let counter = Tokenizer::from(args.tokenizer).counter();
    println!("{}", counter.count_messages(&messages));
    Ok(())
}
