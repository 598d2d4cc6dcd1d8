//! Reading result rows into [`Snapshot`]s and [`StoredMessage`]s, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::FromSql;

use chatmem::ConversationId;
use chatmem::store::{ConversationRow, Snapshot, StoreError, StoredMessage, snapshot_from_rows};

/// The rows of the load statement: the conversation row, then its messages. No row at
/// all: an unknown or expired conversation.
pub(crate) fn snapshot(id: &ConversationId, rows: &[Row]) -> Result<Snapshot, StoreError> {
    let head = |read: &Reader<'_>, head: &Row| {
        Ok(ConversationRow {
            version: read.get(head, 1)?,
            window_start: read.get(head, 2)?,
            next_seq: read.get(head, 3)?,
            system: read.system_message(
                read.get(head, 4)?,
                read.get(head, 5)?,
                read.get::<Option<&str>>(head, 6)?.map(str::as_bytes),
                read.get(head, 7)?,
            )?,
            summary: read.summary(read.get::<Option<&str>>(head, 8)?.map(str::as_bytes))?,
        })
    };
    snapshot_from_rows(id, rows, head, |read, row| {
        read.message(
            read.get(row, 4)?,
            read.get(row, 5)?,
            read.get::<&str>(row, 6)?.as_bytes(),
            read.get(row, 7)?,
        )
    })
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
