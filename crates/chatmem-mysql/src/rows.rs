//! The driver's side of reading result rows: [`Column`], and [`COLUMNS`], chatmem-sql's [`SqlColumns`] for its rows, so that
//! chatmem-sql's [`load_snapshot`](chatmem_sql::load_snapshot) and
//! [`history_messages`](chatmem_sql::history_messages) read them, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use std::borrow::Cow;

use mysql_async::Row;
use mysql_async::prelude::FromValue;

use chatmem::store::StoreError;
use chatmem_sql::SqlColumns;

/// The conversation's rows are read through chatmem-sql's
/// [`RowReader`](chatmem_sql::RowReader): its corrupt-data
/// errors and message decoding are every store's.
pub(crate) use chatmem_sql::RowReader as Reader;

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

/// [`Column`] as chatmem-sql's [`SqlColumns`]: how the load and history rows are read.
pub(crate) const COLUMNS: SqlColumns<Row> = SqlColumns {
    bigint: |read, row, index| read.get(row, index),
    text: |read, row, index| Ok(read.get::<Option<String>>(row, index)?.map(Cow::Owned)),
};
