//! The export line: one conversation per line of JSON Lines, as `chatmem export` writes it and
//! `chatmem import` reads it. Defined here only.
//!
//! ```text
//! {"format":1,"id":"demo","window_start":3,"next_seq":5,
//!  "system":{"seq":1,"tokens":9,"counted_by":"cl100k_base","message":{"role":"system","content":"be brief"}},
//!  "messages":[{"seq":3,"tokens":8,"counted_by":"cl100k_base","message":{"role":"user","content":"hi"}},
//!              {"seq":4,"tokens":8,"counted_by":"cl100k_base","message":{"role":"assistant","content":"hello"}}]}
//! ```
//! (one line in the file). Each record is a message as the store keeps it: its sequence number,
//! its token count and the counter that made it, and the message in chatmem's message JSON
//! (the codec in `chatmem::message`, the one every store uses). `messages` holds every kept
//! message, evicted ones included under `keep-history`, oldest first, with consecutive seqs
//! ending at `next_seq - 1`; the window is the system message and the messages from
//! `window_start` on. Stores keep no per-conversation policy: the window start is what the
//! policy made of the conversation, and it is carried as it is. A summarized conversation
//! also carries `"summary":{"text":…,"upto":…,"tokens":…,"counted_by":…}` (`upto`: the last
//! sequence it covers).

use anyhow::{Context, bail};
use chatmem::store::StoredMessage;
use chatmem::{ConversationId, Message, Summary};
use serde::{Deserialize, Serialize};

/// The format this chatmem writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// One conversation.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Line {
    /// Always [`FORMAT`]; a later format gets a new number.
    pub(crate) format: u32,
    pub(crate) id: ConversationId,
    pub(crate) window_start: u64,
    pub(crate) next_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) system: Option<Record>,
    pub(crate) messages: Vec<Record>,
    /// The summary of what left the window (`--summarize`), as stores keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<Summary>,
}

/// A message as a store keeps it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    pub(crate) seq: u64,
    pub(crate) tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) counted_by: Option<String>,
    pub(crate) message: Message,
}

impl From<StoredMessage> for Record {
    fn from(m: StoredMessage) -> Self {
        Self {
            seq: m.seq,
            tokens: m.tokens,
            counted_by: m.counted_by.as_deref().map(str::to_owned),
            message: m.into_message(),
        }
    }
}

impl From<Record> for StoredMessage {
    fn from(r: Record) -> Self {
        StoredMessage {
            seq: r.seq,
            tokens: r.tokens,
            counted_by: r.counted_by.map(Into::into),
            message: r.message.into(),
        }
    }
}

/// Reads line number `number` (from 1): a [`Line`] whose numbers are consistent, or an error
/// naming the line and the field.
pub(crate) fn parse(number: usize, text: &str) -> anyhow::Result<Line> {
    // serde would also read a struct from an array of its fields: a line is an object.
    if !text.trim_start().starts_with('{') {
        bail!("line {number}: not a JSON object (one conversation per line)");
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let line: Line = chatmem::deserialize_json(&mut de)
        .map_err(anyhow::Error::from)
        .and_then(|line| de.end().map(|()| line).context("more than one JSON value"))
        .and_then(|line| check(&line).map(|()| line))
        .with_context(|| format!("line {number}"))?;
    Ok(line)
}

/// The rules a store's own data obeys, so that a line that breaks one is refused before
/// anything of it is written.
fn check(line: &Line) -> anyhow::Result<()> {
    if line.format != FORMAT {
        bail!(
            "field `format`: format {} is not known to this chatmem (it reads {FORMAT})",
            line.format
        );
    }
    let first = line.messages.first().map_or(line.next_seq, |m| m.seq);
    if first == 0 {
        bail!("field `messages[0].seq`: sequences start at 1");
    }
    for (i, m) in line.messages.iter().enumerate() {
        let expected = first + i as u64;
        if m.seq != expected {
            bail!(
                "field `messages[{i}].seq`: expected {expected} (sequences are consecutive), found {}",
                m.seq
            );
        }
        if m.message.is_system() {
            bail!(
                "field `messages[{i}].message.role`: a {} message belongs in `system`",
                m.message.role()
            );
        }
    }
    if line.next_seq != first + line.messages.len() as u64 {
        bail!(
            "field `next_seq`: expected {} (one past the last message), found {}",
            first + line.messages.len() as u64,
            line.next_seq
        );
    }
    if let Some(s) = &line.summary
        && s.upto >= line.next_seq
    {
        bail!(
            "field `summary.upto`: {} is not below next_seq {}",
            s.upto,
            line.next_seq
        );
    }
    if line.window_start == 0 || line.window_start > line.next_seq {
        bail!(
            "field `window_start`: {} is not between 1 and next_seq {}",
            line.window_start,
            line.next_seq
        );
    }
    if let Some(system) = &line.system {
        if !system.message.is_system() {
            bail!("field `system.message.role`: must be system or developer");
        }
        if system.seq == 0 || system.seq > line.next_seq {
            bail!(
                "field `system.seq`: {} is not between 1 and next_seq {}",
                system.seq,
                line.next_seq
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"format":1,"id":"c","window_start":2,"next_seq":3,"system":{"seq":1,"tokens":5,"message":{"role":"system","content":"s"}},"messages":[{"seq":1,"tokens":4,"counted_by":"heuristic","message":{"role":"user","content":"u"}},{"seq":2,"tokens":4,"message":{"role":"assistant","content":"a"}}]}"#;

    fn error(text: &str) -> String {
        format!("{:#}", parse(7, text).expect_err(text))
    }

    #[test]
    fn a_line_reads_and_writes_back_the_same() {
        let line = parse(1, GOOD).unwrap();
        assert_eq!(line.messages[0].counted_by.as_deref(), Some("heuristic"));
        assert_eq!(serde_json::to_string(&line).unwrap(), GOOD);
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let cases = [
            (
                GOOD.replace(r#""role":"assistant""#, r#""role":"wizard""#),
                "line 7: field `messages[1].message.role`: unknown variant `wizard`",
            ),
            (
                GOOD.replace(r#""seq":2"#, r#""seq":3"#),
                "line 7: field `messages[1].seq`: expected 2",
            ),
            (
                GOOD.replace(r#""next_seq":3"#, r#""next_seq":9"#),
                "line 7: field `next_seq`: expected 3",
            ),
            (
                GOOD.replace(r#""window_start":2"#, r#""window_start":4"#),
                "line 7: field `window_start`",
            ),
            (GOOD.replace(r#""format":1"#, r#""format":2"#), "line 7: field `format`"),
            (GOOD.replace(r#""id":"c""#, r#""id":"""#), "line 7: field `id`"),
            (
                GOOD.replace(r#""tokens":5"#, r#""tokens":-1"#),
                "line 7: field `system.tokens`",
            ),
            (
                GOOD.replace(r#""tokens":5,"#, r#""tokens":5,"extra":1,"#),
                "line 7: field `system.extra`",
            ),
            (
                GOOD.replace(r#""role":"user""#, r#""role":"system""#),
                "line 7: field `messages[0].message.role`",
            ),
            (format!("{GOOD} {{}}"), "line 7: more than one JSON value"),
            ("[1]".to_string(), "line 7: not a JSON object"),
            ("{]".to_string(), "line 7: key must be a string at line 1 column 2"),
        ];
        for (text, needle) in cases {
            let e = error(&text);
            assert!(e.starts_with(needle), "{e:?} should start with {needle:?}");
        }
    }
}
