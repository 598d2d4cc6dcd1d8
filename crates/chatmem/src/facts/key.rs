//! [`FactKey`]: the name of what a fact is about, so that a newer fact about the same thing
//! replaces the older one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest fact key, in bytes.
pub const MAX_KEY_BYTES: usize = 64;

/// What a fact is about, as a short dotted identifier (`address.default`, `name`,
/// `diet.allergies`): at most one current fact of a user has a given key, and a newer fact
/// with it supersedes the current one.
///
/// The rule: 1 to [`MAX_KEY_BYTES`] bytes, one or more segments joined by `.`, each segment
/// non-empty and made of lowercase ASCII letters, digits, `_` and `-` (`[a-z0-9_-]+`). Keys
/// are compared as they are written: the model is told the rule, and a key that breaks it is
/// refused, not repaired.
///
/// ```
/// use chatmem::facts::FactKey;
/// assert_eq!(FactKey::new("address.default")?.as_str(), "address.default");
/// assert!(FactKey::new("Address").is_err());
/// assert!(FactKey::new("address..default").is_err());
/// # Ok::<(), chatmem::facts::InvalidFactKey>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FactKey(String);

/// Why a string is not a valid [`FactKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidFactKey {
    /// The key was the empty string.
    #[error("fact key is empty")]
    Empty,
    /// The key was longer than [`MAX_KEY_BYTES`].
    #[error("fact key is {0} bytes long; the limit is {MAX_KEY_BYTES}")]
    TooLong(usize),
    /// The key held a character other than `a`–`z`, `0`–`9`, `_`, `-` and `.`.
    #[error(
        "fact key has {} at byte {at}; a key is lowercase letters, digits, `_`, `-` and `.`",
        crate::printable::printable(&format!("{found:?}"))
    )]
    Character {
        /// The byte it starts at.
        at: usize,
        /// The character.
        found: char,
    },
    /// The key began or ended with `.` or held `..` (an empty segment) at this byte.
    #[error("fact key has an empty segment at byte {0}; segments are joined by single dots")]
    EmptySegment(usize),
}

impl FactKey {
    /// Validates `key` by the rule in the type's docs and wraps it.
    ///
    /// # Errors
    /// [`InvalidFactKey`] naming what was wrong and where.
    pub fn new(key: impl Into<String>) -> Result<Self, InvalidFactKey> {
        let key = key.into();
        if key.is_empty() {
            return Err(InvalidFactKey::Empty);
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(InvalidFactKey::TooLong(key.len()));
        }
        if let Some((at, found)) = key
            .char_indices()
            .find(|&(_, c)| !matches!(c, 'a'..='z' | '0'..='9' | '_' | '-' | '.'))
        {
            return Err(InvalidFactKey::Character { at, found });
        }
        let mut at = 0;
        for segment in key.split('.') {
            if segment.is_empty() {
                return Err(InvalidFactKey::EmptySegment(at));
            }
            at += segment.len() + 1;
        }
        Ok(Self(key))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for FactKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for FactKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for FactKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for FactKey {
    type Err = InvalidFactKey;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl Serialize for FactKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for FactKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_short_dotted_identifiers() {
        for key in [
            "name",
            "address.default",
            "diet.allergies",
            "pet-name",
            "a_b.c-d.2",
            "0",
            "x.y.z",
        ] {
            assert_eq!(FactKey::new(key).unwrap().as_str(), key);
        }
        assert!(FactKey::new("a".repeat(MAX_KEY_BYTES)).is_ok());
    }

    #[test]
    fn refuses_every_other_key_naming_what_and_where() {
        assert_eq!(FactKey::new(""), Err(InvalidFactKey::Empty));
        assert_eq!(
            FactKey::new("a".repeat(MAX_KEY_BYTES + 1)),
            Err(InvalidFactKey::TooLong(MAX_KEY_BYTES + 1))
        );
        assert_eq!(
            FactKey::new("address.Default"),
            Err(InvalidFactKey::Character { at: 8, found: 'D' })
        );
        assert_eq!(
            FactKey::new("a b"),
            Err(InvalidFactKey::Character { at: 1, found: ' ' })
        );
        assert_eq!(
            FactKey::new("地址"),
            Err(InvalidFactKey::Character { at: 0, found: '地' })
        );
        assert_eq!(FactKey::new(".a"), Err(InvalidFactKey::EmptySegment(0)));
        assert_eq!(FactKey::new("a..b"), Err(InvalidFactKey::EmptySegment(2)));
        assert_eq!(FactKey::new("ab."), Err(InvalidFactKey::EmptySegment(3)));
        assert_eq!(FactKey::new("."), Err(InvalidFactKey::EmptySegment(0)));
        let e = FactKey::new("a\u{1b}b").unwrap_err().to_string();
        assert!(!e.chars().any(char::is_control), "{e:?}");
        assert_eq!(
            FactKey::new("a/b").unwrap_err().to_string(),
            "fact key has '/' at byte 1; a key is lowercase letters, digits, `_`, `-` and `.`"
        );
    }

    #[test]
    fn serde_validates() {
        let key: FactKey = serde_json::from_str("\"address.default\"").unwrap();
        assert_eq!(serde_json::to_string(&key).unwrap(), "\"address.default\"");
        assert!(serde_json::from_str::<FactKey>("\"A\"").is_err());
        assert_eq!(format!("{key} {key:?}"), "address.default \"address.default\"");
        assert_eq!("name".parse::<FactKey>().unwrap().as_ref(), "name");
    }
}
