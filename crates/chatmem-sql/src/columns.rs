//! Converting between chatmem's numbers and a SQL store's signed 64-bit columns, in both
//! directions, with the database's limits passed in; reading a load's rows into a
//! [`Snapshot`] ([`SqlColumns`], [`load_snapshot`], [`history_messages`]).

use std::borrow::Cow;
use std::time::Duration;

use chatmem::ConversationId;
use chatmem::Summary;
use chatmem::store::{Snapshot, StoreError, StoreErrorKind, StoredMessage};

/// [`StoredMessage::from_json`] for databases that keep seqs and token counts as signed
/// 64-bit integers: the message of conversation `id` stored at `seq` with `tokens`, its
/// counter not recorded.
///
/// ```
/// use chatmem::{ConversationId, Message};
/// use chatmem::store::{StoreErrorKind, StoredMessage};
/// let id = ConversationId::new("c1")?;
/// let json = StoredMessage::new(7, 3, Message::user("hi")).message_json()?;
/// assert_eq!(chatmem_sql::stored_message(&id, 7, 3, json.as_bytes())?, StoredMessage::new(7, 3, Message::user("hi")));
/// let e = chatmem_sql::stored_message(&id, -1, 3, json.as_bytes()).unwrap_err();
/// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::Corrupt`] naming the conversation and the seq when a number is out of
/// range or `json` is not a valid message.
pub fn stored_message(id: &ConversationId, seq: i64, tokens: i64, json: &[u8]) -> Result<StoredMessage, StoreError> {
    let seq = u64::try_from(seq).map_err(|_| StoreError::corrupt(id, format!("message seq {seq} is negative")))?;
    let tokens = u32::try_from(tokens)
        .map_err(|_| StoreError::corrupt(id, format!("message seq {seq} has token count {tokens}")))?;
    StoredMessage::from_json(id, seq, tokens, json)
}

/// `value` as a signed 64-bit column, `column_type` naming it in the error
/// ("MySQL's BIGINT").
///
/// ```
/// use chatmem_sql::to_bigint;
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
/// assert_eq!(chatmem_sql::ttl_micros(Duration::from_secs(2), max), Some(2_000_000));
/// assert_eq!(chatmem_sql::ttl_micros(Duration::from_secs(3601), max), None);
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
/// use chatmem::store::StoreErrorKind;
/// use chatmem_sql::stored_counter;
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
/// use chatmem::store::{StoreErrorKind, StoredMessage};
/// use chatmem_sql::RowReader;
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

    /// Column `index`'s `value`, which must not be NULL.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] for NULL.
    pub fn not_null<T>(&self, value: Option<T>, index: usize) -> Result<T, StoreError> {
        value.ok_or_else(|| StoreError::corrupt(self.id, format!("{} has NULL in column {index}", self.what)))
    }

    /// A NOT NULL counter as a u64, as [`stored_counter`] reads it.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] for NULL or a negative value.
    pub fn counter(&self, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
        stored_counter(self.id, value, column)
    }

    /// A message from its columns, through the one decoding every SQL store shares
    /// ([`stored_message`]); `counted_by` NULL: written before chatmem
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
        let mut message = stored_message(self.id, seq, tokens, json)?;
        message.counted_by = counted_by.map(Into::into);
        Ok(message)
    }

    /// The system message from the conversation row's nullable columns: none when `json` is
    /// NULL, else [`message`](Self::message); a message without its sequence or token count
    /// is corrupt.
    ///
    /// ```
    /// use chatmem::ConversationId;
    /// use chatmem::store::StoreErrorKind;
    /// use chatmem_sql::RowReader;
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

/// The columns of a SQL store's load statement, in this order: the first row is the
/// conversation row (`seq` to `counted_by` are its system message, all NULL without one;
/// `summary` NULL without one), each row after it a message from the window start on
/// (the counters and `summary` NULL). The statement returns no row at all for an unknown or
/// expired conversation. [`load_snapshot`] reads them.
pub const LOAD_COLUMNS: [&str; 9] = [
    "kind",
    "version",
    "window_start",
    "next_seq",
    "seq",
    "tokens",
    "json",
    "counted_by",
    "summary",
];

/// The columns of a SQL store's history statement, in this order: one message a row.
/// [`history_messages`] reads them.
pub const HISTORY_COLUMNS: [&str; 4] = ["seq", "tokens", "json", "counted_by"];

