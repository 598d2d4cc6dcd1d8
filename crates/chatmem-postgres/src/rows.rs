//! Reading result rows into [`Snapshot`]s and [`StoredMessage`]s, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::FromSql;

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
        read.get::<Option<&str>>(head, 6)?.map(str::as_bytes),
        read.get(head, 7)?,
    )?;
    let mut snapshot = Snapshot {
        version: read.counter(read.get::<Option<i64>>(head, 1)?, "version")?,
        system,
        window_start: read.counter(read.get::<Option<i64>>(head, 2)?, "window_start")?,
        next_seq: read.counter(read.get::<Option<i64>>(head, 3)?, "next_seq")?,
        messages: SharedMessages::new(),
        // NULL: none yet, as for every conversation written before schema version 4.
        summary: read
            .get::<Option<&str>>(head, 8)?
            .map(|json| Summary::from_json(id, json.as_bytes()))
            .transpose()?,
    };
    let read = Reader::message_rows(id);
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        let seq = read.get::<i64>(row, 4)?;
        let tokens = read.get::<i64>(row, 5)?;
        let json = read.get::<&str>(row, 6)?;
        let counted_by = read.get::<Option<&str>>(row, 7)?;
        messages.push(read.message(seq, tokens, json.as_bytes(), counted_by)?);
    }
    snapshot.messages = messages.into();
    Ok(snapshot)
}

/// The rows of the history statement: one message each.
pub(crate) fn history(id: &ConversationId, rows: &[Row]) -> Result<Vec<StoredMessage>, StoreError> {
    let read = Reader::message_rows(id);
    rows.iter()
        .map(|row| {
            read.message(
                read.get::<i64>(row, 0)?,
                read.get::<i64>(row, 1)?,
                read.get::<&str>(row, 2)?.as_bytes(),
                read.get::<Option<&str>>(row, 3)?,
            )
        })
        .collect()
}

/// The conversation's rows are read through the core's
/// [`RowReader`](chatmem::store::RowReader): its corrupt-data
/// errors and message decoding are every store's.
pub(crate) use chatmem::store::RowReader as Reader;

/// The driver's column getter on [`Reader`].
pub(crate) trait Column {
    /// Column `index` of `row` as a `T`; unreadable (a missing column included) is corrupt.
    fn get<'r, T: FromSql<'r>>(&self, row: &'r Row, index: usize) -> Result<T, StoreError>;
}

impl Column for Reader<'_> {
    fn get<'r, T: FromSql<'r>>(&self, row: &'r Row, index: usize) -> Result<T, StoreError> {
        row.try_get(index).map_err(|e| self.unreadable(index, e))
    }
}
