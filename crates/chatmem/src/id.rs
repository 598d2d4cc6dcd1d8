//! Conversation ids: the key that isolates one conversation's memory from another's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest conversation id accepted, in bytes of UTF-8.
pub const MAX_ID_BYTES: usize = 256;

/// The key of one conversation.
///
/// Every memory operation takes one explicitly; there is no default id, so two users can
/// never share a conversation by accident. An id is non-empty, at most [`MAX_ID_BYTES`]
/// bytes of UTF-8, and holds no control character, line or paragraph separator, or invisible
/// format character such as a bidi override or a zero-width space (see
/// [`is_invisible_or_separator`](crate::printable::is_invisible_or_separator)), so it is safe to print
/// and log, `list` prints one id per line, and two ids that look alike are alike.
/// Any other text is allowed, quotes, `%`, `*`, `:` and `{` included: stores must treat
/// it as opaque data.
///
/// ```
/// use chatmem::ConversationId;
///
/// let id: ConversationId = "app-user-42-aftersale".parse()?;
/// assert_eq!(id.as_str(), "app-user-42-aftersale");
/// assert!(ConversationId::new("").is_err());
/// # Ok::<(), chatmem::InvalidConversationId>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConversationId(String);

/// Why a string is not a valid [`ConversationId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidConversationId {
    /// The id was the empty string.
    #[error("conversation id is empty")]
    Empty,
    /// The id was longer than [`MAX_ID_BYTES`].
    #[error("conversation id is {0} bytes long; the limit is {MAX_ID_BYTES}")]
    TooLong(usize),
    /// The id held a control character (newline, tab, NUL, ...).
    #[error("conversation id contains a control character at byte {0}")]
    ControlCharacter(usize),
    /// The id held a line separator or an invisible format character (`U+2028`, a bidi
    /// override, a zero-width space, ...).
    #[error("conversation id contains an invisible or line-separating character at byte {0}")]
    InvisibleCharacter(usize),
}

/// What breaks the rules every id follows (a conversation's, a user's), and where: each id
/// type names it in its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdFault {
    Empty,
    TooLong(usize),
    ControlCharacter(usize),
    InvisibleCharacter(usize),
}

/// The one check of an id's text, by the rules [`ConversationId`] documents.
pub(crate) fn check_id(id: &str) -> Result<(), IdFault> {
    if id.is_empty() {
        return Err(IdFault::Empty);
    }
    if id.len() > MAX_ID_BYTES {
        return Err(IdFault::TooLong(id.len()));
    }
    if let Some((at, _)) = id.char_indices().find(|(_, c)| c.is_control()) {
        return Err(IdFault::ControlCharacter(at));
    }
    if let Some((at, _)) = id
        .char_indices()
        .find(|&(_, c)| crate::printable::is_invisible_or_separator(c))
    {
        return Err(IdFault::InvisibleCharacter(at));
    }
    Ok(())
}

impl ConversationId {
    /// Validates `id` and wraps it.
    ///
    /// # Errors
    /// [`InvalidConversationId`] when the id is empty, too long or holds a control character.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidConversationId> {
        let id = id.into();
        check_id(&id).map_err(|fault| match fault {
            IdFault::Empty => InvalidConversationId::Empty,
            IdFault::TooLong(len) => InvalidConversationId::TooLong(len),
            IdFault::ControlCharacter(at) => InvalidConversationId::ControlCharacter(at),
            IdFault::InvisibleCharacter(at) => InvalidConversationId::InvisibleCharacter(at),
        })?;
        Ok(Self(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Unwraps the id into its text.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Debug for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ConversationId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for ConversationId {
    type Err = InvalidConversationId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<&str> for ConversationId {
    type Error = InvalidConversationId;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl TryFrom<String> for ConversationId {
    type Error = InvalidConversationId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl Serialize for ConversationId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ConversationId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_awkward_but_printable_ids() {
        for id in [
            "a",
            "it's \"quoted\"",
            "100%",
            "*",
            "a:b:c",
            "{tag}",
            "订单-LC202610060018",
        ] {
            assert_eq!(ConversationId::new(id).unwrap().as_str(), id);
        }
        let max = "é".repeat(MAX_ID_BYTES / 2);
        assert_eq!(max.len(), MAX_ID_BYTES);
        assert!(ConversationId::new(max).is_ok());
    }

    #[test]
    fn rejects_empty_long_and_control() {
        assert_eq!(ConversationId::new(""), Err(InvalidConversationId::Empty));
        assert_eq!(
            ConversationId::new("x".repeat(MAX_ID_BYTES + 1)),
            Err(InvalidConversationId::TooLong(MAX_ID_BYTES + 1))
        );
        assert_eq!(
            ConversationId::new("ab\ncd"),
            Err(InvalidConversationId::ControlCharacter(2))
        );
        assert!(ConversationId::new("nul\0").is_err());
        assert!(ConversationId::new("a\u{85}b").is_err(), "NEL is a control character");
    }

    #[test]
    fn rejects_separators_and_look_alikes() {
        for (id, at) in [
            ("a\u{2028}b", 1),
            ("a\u{2029}b", 1),
            ("user\u{200b}1", 4),
            ("\u{202e}1-resu", 0),
            ("x\u{2066}y", 1),
            ("bom\u{feff}", 3),
        ] {
            assert_eq!(
                ConversationId::new(id),
                Err(InvalidConversationId::InvisibleCharacter(at)),
                "{id:?}"
            );
        }
    }

    #[test]
    fn serde_validates() {
        let id: ConversationId = serde_json::from_str("\"u-1\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"u-1\"");
        assert!(serde_json::from_str::<ConversationId>("\"\"").is_err());
    }
}
