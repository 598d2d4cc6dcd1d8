//! Key names. One conversation's keys share the hash tag `{<hex of the id bytes>}`, so they
//! land in one Cluster slot whatever the id holds (hex never contains `{` or `}`).

use chatmem::ConversationId;

/// The keys of one store (one prefix).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The schema version key.
    pub(crate) fn schema(&self) -> String {
        format!("{}:schema", self.prefix)
    }

    /// The sorted set of all conversation ids (score 0, ordered by bytes).
    pub(crate) fn index(&self) -> String {
        format!("{}:ids", self.prefix)
    }

    /// The sorted set of live conversation ids scored by their last commit's time in
    /// microseconds (0: unknown, last committed before it was recorded). Its hash tag is the
    /// id index's whole name, so both share a Cluster slot: one script or `MULTI` can
    /// update both.
    pub(crate) fn recent(&self) -> String {
        format!("{0}:{{{0}:ids}}:recent", self.prefix)
    }

    /// The hash of conversation `id`: version, window, system message, summary, raw id.
    pub(crate) fn meta(&self, id: &ConversationId) -> String {
        format!("{}:{{{}}}:meta", self.prefix, tag(id))
    }

    /// The sorted set of `id`'s messages, scored by sequence.
    pub(crate) fn msgs(&self, id: &ConversationId) -> String {
        format!("{}:{{{}}}:msgs", self.prefix, tag(id))
    }

    /// The hash of `id`'s lexical index (see [`crate::recall`]).
    pub(crate) fn idx(&self, id: &ConversationId) -> String {
        format!("{}:{{{}}}:idx", self.prefix, tag(id))
    }
}

/// Lower-case hex of the id's UTF-8 bytes.
fn tag(id: &ConversationId) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = id.as_str().as_bytes();
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_hide_braces() {
        let keys = Keys::new("chatmem");
        let id = ConversationId::new("a{b}:*").unwrap();
        assert_eq!(keys.meta(&id), "chatmem:{617b627d3a2a}:meta");
        assert_eq!(keys.msgs(&id), "chatmem:{617b627d3a2a}:msgs");
        assert_eq!(keys.idx(&id), "chatmem:{617b627d3a2a}:idx");
        assert_eq!(keys.index(), "chatmem:ids");
        assert_eq!(keys.recent(), "chatmem:{chatmem:ids}:recent");
        assert_eq!(keys.schema(), "chatmem:schema");
    }
}
