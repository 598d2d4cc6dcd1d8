//! Listing conversations by recency ([`Store::recent`](crate::Store::recent)): newest first,
//! each with when it was last written and when it expires, a page at a time.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{StoreError, StoreErrorKind};
use crate::id::ConversationId;

/// `at` in microseconds since the Unix epoch, the unit stores record times in (0 before the
/// epoch, `i64::MAX` past what it holds).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// assert_eq!(chatmem::store::unix_micros(UNIX_EPOCH + Duration::from_millis(1500)), 1_500_000);
/// ```
pub fn unix_micros(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Now, in microseconds since the Unix epoch ([`unix_micros`]): a store that keeps its own
/// clock (an embedded one) stamps commits with it.
pub fn now_micros() -> i64 {
    unix_micros(SystemTime::now())
}

/// The least text above every text that starts with `prefix`, in the order of UTF-8 bytes
/// (which is the order of code points, and how stores compare ids): `prefix` with its last
/// character raised by one, after dropping trailing `char::MAX`; `None` when nothing is above
/// (an empty prefix, or only `char::MAX`). A SQL store matches a prefix as the range
/// `id >= prefix AND id < end` with it: exact, and `%` and `_` stay plain characters, which
/// `LIKE` would take as patterns.
///
/// ```
/// use chatmem::store::prefix_end;
/// assert_eq!(prefix_end("tenant/").as_deref(), Some("tenant0"));
/// assert_eq!(prefix_end("a%").as_deref(), Some("a&"));
/// assert_eq!(prefix_end(""), None);
/// ```
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut end = prefix.trim_end_matches(char::MAX).to_owned();
    let last = end.pop()?;
    // The next scalar value: surrogates are not characters, so U+D7FF is followed by U+E000.
    let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32)?;
    end.push(next);
    Some(end)
}

/// What a listing by recency asks for ([`Store::recent`](crate::Store::recent)).
///
/// ```
/// use chatmem::store::RecentQuery;
/// let first_page = RecentQuery::new("tenant-a/", None, 50);
/// assert_eq!((first_page.prefix.as_str(), first_page.limit), ("tenant-a/", 50));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentQuery {
    /// Only conversations whose id starts with it (`""`: all).
    pub prefix: String,
    /// Only those after this cursor, in the listing's order; `None`: from the newest.
    pub before: Option<RecentCursor>,
    /// At most this many (0 is taken as 1).
    pub limit: usize,
}

impl RecentQuery {
    /// Up to `limit` conversations whose id starts with `prefix`, after `before`.
    pub fn new(prefix: &str, before: Option<&RecentCursor>, limit: usize) -> Self {
        Self {
            prefix: prefix.to_owned(),
            before: before.cloned(),
            limit,
        }
    }
}

/// One conversation in a listing by recency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentConversation {
    /// The conversation.
    pub id: ConversationId,
    /// When its last commit landed, in microseconds since the Unix epoch by the store's clock
    /// (the database server's, for a store on one); 0 for a conversation last written by a
    /// version of the store that did not record it.
    pub updated_micros: i64,
    /// When it expires (the same unit), or `None` when it does not.
    pub expires_micros: Option<i64>,
}

impl RecentConversation {
    /// Where a listing goes on after this conversation.
    pub fn cursor(&self) -> RecentCursor {
        RecentCursor {
            updated_micros: self.updated_micros,
            id: self.id.clone(),
        }
    }
}

/// Where a listing by recency goes on: after `(updated_micros, id)`, in the listing's order
/// (newest first; those written in the same microsecond by id, descending). Written and read
/// as `<micros>.<id>`.
///
/// ```
/// use chatmem::ConversationId;
/// use chatmem::store::RecentCursor;
/// let cursor = RecentCursor { updated_micros: 1_700_000_000_000_000, id: ConversationId::new("a.b/c")? };
/// assert_eq!(cursor.to_string(), "1700000000000000.a.b/c");
/// assert_eq!(cursor.to_string().parse::<RecentCursor>()?, cursor);
/// assert!(cursor.comes_before(1_700_000_000_000_000, &ConversationId::new("a")?));
/// assert!(!cursor.comes_before(1_700_000_000_000_001, &ConversationId::new("a")?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentCursor {
    /// The last listed conversation's time.
    pub updated_micros: i64,
    /// The last listed conversation.
    pub id: ConversationId,
}

impl RecentCursor {
    /// Whether a conversation written at `updated_micros` with id `id` comes after this
    /// cursor in the listing (so a page from the cursor holds it).
    pub fn comes_before(&self, updated_micros: i64, id: &ConversationId) -> bool {
        updated_micros < self.updated_micros || (updated_micros == self.updated_micros && id < &self.id)
    }
}

impl fmt::Display for RecentCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.updated_micros, self.id.as_str())
    }
}

impl FromStr for RecentCursor {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self, StoreError> {
        let invalid = || StoreError::new(StoreErrorKind::InvalidInput, "not a cursor of a listing by recency");
        let (micros, id) = text.split_once('.').ok_or_else(invalid)?;
        Ok(Self {
            updated_micros: micros.parse().map_err(|_| invalid())?,
            id: ConversationId::new(id).map_err(|_| invalid())?,
        })
    }
}

/// A page of a listing by recency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentPage {
    /// Newest first.
    pub conversations: Vec<RecentConversation>,
    /// Pass this as `before` for the next page; `None` when this was the last.
    pub next: Option<RecentCursor>,
}

impl RecentPage {
    /// A page from up to `limit + 1` conversations fetched for a page of `limit`: the extra
    /// one only tells that more remain.
    pub fn from_overfetch(mut conversations: Vec<RecentConversation>, limit: usize) -> Self {
        let next = if conversations.len() > limit {
            conversations.truncate(limit);
            conversations.last().map(RecentConversation::cursor)
        } else {
            None
        };
        Self { conversations, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_refuse_what_they_did_not_write() {
        for bad in ["", "12", "x.a", "12.", ".a"] {
            let e = bad.parse::<RecentCursor>().unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{bad:?}");
        }
        let c: RecentCursor = "-5.id.with.dots".parse().unwrap();
        assert_eq!((c.updated_micros, c.id.as_str()), (-5, "id.with.dots"));
    }

    #[test]
    fn an_overfetched_page_ends_at_its_last_conversation() {
        let item = |n: i64| RecentConversation {
            id: ConversationId::new(format!("c{n}")).unwrap(),
            updated_micros: 100 - n,
            expires_micros: None,
        };
        let page = RecentPage::from_overfetch((0..4).map(item).collect(), 3);
        assert_eq!(page.conversations.len(), 3);
        assert_eq!(page.next, Some(item(2).cursor()));
        assert_eq!(RecentPage::from_overfetch((0..3).map(item).collect(), 3).next, None);
    }

    #[test]
    fn a_prefix_ends_below_the_first_text_it_does_not_start() {
        assert_eq!(prefix_end("tenant/").as_deref(), Some("tenant0"));
        assert_eq!(prefix_end("a%").as_deref(), Some("a&"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        // Every text with the prefix is in [prefix, end), and the next one out is not.
        let end = prefix_end("tenant/é").unwrap_or_default();
        for inside in ["tenant/é", "tenant/é\u{10FFFF}", "tenant/éz"] {
            assert!("tenant/é" <= inside && inside < end.as_str(), "{inside}");
        }
        assert!("tenant/ê" >= end.as_str());
    }
}
