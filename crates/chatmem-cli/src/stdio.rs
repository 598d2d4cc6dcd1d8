//! Messages in on stdin, results out on stdout; a failed read or write is an error, never a
//! panic.

use std::io::{Read, Write};

use anyhow::Context;
use chatmem::Message;

/// The JSON array of messages on stdin.
pub(crate) fn read_messages() -> anyhow::Result<Vec<Message>> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).context("reading stdin")?;
    if input.trim().is_empty() {
        anyhow::bail!("stdin is empty: expected a JSON array of messages");
    }

    Ok(chatmem::parse_messages(&input)?)
}

/// Writes `value` and a newline to stdout; a failed write is an error (never a panic).
pub(crate) fn write_line(value: impl std::fmt::Display) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}").context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

/// Writes `value` as pretty JSON and a newline to stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    // Serialised first, so that a failed write is an `io::Error` (a closed pipe is then told
    // apart from a full disk).
    let json = serde_json::to_string_pretty(value)?;
    write_line(json)
}
