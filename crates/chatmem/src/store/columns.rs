//! Converting between chatmem's numbers and a SQL store's signed 64-bit columns, in both
//! directions, with the database's limits passed in; reading a load's rows into a
//! [`Snapshot`] ([`RowReader`], [`snapshot_from_rows`]).

use std::time::Duration;

use crate::error::StoreError;
use crate::error::StoreErrorKind;
use crate::id::ConversationId;
use crate::store::{Snapshot, StoredMessage};
use crate::summary::Summary;

/// `value` as a signed 64-bit column, `column_type` naming it in the error
/// ("MySQL's BIGINT").
///
/// ```
/// use chatmem::store::to_bigint;
/// assert_eq!(to_bigint(7, "sequence", "SQL's BIGINT")?, 7);
/// let e = to_bigint(u64::MAX, "sequence", "SQL's BIGINT").unwrap_err();
/// assert!(e.to_string().contains("is beyond what SQL's BIGINT holds"));
/// # Ok::<(), chatmem::store::StoreError>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::InvalidInput`] above `i64::MAX`.
pub fn to_bigint(value: u64, what: &str, column_type: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("{what} {value} is beyond what {column_type} holds"),
        )
    })
}

/// A TTL in microseconds, or `None` (never expires) beyond `max`, the longest the
/// database's timestamps can hold an expiry for: as `ChatMemory::ttl` documents, a TTL too
/// long to represent never expires.
///
/// ```
/// use std::time::Duration;
/// let max = Duration::from_secs(3600);
/// assert_eq!(chatmem::store::ttl_micros(Duration::from_secs(2), max), Some(2_000_000));
/// assert_eq!(chatmem::store::ttl_micros(Duration::from_secs(3601), max), None);
/// ```
pub fn ttl_micros(ttl: Duration, max: Duration) -> Option<i64> {
    if ttl > max {
        return None;
    }
    i64::try_from(ttl.as_micros()).ok()
}

/// A stored NOT NULL counter of conversation `id` (version, window start, next sequence)
/// as a u64; NULL or negative is [`StoreError::corrupt`], naming `column`.
///
/// ```
/// use chatmem::ConversationId;
/// use chatmem::store::{StoreErrorKind, stored_counter};
/// let id = ConversationId::new("c1")?;
/// assert_eq!(stored_counter(&id, Some(3), "version")?, 3);
/// let e = stored_counter(&id, None, "version").unwrap_err();
/// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
/// assert!(e.to_string().contains("version is NULL"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::Corrupt`] for NULL or a negative value.
pub fn stored_counter(id: &ConversationId, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
    match value.map(u64::try_from) {
        Some(Ok(v)) => Ok(v),
        Some(Err(_)) => Err(StoreError::corrupt(
            id,
            format!("{column} is {}", value.unwrap_or_default()),
        )),
        None => Err(StoreError::corrupt(id, format!("{column} is NULL"))),
    }
}

/// Reads the columns of one conversation's rows, turning bad data into
/// [`StoreError::corrupt`] errors that name the conversation and the row; a store adds
/// the driver's own column getter on top (`unreadable` and `missing` make its errors).
///
/// ```
/// use chatmem::{ConversationId, Message};
/// use chatmem::store::{RowReader, StoreErrorKind, StoredMessage};
/// let id = ConversationId::new("c1")?;
/// let read = RowReader { id: &id, what: "a message row" };
/// let json = StoredMessage::new(3, 1, Message::user("hi")).message_json()?;
/// let m = read.message(3, 1, json.as_bytes(), Some("heuristic"))?;
/// assert_eq!((m.seq, m.counted_by.as_deref()), (3, Some("heuristic")));
/// assert_eq!(read.counter(Some(-1), "next_seq").unwrap_err().kind(), StoreErrorKind::Corrupt);
/// assert!(read.missing(9).to_string().contains("a message row has no column 9"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RowReader<'a> {
    /// The conversation the rows belong to.
    pub id: &'a ConversationId,
    /// The row being read, for errors: "the conversation row", "a message row"...
    pub what: &'static str,
}

impl<'a> RowReader<'a> {
    /// A reader of conversation `id`'s conversation row (version, window, system message,
    /// summary).
    pub fn conversation_row(id: &'a ConversationId) -> Self {
        Self {
            id,
            what: "the conversation row",
        }
    }

    /// A reader of conversation `id`'s message rows.
    pub fn message_rows(id: &'a ConversationId) -> Self {
        Self {
            id,
            what: "a message row",
        }
    }
}

