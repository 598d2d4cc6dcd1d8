//! Reading result rows into [`Snapshot`]s and [`StoredMessage`]s, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use mysql_async::Row;
use mysql_async::prelude::FromValue;

use chatmem::store::{SharedMessages, Snapshot, StoreError, StoredMessage};
use chatmem::{ConversationId, Summary};

/// The rows of the load statement: the conversation row, then its messages. No row at
/// all: an unknown or expired conversation.
pub(crate) fn snapshot(id: &ConversationId, rows: &[Row]) -> Result<Snapshot, StoreError> {
    let mut rows = rows.iter();
    let Some(head) = rows.next() else {
        return Ok(Snapshot::empty());
    };
    let read = Reader::conversation_row(id);
    let system = read.system_message(
        read.get(head, 4)?,
        read.get(head, 5)?,
        read.get::<Option<Vec<u8>>>(head, 7)?.as_deref(),
        read.get::<Option<String>>(head, 6)?.as_deref(),
    )?;
    let summary = read
        .get::<Option<Vec<u8>>>(head, 8)?
        .map(|json| Summary::from_json(id, &json))
        .transpose()?;
    let mut snapshot = Snapshot {
        version: read.counter(read.get::<Option<i64>>(head, 1)?, "version")?,
        system,
        window_start: read.counter(read.get::<Option<i64>>(head, 2)?, "window_start")?,
        next_seq: read.counter(read.get::<Option<i64>>(head, 3)?, "next_seq")?,
        messages: SharedMessages::new(),
        summary,
    };
    let read = Reader::message_rows(id);
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        let json = read.get::<Vec<u8>>(row, 7)?;
        let counted_by = read.get::<Option<String>>(row, 6)?;
        messages.push(read.message(read.get(row, 4)?, read.get(row, 5)?, &json, counted_by.as_deref())?);
    }
    snapshot.messages = messages.into();
    Ok(snapshot)
}

/// The rows of the history statement: seq, tokens, counted_by, json.
pub(crate) fn history(id: &ConversationId, rows: &[Row]) -> Result<Vec<StoredMessage>, StoreError> {
    let read = Reader::message_rows(id);
    rows.iter()
        .map(|row| {
            let json = read.get::<Vec<u8>>(row, 3)?;
            let counted_by = read.get::<Option<String>>(row, 2)?;
            read.message(read.get(row, 0)?, read.get(row, 1)?, &json, counted_by.as_deref())
        })
        .collect()
}

/// The conversation's rows are read through the core's
/// [`RowReader`](chatmem::store::RowReader): its corrupt-data
/// errors and message decoding are every store's.
pub(crate) use chatmem::store::RowReader as Reader;

/// The driver's column getter on [`Reader`].
pub(crate) trait Column {
    /// Column `index` of `row` as a `T`; unreadable or missing is corrupt.
    fn get<T: FromValue>(&self, row: &Row, index: usize) -> Result<T, StoreError>;
}

impl Column for Reader<'_> {
    fn get<T: FromValue>(&self, row: &Row, index: usize) -> Result<T, StoreError> {
        match row.get_opt::<T, usize>(index) {
            Some(Ok(value)) => Ok(value),
            Some(Err(e)) => Err(self.unreadable(index, e)),
            None => Err(self.missing(index)),
        }
    }
}
