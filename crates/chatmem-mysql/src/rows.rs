//! Reading result rows into [`Snapshot`]s and [`StoredMessage`]s, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use mysql_async::Row;
use mysql_async::prelude::FromValue;

use chatmem::ConversationId;
use chatmem::store::{ConversationRow, Snapshot, StoreError, StoredMessage, snapshot_from_rows};

/// The rows of the load statement: the conversation row, then its messages. No row at
/// all: an unknown or expired conversation.
pub(crate) fn snapshot(id: &ConversationId, rows: &[Row]) -> Result<Snapshot, StoreError> {
    let head = |read: &Reader<'_>, head: &Row| {
        let system_json = read.get::<Option<Vec<u8>>>(head, 7)?;
        let system_counted_by = read.get::<Option<String>>(head, 6)?;
        let summary_json = read.get::<Option<Vec<u8>>>(head, 8)?;
        Ok(ConversationRow {
            version: read.get(head, 1)?,
            window_start: read.get(head, 2)?,
            next_seq: read.get(head, 3)?,
            system: read.system_message(
                read.get(head, 4)?,
                read.get(head, 5)?,
                system_json.as_deref(),
                system_counted_by.as_deref(),
            )?,
            summary: read.summary(summary_json.as_deref())?,
        })
    };
    snapshot_from_rows(id, rows, head, |read, row| {
        let json = read.get::<Vec<u8>>(row, 7)?;
        let counted_by = read.get::<Option<String>>(row, 6)?;
        read.message(read.get(row, 4)?, read.get(row, 5)?, &json, counted_by.as_deref())
    })
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