impl RowReader<'_> {
    /// Column `index` could not be read as the type asked for; `source` is the driver's
    /// error.
    pub fn unreadable(
        &self,
        index: usize,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> StoreError {
        StoreError::corrupt(self.id, format!("{} has an unreadable column {index}", self.what)).with_source(source)
    }

    /// The row has no column `index`.
    pub fn missing(&self, index: usize) -> StoreError {
        StoreError::corrupt(self.id, format!("{} has no column {index}", self.what))
    }

    /// A NOT NULL counter as a u64, as [`stored_counter`] reads it.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] for NULL or a negative value.
    pub fn counter(&self, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
        stored_counter(self.id, value, column)
    }

    /// A message from its columns, through the one decoding every store shares
    /// ([`StoredMessage::from_columns`]); `counted_by` NULL: written before chatmem
    /// recorded it, or without a counter name.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] for a negative sequence, a token count beyond u32 or
    /// JSON that is not a message.
    pub fn message(
        &self,
        seq: i64,
        tokens: i64,
        json: &[u8],
        counted_by: Option<&str>,
    ) -> Result<StoredMessage, StoreError> {
        let mut message = StoredMessage::from_columns(self.id, seq, tokens, json)?;
        message.counted_by = counted_by.map(Into::into);
        Ok(message)
    }

    /// The system message from the conversation row's nullable columns: none when `json` is
    /// NULL, else [`message`](Self::message); a message without its sequence or token count
    /// is corrupt.
    ///
    /// ```
    /// use chatmem::ConversationId;
    /// use chatmem::store::{RowReader, StoreErrorKind};
    /// let id = ConversationId::new("c1")?;
    /// let read = RowReader::conversation_row(&id);
    /// assert!(read.system_message(None, None, None, None)?.is_none());
    /// let e = read.system_message(None, Some(1), Some(b"{}"), None).unwrap_err();
    /// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] for a message without sequence or token count, or one
    /// [`message`](Self::message) refuses.
    pub fn system_message(
        &self,
        seq: Option<i64>,
        tokens: Option<i64>,
        json: Option<&[u8]>,
        counted_by: Option<&str>,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let Some(json) = json else {
            return Ok(None);
        };
        let (Some(seq), Some(tokens)) = (seq, tokens) else {
            return Err(StoreError::corrupt(
                self.id,
                "the system message has no seq or token count",
            ));
        };
        self.message(seq, tokens, json, counted_by).map(Some)
    }

    /// The summary from its nullable JSON column (NULL: none yet, as for every conversation
    /// written before summaries were stored).
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] for JSON that is not a summary.
    pub fn summary(&self, json: Option<&[u8]>) -> Result<Option<Summary>, StoreError> {
        json.map(|json| Summary::from_json(self.id, json)).transpose()
    }
}

/// A conversation row as a SQL store's driver read it: the counters as stored (checked by
/// [`snapshot_from_rows`]), the system message and the summary.
#[derive(Debug, Default)]
pub struct ConversationRow {
    /// `version`.
    pub version: Option<i64>,
    /// `window_start`.
    pub window_start: Option<i64>,
    /// `next_seq`.
    pub next_seq: Option<i64>,
    /// The system message ([`RowReader::system_message`]).
    pub system: Option<StoredMessage>,
    /// The summary ([`RowReader::summary`]).
    pub summary: Option<Summary>,
}

/// The [`Snapshot`] of a load statement's rows, as every SQL store's load answers them: no row
/// at all is an unknown or expired conversation; else the first is the conversation row, read
/// by `head`, and each one after it a message, read by `message` (with the readers that name
/// those rows in errors).
///
/// ```
/// use chatmem::{ConversationId, Message};
/// use chatmem::store::{ConversationRow, StoredMessage, snapshot_from_rows};
/// let id = ConversationId::new("c1")?;
/// let rows = [None, Some((3_i64, StoredMessage::new(3, 1, Message::user("hi")).message_json()?))];
/// let snapshot = snapshot_from_rows(
///     &id,
///     &rows,
///     |_, _| Ok(ConversationRow { version: Some(2), window_start: Some(3), next_seq: Some(4), ..Default::default() }),
///     |read, row| {
///         let (seq, json) = row.as_ref().expect("a message row");
///         read.message(*seq, 1, json.as_bytes(), None)
///     },
/// )?;
/// assert_eq!((snapshot.version, snapshot.next_seq, snapshot.messages.len()), (2, 4, 1));
/// assert!(!snapshot_from_rows(&id, &[] as &[()], |_, _| unreachable!(), |_, _| unreachable!())?.exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// What `head` and `message` return, and [`StoreErrorKind::Corrupt`] for a NULL or negative
/// counter.
pub fn snapshot_from_rows<R>(
    id: &ConversationId,
    rows: &[R],
    head: impl FnOnce(&RowReader<'_>, &R) -> Result<ConversationRow, StoreError>,
    mut message: impl FnMut(&RowReader<'_>, &R) -> Result<StoredMessage, StoreError>,
) -> Result<Snapshot, StoreError> {
    let Some((first, rest)) = rows.split_first() else {
        return Ok(Snapshot::empty());
    };
    let read = RowReader::conversation_row(id);
    let row = head(&read, first)?;
    let read_message = RowReader::message_rows(id);
    let messages = rest
        .iter()
        .map(|r| message(&read_message, r))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Snapshot {
        version: read.counter(row.version, "version")?,
        system: row.system,
        window_start: read.counter(row.window_start, "window_start")?,
        next_seq: read.counter(row.next_seq, "next_seq")?,
        messages: messages.into(),
        summary: row.summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_too_long_to_store_never_expire() {
        let max = Duration::from_secs(5_000 * 366 * 24 * 3600);
        assert_eq!(ttl_micros(Duration::from_secs(2), max), Some(2_000_000));
        assert!(ttl_micros(max, max).is_some());
        assert_eq!(ttl_micros(max + Duration::from_secs(1), max), None);
        assert_eq!(ttl_micros(Duration::MAX, Duration::MAX), None, "beyond i64 micros");
    }

    #[test]
    fn counters_and_bigints() {
        let id = ConversationId::new("c").unwrap();
        assert_eq!(stored_counter(&id, Some(0), "next_seq").unwrap(), 0);
        let e = stored_counter(&id, Some(-4), "next_seq").unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert!(e.to_string().contains("next_seq is -4"), "{e}");
        assert_eq!(to_bigint(i64::MAX as u64, "v", "T").unwrap(), i64::MAX);
        let e = to_bigint(1 << 63, "window start", "T").unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::InvalidInput);
    }
}
