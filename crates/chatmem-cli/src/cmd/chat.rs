//! `chatmem chat`: talk to a model through conversation memory.
//!
//! On a terminal it is an interactive chat that streams answers. With stdin not a terminal
//! it reads one user message per line and writes one answer per line (newlines in an answer
//! written as `\n`, backslashes as `\\`), so it can sit in a pipeline.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use chatmem::{ChatMemory, ConversationId, Facts, Message, Role, Store, UserId};
use chatmem_advisor::{MemoryAdvisor, TurnEvent, TurnRequest};
use chatmem_openai::{OpenAiModel, Provider};
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::args::ChatCommand;

/// Chat with a model; each turn carries the conversation's memory and is stored after it.
#[derive(clap::Args, Debug)]
pub(crate) struct ChatArgs {
    /// The conversation to talk in: its memory is sent with each message and updated after.
    #[arg(long, value_name = "ID")]
    conversation: String,
    /// The user talking: their facts (`chatmem facts`) are sent with each turn, right after
    /// the system message. Needs a store that keeps facts.
    #[arg(long, value_name = "U")]
    user: Option<String>,
    /// A system message; it replaces the stored one when its text differs.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// deepseek (key from DEEPSEEK_API_KEY, the default), openai (OPENAI_API_KEY) or ollama
    /// (no key).
    #[arg(long, value_name = "PROVIDER")]
    provider: Option<Provider>,
    /// An OpenAI-compatible base URL, overriding the provider's. Without --provider the key
    /// is read from OPENAI_API_KEY if set, and --model is required.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model name (default: the provider's, e.g. deepseek-chat).
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// Print what each model call is sent (system message, summary, the user's facts, window,
    /// recalled messages and the new message) to stderr before it is made.
    #[arg(long)]
    show_memory: bool,
}

/// Runs `chatmem chat` (the store is created if missing).
pub(crate) async fn run(command: ChatCommand) -> Result<()> {
    let summarizer = command.memory.summary.summarizer(|model| command.chat.model(model))?;
    let user = command.chat.user()?;
    let memory = command.memory.open(summarizer).await?;
    let memory = match &user {
        Some(_) => with_facts(memory)?,
        None => memory,
    };
    chat(command.chat, user, memory).await
}

/// `memory` sending each user's facts with their turns; a store that keeps none is refused.
fn with_facts(memory: ChatMemory<Arc<dyn Store>>) -> Result<ChatMemory<Arc<dyn Store>>> {
    crate::cmd::facts::check_store(memory.store().as_ref()).context("--user")?;
    Ok(memory.with_facts(Some(Facts::new()))?)
}

/// The chat itself, over `memory`.
async fn chat(args: ChatArgs, user: Option<UserId>, memory: ChatMemory<Arc<dyn Store>>) -> Result<()> {
    let id = ConversationId::new(args.conversation.clone())?;
    let model = args.model(None)?;
    crate::recall::warm(&memory).await;
    let advisor = MemoryAdvisor::new(model, memory);
    let request = |text: String| {
        let mut turn = TurnRequest::user(text);
        if let Some(user) = &user {
            turn = turn.with_user(user.clone());
        }
        match &args.system {
            Some(system) => turn.with_system(system.clone()),
            None => turn,
        }
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "conversation {id} with {} at {}; an empty line is skipped, Ctrl-D quits",
            advisor.get_ref().model(),
            advisor.get_ref().base_url()
        );
    }
    loop {
        if interactive {
            print!("> ");
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next_line().await? else { break };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if args.show_memory {
            let mut said = Vec::new();
            if let Some(system) = &args.system {
                said.push(Message::system(system.clone()));
            }
            said.push(Message::user(text));
            show_memory(&would_send(advisor.memory(), &id, user.as_ref(), said).await?);
        }
        if interactive {
            // A failed turn is reported and the chat goes on; nothing of it was stored.
            if let Err(e) = stream_turn(&advisor, &id, request(text.to_string())).await {
                eprintln!("\nerror: {}", crate::report::error_line(&e));
            }
        } else {
            let turn = advisor.call(&id, request(text.to_string())).await?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", one_line(&turn.text()))?;
            out.flush()?;
        }
    }
    crate::recall::settle(advisor.memory()).await;
    Ok(())
}