/// How a SQL store's driver reads the columns of its result rows (`R`): what a store
/// supplies so that [`load_snapshot`] and [`history_messages`] read every SQL store's rows
/// alike ([`LOAD_COLUMNS`], [`HISTORY_COLUMNS`]). A column the driver cannot read as asked is
/// [`RowReader::unreadable`], a missing one [`RowReader::missing`].
///
/// ```
/// use std::borrow::Cow;
/// use chatmem::{ConversationId, Message};
/// use chatmem::store::StoredMessage;
/// use chatmem_sql::{SqlColumns, history_messages};
///
/// /// Rows as plain values: `(seq, tokens, json, counted_by)`.
/// type Row = (i64, i64, String, Option<String>);
/// const PLAIN: SqlColumns<Row> = SqlColumns {
///     bigint: |read, row, index| match index {
///         0 => Ok(Some(row.0)),
///         1 => Ok(Some(row.1)),
///         _ => Err(read.missing(index)),
///     },
///     text: |read, row, index| match index {
///         2 => Ok(Some(Cow::Borrowed(row.2.as_str()))),
///         3 => Ok(row.3.as_deref().map(Cow::Borrowed)),
///         _ => Err(read.missing(index)),
///     },
/// };
///
/// let id = ConversationId::new("c1")?;
/// let json = StoredMessage::new(5, 1, Message::user("hi")).message_json()?;
/// let messages = history_messages(&id, &[(5, 1, json, None)], &PLAIN)?;
/// assert_eq!((messages[0].seq, messages[0].tokens), (5, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqlColumns<R> {
    /// Column `index` of a row as a nullable 64-bit integer.
    pub bigint: fn(&RowReader<'_>, &R, usize) -> Result<Option<i64>, StoreError>,
    /// Column `index` of a row as nullable UTF-8 text (a message's JSON, a counter name).
    pub text: for<'r> fn(&RowReader<'_>, &'r R, usize) -> Result<Option<Text<'r>>, StoreError>,
}

/// A text column as read: borrowed from the row where the driver can, else owned.
pub(crate) type Text<'r> = Cow<'r, str>;

impl<R> std::fmt::Debug for SqlColumns<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlColumns").finish_non_exhaustive()
    }
}

/// The [`Snapshot`] of a load statement's rows ([`LOAD_COLUMNS`]): no row at all is an
/// unknown or expired conversation ([`Snapshot::empty`]).
///
/// # Errors
/// [`StoreErrorKind::Corrupt`] for a column the driver cannot read, a NULL or negative
/// counter, a message without its sequence, token count or JSON, or JSON that is not a
/// message or summary.
pub fn load_snapshot<R>(id: &ConversationId, rows: &[R], columns: &SqlColumns<R>) -> Result<Snapshot, StoreError> {
    let Some((head, rest)) = rows.split_first() else {
        return Ok(Snapshot::empty());
    };
    let read = RowReader::conversation_row(id);
    let system_json = (columns.text)(&read, head, 6)?;
    let system_counted_by = (columns.text)(&read, head, 7)?;
    let system = read.system_message(
        (columns.bigint)(&read, head, 4)?,
        (columns.bigint)(&read, head, 5)?,
        system_json.as_deref().map(str::as_bytes),
        system_counted_by.as_deref(),
    )?;
    let summary = read.summary((columns.text)(&read, head, 8)?.as_deref().map(str::as_bytes))?;
    let read_message = RowReader::message_rows(id);
    let messages = rest
        .iter()
        .map(|row| message_at(&read_message, row, columns, 4))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Snapshot {
        version: read.counter((columns.bigint)(&read, head, 1)?, "version")?,
        system,
        window_start: read.counter((columns.bigint)(&read, head, 2)?, "window_start")?,
        next_seq: read.counter((columns.bigint)(&read, head, 3)?, "next_seq")?,
        messages: messages.into(),
        summary,
    })
}

/// The messages of a history statement's rows ([`HISTORY_COLUMNS`]), in row order.
///
/// # Errors
/// [`StoreErrorKind::Corrupt`] for a column the driver cannot read, a message without its
/// sequence, token count or JSON, or JSON that is not a message.
pub fn history_messages<R>(
    id: &ConversationId,
    rows: &[R],
    columns: &SqlColumns<R>,
) -> Result<Vec<StoredMessage>, StoreError> {
    let read = RowReader::message_rows(id);
    rows.iter().map(|row| message_at(&read, row, columns, 0)).collect()
}

