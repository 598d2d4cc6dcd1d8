//! Server-sent events as the upstream sends them: split into events without changing a
//! byte, so the proxy forwards each as it came and reads its `data`.

use axum::body::Bytes;

/// One event: its bytes as received (blank line included) and its `data` (the `data:`
/// lines joined by `\n`; `None` when it has none, such as a comment).
pub(super) struct Event {
    pub(super) raw: Bytes,
    pub(super) data: Option<String>,
}

/// Splits a byte stream into events. Lines end with `\n` or `\r\n` (what providers send; a
/// lone `\r` is not taken as a line end).
#[derive(Default)]
pub(super) struct Splitter {
    buffer: Vec<u8>,
}

impl Splitter {
    /// Adds received bytes.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete event, if the bytes so far hold one.
    pub(super) fn next_event(&mut self) -> Option<Event> {
        let end = self.event_end()?;
        let raw: Vec<u8> = self.buffer.drain(..end).collect();
        let data = data_of(&raw);
        Some(Event {
            raw: Bytes::from(raw),
            data,
        })
    }

    /// What is left once the stream ended: an event without its blank line, if any.
    pub(super) fn rest(&mut self) -> Option<Event> {
        if self.buffer.is_empty() {
            return None;
        }
        let raw = std::mem::take(&mut self.buffer);
        let data = data_of(&raw);
        Some(Event {
            raw: Bytes::from(raw),
            data,
        })
    }

    /// Where the first event ends: after the first empty line.
    fn event_end(&self) -> Option<usize> {
        let mut line_start = 0;
        for (i, &b) in self.buffer.iter().enumerate() {
            if b != b'\n' {
                continue;
            }
            let line = &self.buffer[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
        None
    }
}

fn data_of(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let mut data: Option<String> = None;
    for line in text.lines() {
        let Some(value) = line.strip_prefix("data:") else {
            continue;
        };
        let value = value.strip_prefix(' ').unwrap_or(value);
        match &mut data {
            Some(d) => {
                d.push('\n');
                d.push_str(value);
            }
            None => data = Some(value.to_owned()),
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_at_blank_lines_whatever_the_chunks() {
        let stream = b": ping\n\ndata: {\"a\":1}\r\n\r\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut s = Splitter::default();
            let mut events = Vec::new();
            s.push(&stream[..cut]);
            while let Some(e) = s.next_event() {
                events.push(e);
            }
            s.push(&stream[cut..]);
            while let Some(e) = s.next_event() {
                events.push(e);
            }
            assert!(s.rest().is_none());
            let raw: Vec<u8> = events.iter().flat_map(|e| e.raw.to_vec()).collect();
            assert_eq!(raw, stream, "cut at {cut}");
            let data: Vec<Option<&str>> = events.iter().map(|e| e.data.as_deref()).collect();
            assert_eq!(data, [None, Some("{\"a\":1}"), Some("x\ny"), Some("[DONE]")]);
        }
    }
}
