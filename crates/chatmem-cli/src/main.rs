//! The `chatmem` command: conversation memory for LLM applications from the shell.
//!
//! Without a store, `trim` applies a window policy to a JSON array of messages and `count`
//! counts its tokens. With a store (`--store URL`, `CHATMEM_STORE`, or an SQLite file in the
//! user's data directory): `add`, `get`, `history`, `recall`, `list`, `clear` and `purge`
//! inspect and edit conversations, `chat` talks to a model through the memory, `serve` offers
//! the memory over HTTP (crate `chatmem-server`), and `export` / `import` move conversations
//! between stores as JSON Lines. `get`, `history`, `recall`, `list` and `export` only read:
//! they open an existing store and never create one.
//!
//! Layout: `args.rs` is the command line, `cmd/` holds one module per command, `stores.rs`
//! opens a store from its URL; this file only parses, starts the runtime and dispatches.
//! Every failure prints one line on stderr and exits with code 2.

mod args;
mod cmd;
mod line_format;
mod logs;
mod progress;
mod recall;
mod report;
mod stdio;
mod stores;
mod summarize;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

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
    // `serve` logs each request (its operator needs them); the other commands keep stderr for
    // their own messages unless RUST_LOG asks for logs.
    let logs = match &cli.command {
        Command::Serve(command) => logs::install(command.serve.log_format()),
        _ if logs::asked_for() => logs::install(logs::LogFormat::Text),
        _ => Ok(()),
    };
    if let Err(e) = logs {
        eprintln!("chatmem: {}", report::error_line(e.as_ref()));
        return ExitCode::from(2);
    }
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
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`chatmem list | head -1`): nothing to say.
        Err(e) if report::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chatmem: {}", report::error_line(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// Runs one command.
async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Trim(args) => cmd::trim::run(args).await,
        Command::Count(args) => cmd::count::run(args),
        Command::Add(args) => cmd::add::run(args).await,
        Command::Get(args) => cmd::get::run(args).await,
        Command::History(args) => cmd::history::run(args).await,
        Command::Recall(args) => cmd::recall::run(args).await,
        Command::List(args) => cmd::list::run(args).await,
        Command::Clear(args) => cmd::clear::run(args).await,
        Command::Purge(args) => cmd::purge::run(args).await,
        Command::Chat(args) => cmd::chat::run(args).await,
        Command::Serve(args) => cmd::serve::run(args).await,
        Command::Export(args) => cmd::export::run(args).await,
        Command::Import(args) => cmd::import::run(args).await,
        Command::Reindex(args) => cmd::reindex::run(args).await,
        Command::Facts(args) => cmd::facts::run(args).await,
    }
}
