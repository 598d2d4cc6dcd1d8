//! Converting between chatmem's numbers and a SQL store's signed 64-bit columns, in both
//! directions, with the database's limits passed in.

use std::time::Duration;

use crate::error::StoreError;
use crate::error::StoreErrorKind;
use crate::id::ConversationId;
use crate::store::StoredMessage;

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
