//! Key names. One conversation's keys share the hash tag `{<hex of the id bytes>}`, so they
//! land in one Cluster slot whatever the id holds (hex never contains `{` or `}`). One user's
//! facts keys share the tag `{u:<hex of the user id bytes>}`: never a conversation's tag (hex
//! holds no `u` nor `:`), so a user and a conversation of the same id never share a key.

use chatmem::{ConversationId, UserId};

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
        format!("{}:{{{}}}:meta", self.prefix, tag(id.as_str()))
    }

    /// The sorted set of `id`'s messages, scored by sequence.
    pub(crate) fn msgs(&self, id: &ConversationId) -> String {
        format!("{}:{{{}}}:msgs", self.prefix, tag(id.as_str()))
    }

    /// The hash of `id`'s lexical index (see [`crate::recall`]).
    pub(crate) fn idx(&self, id: &ConversationId) -> String {
        format!("{}:{{{}}}:idx", self.prefix, tag(id.as_str()))
    }

    /// The hash of `user`'s facts header: version, next id, last token, raw id (see
    /// [`crate::facts`]).
    pub(crate) fn user(&self, user: &UserId) -> String {
        format!("{}:{{u:{}}}:user", self.prefix, tag(user.as_str()))
    }

    /// The hash of `user`'s current facts: fact id -> the fact's JSON.
    pub(crate) fn facts(&self, user: &UserId) -> String {
        format!("{}:{{u:{}}}:facts", self.prefix, tag(user.as_str()))
    }

    /// The hash of `user`'s facts' history: fact id -> its entries' JSON, one a line.
    pub(crate) fn fact_history(&self, user: &UserId) -> String {
        format!("{}:{{u:{}}}:history", self.prefix, tag(user.as_str()))
    }
}

/// Lower-case hex of an id's UTF-8 bytes.
fn tag(id: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = id.as_bytes();
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

    #[test]
    fn a_users_keys_share_a_tag_no_conversation_has() {
        let keys = Keys::new("chatmem");
        let user = UserId::new("a{b}:*").unwrap();
        assert_eq!(keys.user(&user), "chatmem:{u:617b627d3a2a}:user");
        assert_eq!(keys.facts(&user), "chatmem:{u:617b627d3a2a}:facts");
        assert_eq!(keys.fact_history(&user), "chatmem:{u:617b627d3a2a}:history");
        // A conversation of the same id: other keys, another tag.
        let id = ConversationId::new(user.as_str()).unwrap();
        let conversation = [keys.meta(&id), keys.msgs(&id), keys.idx(&id)];
        for key in [keys.user(&user), keys.facts(&user), keys.fact_history(&user)] {
            assert!(!conversation.contains(&key), "{key}");
            assert!(!key.contains("{617b627d3a2a}"), "{key}");
        }
    }
}