/// The message in the four columns from `first` on: seq, tokens, json, counted_by.
fn message_at<R>(
    read: &RowReader<'_>,
    row: &R,
    columns: &SqlColumns<R>,
    first: usize,
) -> Result<StoredMessage, StoreError> {
    let json = (columns.text)(read, row, first + 2)?;
    let counted_by = (columns.text)(read, row, first + 3)?;
    read.message(
        read.not_null((columns.bigint)(read, row, first)?, first)?,
        read.not_null((columns.bigint)(read, row, first + 1)?, first + 1)?,
        read.not_null(json.as_deref(), first + 2)?.as_bytes(),
        counted_by.as_deref(),
    )
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

    /// Rows as text cells, the way a driver would hand them: NULL is `None`.
    type Row = Vec<Option<String>>;
    const CELLS: SqlColumns<Row> = SqlColumns {
        bigint: |read, row, index| {
            let cell = row.get(index).ok_or_else(|| read.missing(index))?;
            cell.as_deref()
                .map(|n| n.parse::<i64>().map_err(|e| read.unreadable(index, e)))
                .transpose()
        },
        text: |read, row, index| {
            Ok(row
                .get(index)
                .ok_or_else(|| read.missing(index))?
                .as_deref()
                .map(Cow::Borrowed))
        },
    };

    fn row(cells: &[Option<&str>]) -> Row {
        cells.iter().map(|c| c.map(str::to_owned)).collect()
    }

    fn json(seq: u64, message: chatmem::Message) -> String {
        StoredMessage::new(seq, 1, message).message_json().unwrap()
    }

    #[test]
    fn a_load_reads_the_conversation_row_then_its_messages() {
        let id = ConversationId::new("c").unwrap();
        assert!(!load_snapshot(&id, &[] as &[Row], &CELLS).unwrap().exists());

        let system = json(0, chatmem::Message::system("be brief"));
        let hi = json(3, chatmem::Message::user("hi"));
        let rows = [
            row(&[
                Some("0"),
                Some("7"),
                Some("3"),
                Some("4"),
                Some("0"),
                Some("2"),
                Some(&system),
                Some("heuristic"),
                None,
            ]),
            row(&[Some("1"), None, None, None, Some("3"), Some("1"), Some(&hi), None, None]),
        ];
        let snapshot = load_snapshot(&id, &rows, &CELLS).unwrap();
        assert_eq!((snapshot.version, snapshot.window_start, snapshot.next_seq), (7, 3, 4));
        let system = snapshot.system.expect("the system message");
        assert_eq!((system.tokens, system.counted_by.as_deref()), (2, Some("heuristic")));
        assert_eq!(snapshot.messages.len(), 1);
        assert_eq!(snapshot.messages[0].seq, 3);
        assert!(snapshot.summary.is_none());

        let history = history_messages(&id, &[row(&[Some("3"), Some("1"), Some(&hi), Some("o200k")])], &CELLS).unwrap();
        assert_eq!(history[0].counted_by.as_deref(), Some("o200k"));
    }

    #[test]
    fn a_load_with_nulls_or_bad_cells_is_corrupt_and_names_the_row() {
        let id = ConversationId::new("c").unwrap();
        let hi = json(3, chatmem::Message::user("hi"));
        let head =
            |version: Option<&str>| row(&[Some("0"), version, Some("3"), Some("4"), None, None, None, None, None]);
        let cases = [
            (vec![head(None)], "version is NULL"),
            (vec![head(Some("x"))], "the conversation row has an unreadable column 1"),
            (
                vec![
                    head(Some("1")),
                    row(&[Some("1"), None, None, None, None, Some("1"), Some(&hi), None, None]),
                ],
                "a message row has NULL in column 4",
            ),
            (
                vec![
                    head(Some("1")),
                    row(&[Some("1"), None, None, None, Some("3"), Some("1"), None, None, None]),
                ],
                "a message row has NULL in column 6",
            ),
            (
                vec![head(Some("1")), row(&[Some("1")])],
                "a message row has no column 6",
            ),
        ];
        for (rows, says) in cases {
            let e = load_snapshot(&id, &rows, &CELLS).unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{says}");
            assert!(e.to_string().contains(says), "{e} does not say {says}");
        }
    }
}
