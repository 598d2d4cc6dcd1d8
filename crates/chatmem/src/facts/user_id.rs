//! [`UserId`]: whose facts they are, across that user's conversations.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::id::{IdFault, MAX_ID_BYTES, check_id};

/// The key of one user of an application, whose [facts](crate::facts) are kept across that
/// user's conversations (a conversation names its user).
///
/// It follows a [`ConversationId`](crate::ConversationId)'s rules, checked by the same code:
/// non-empty, at most [`MAX_ID_BYTES`] bytes of UTF-8, no control character, line or
/// paragraph separator, or invisible format character. Any other text is allowed; stores
/// treat it as opaque data. Facts belong to a user within a tenant, and never cross either.
///
/// ```
/// use chatmem::UserId;
///
/// let user: UserId = "app-user-42".parse()?;
/// assert_eq!(user.as_str(), "app-user-42");
/// assert!(UserId::new("").is_err());
/// assert!(UserId::new("ada\u{200b}").unwrap_err().to_string().contains("byte 3"));
/// # Ok::<(), chatmem::facts::InvalidUserId>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserId(String);

/// Why a string is not a valid [`UserId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidUserId {
    /// The id was the empty string.
    #[error("user id is empty")]
    Empty,
    /// The id was longer than [`MAX_ID_BYTES`].
    #[error("user id is {0} bytes long; the limit is {MAX_ID_BYTES}")]
    TooLong(usize),
    /// The id held a control character (newline, tab, NUL, ...) at this byte.
    #[error("user id contains a control character at byte {0}")]
    ControlCharacter(usize),
    /// The id held a line separator or an invisible format character (`U+2028`, a bidi
    /// override, a zero-width space, ...) at this byte.
    #[error("user id contains an invisible or line-separating character at byte {0}")]
    InvisibleCharacter(usize),
}

impl UserId {
    /// Validates `id` and wraps it.
    ///
    /// # Errors
    /// [`InvalidUserId`] naming what was wrong: empty, too long, or where a control or
    /// invisible character is.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidUserId> {
        let id = id.into();
        check_id(&id).map_err(|fault| match fault {
            IdFault::Empty => InvalidUserId::Empty,
            IdFault::TooLong(len) => InvalidUserId::TooLong(len),
            IdFault::ControlCharacter(at) => InvalidUserId::ControlCharacter(at),
            IdFault::InvisibleCharacter(at) => InvalidUserId::InvisibleCharacter(at),
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

impl fmt::Debug for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for UserId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for UserId {
    type Err = InvalidUserId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<&str> for UserId {
    type Error = InvalidUserId;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl TryFrom<String> for UserId {
    type Error = InvalidUserId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl Serialize for UserId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for UserId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ConversationId;

    #[test]
    fn accepts_what_a_conversation_id_accepts() {
        for id in ["a", "it's \"quoted\"", "100%", "*", "a:b:c", "{tag}", "用户-42"] {
            assert_eq!(UserId::new(id).unwrap().as_str(), id);
            assert!(ConversationId::new(id).is_ok());
        }
        let max = "é".repeat(MAX_ID_BYTES / 2);
        assert!(UserId::new(max).is_ok());
    }

    #[test]
    fn rejects_what_a_conversation_id_rejects_naming_what_and_where() {
        assert_eq!(UserId::new(""), Err(InvalidUserId::Empty));
        assert_eq!(
            UserId::new("x".repeat(MAX_ID_BYTES + 1)),
            Err(InvalidUserId::TooLong(MAX_ID_BYTES + 1))
        );
        assert_eq!(UserId::new("ab\ncd"), Err(InvalidUserId::ControlCharacter(2)));
        assert_eq!(UserId::new("a\u{85}b"), Err(InvalidUserId::ControlCharacter(1)));
        for (id, at) in [
            ("a\u{2028}b", 1),
            ("user\u{200b}1", 4),
            ("\u{202e}1-resu", 0),
            ("bom\u{feff}", 3),
        ] {
            assert_eq!(UserId::new(id), Err(InvalidUserId::InvisibleCharacter(at)), "{id:?}");
            assert_eq!(
                ConversationId::new(id),
                Err(crate::InvalidConversationId::InvisibleCharacter(at))
            );
        }
        assert_eq!(
            InvalidUserId::TooLong(300).to_string(),
            "user id is 300 bytes long; the limit is 256"
        );
        assert_eq!(UserId::new("").unwrap_err().to_string(), "user id is empty");
    }

    #[test]
    fn converts_displays_and_round_trips_through_serde() {
        let user = UserId::try_from("u-1").unwrap();
        assert_eq!(UserId::try_from(String::from("u-1")).unwrap(), user);
        assert_eq!(format!("{user} {user:?}"), "u-1 \"u-1\"");
        assert_eq!(user.as_ref(), "u-1");
        assert_eq!(serde_json::to_string(&user).unwrap(), "\"u-1\"");
        assert_eq!(serde_json::from_str::<UserId>("\"u-1\"").unwrap(), user);
        assert!(serde_json::from_str::<UserId>("\"\"").is_err());
        assert!(serde_json::from_str::<UserId>("\"a\\u0000\"").is_err());
        assert_eq!(user.into_string(), "u-1");
    }
}
