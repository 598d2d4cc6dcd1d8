//! Turning a [`Commit`] into the commit statements' parameters, before the write lock is
//! taken (nothing slow happens inside it).
//!
//! A `Commit` cannot be built invalid, so nothing here checks sequences or the window:
//! values are only converted to what SQLite stores.

use std::time::Duration;

use chatmem::Summary;
use chatmem::store::{Commit, IndexEntry, StoreError, StoreErrorKind, StoredMessage};

/// One message as the `messages` columns (and the conversation row's `system_*` columns)
/// hold it.
pub(crate) struct MessageRow<'a> {
    pub(crate) seq: i64,
    pub(crate) tokens: i64,
    pub(crate) json: String,
    pub(crate) counted_by: Option<&'a str>,
    /// Its index entry, when the commit was made with recall on: its length in terms and
    /// its terms with their counts as `messages.recall_terms` keeps them
    /// ([`crate::recall::encode_doc`]).
    pub(crate) recall: Option<(i64, Vec<u8>)>,
}

impl<'a> MessageRow<'a> {
    fn new(m: &'a StoredMessage, entry: Option<&IndexEntry>) -> Result<Self, StoreError> {
        Ok(Self {
            seq: to_i64(m.seq, "sequence")?,
            tokens: i64::from(m.tokens),
            json: m.message_json()?,
            counted_by: m.counted_by.as_deref(),
            recall: entry.map(|e| (i64::from(e.terms.len), crate::recall::encode_doc(&e.terms.terms))),
        })
    }
}

/// A commit's parameters, converted before anything is written.
pub(crate) struct CommitParams<'a> {
    pub(crate) append: Vec<MessageRow<'a>>,
    pub(crate) system: Option<MessageRow<'a>>,
    pub(crate) summary: Option<String>,
    /// The commit's token as SQLite keeps it: the u64's bits as an i64.
    pub(crate) token: i64,
    pub(crate) window_start: i64,
    pub(crate) next_seq: i64,
    pub(crate) expires_at: Option<i64>,
    pub(crate) delete_below: Option<i64>,
    /// How many appended messages are indexed, and their total length.
    pub(crate) indexed: (i64, i64),
}

impl<'a> CommitParams<'a> {
    /// The parameters of `commit` made at `now` (Unix milliseconds).
    pub(crate) fn new(commit: &'a Commit, now: i64) -> Result<Self, StoreError> {
        // One entry per appended message, in their order, when the commit indexes.
        let mut entries = commit.index().iter().peekable();
        let append: Vec<MessageRow<'a>> = commit
            .appended()
            .iter()
            .map(|m| MessageRow::new(m, entries.next_if(|e| e.seq == m.seq)))
            .collect::<Result<_, _>>()?;
        let indexed = append
            .iter()
            .filter_map(|m| m.recall.as_ref())
            .fold((0, 0), |(n, len), (l, _)| (n + 1, len + l));
        Ok(Self {
            append,
            indexed,
            system: commit.system().map(|m| MessageRow::new(m, None)).transpose()?,
            summary: commit.summary().map(Summary::to_json),
            token: i64::from_ne_bytes(commit.token().to_ne_bytes()),
            window_start: to_i64(commit.window_start(), "window_start")?,
            next_seq: to_i64(commit.next_seq(), "next_seq")?,
            expires_at: expires_at(now, commit.ttl()),
            delete_below: commit
                .delete_below()
                .map(|below| to_i64(below, "delete bound"))
                .transpose()?,
        })
    }
}

/// When a conversation written at `now` with `ttl` expires; a TTL too long to represent
/// never expires in practice (the end of `i64` milliseconds).
fn expires_at(now: i64, ttl: Option<Duration>) -> Option<i64> {
    ttl.map(|ttl| now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)))
}

/// `value` as an SQLite integer; above `i64::MAX` is refused as invalid input.
pub(crate) fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::new(StoreErrorKind::InvalidInput, format!("{what} {value} is out of range")))
}