impl ChatArgs {
    /// The `--user`, checked.
    fn user(&self) -> Result<Option<UserId>> {
        self.user
            .as_deref()
            .map(|u| UserId::new(u).context("--user"))
            .transpose()
    }

    /// The model for the provider / base URL / model flags, or the model named `name` on the
    /// same endpoint; a missing API key is a one-line error naming the variable.
    pub(crate) fn model(&self, name: Option<&str>) -> Result<OpenAiModel> {
        build_model(self, name)
    }
}

fn build_model(args: &ChatArgs, name: Option<&str>) -> Result<OpenAiModel> {
    let mut builder = match (args.provider, &args.base_url) {
        (Some(p), _) => p.builder(),
        (None, Some(_)) => {
            if args.model.is_none() {
                bail!("--model is required with --base-url and no --provider");
            }
            match std::env::var("OPENAI_API_KEY") {
                Ok(key) if !key.trim().is_empty() => OpenAiModel::builder().api_key(key),
                _ => OpenAiModel::builder().no_api_key(),
            }
        }
        (None, None) => Provider::DeepSeek.builder(),
    };
    if let Some(url) = &args.base_url {
        builder = builder.base_url(url.clone());
    }
    if let Some(m) = name.or(args.model.as_deref()) {
        builder = builder.model(m.to_owned());
    }
    Ok(builder.build()?)
}

/// One streamed turn: answer text to stdout as it arrives.
async fn stream_turn<M: chatmem::ChatModel, S: Store>(
    advisor: &MemoryAdvisor<M, S>,
    id: &ConversationId,
    request: TurnRequest,
) -> Result<(), chatmem_advisor::Error> {
    let mut stream = advisor.stream(id, request).await?;
    let mut out = std::io::stdout();
    while let Some(event) = stream.next().await {
        match event? {
            TurnEvent::Delta(d) => {
                if let Some(text) = d.content {
                    // A closed stdout ends the chat at the next read; not worth failing here.
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                }
            }
            TurnEvent::ToolResult(_) => {}
            TurnEvent::Done(_) => {
                let _ = writeln!(out);
            }
            _ => {}
        }
    }
    Ok(())
}

/// What the model call for `said` would be sent: the turn as the advisor begins it (the
/// user's facts and recall included), dropped uncommitted.
async fn would_send(
    memory: &ChatMemory<Arc<dyn Store>>,
    id: &ConversationId,
    user: Option<&UserId>,
    said: Vec<Message>,
) -> Result<Vec<Message>> {
    let mut turn = match user {
        Some(user) => memory.begin_as(id, user).await?,
        None => memory.begin(id).await?,
    };
    turn.push_unstored(said);
    turn.recall().await?;
    Ok(turn.prompt().into_iter().cloned().collect())
}

fn show_memory(window: &[Message]) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "--- memory: {} message(s)", window.len());
    for m in window {
        let text = one_line(&m.text().unwrap_or_default());
        let calls: Vec<String> = m
            .tool_calls()
            .iter()
            .map(|c| format!("{}({})", c.name, c.arguments))
            .collect();
        let role = match m.role() {
            Role::Tool => format!("tool[{}]", m.tool_call_id().unwrap_or_default()),
            r => r.to_string(),
        };
        if calls.is_empty() {
            let _ = writeln!(err, "{role}: {text}");
        } else {
            let _ = writeln!(err, "{role}: {text} -> {}", calls.join(", "));
        }
    }
    let _ = writeln!(err, "---");
}

/// The text on one line: `\` as `\\`, line breaks as `\n` / `\r`.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_stay_on_one_line() {
        assert_eq!(one_line("a\nb\\c\r"), "a\\nb\\\\c\\r");
    }
}
