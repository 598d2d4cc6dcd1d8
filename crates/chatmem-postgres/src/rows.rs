//! The driver's side of reading result rows: [`Column`], and [`COLUMNS`], chatmem-sql's [`SqlColumns`] for its rows, so that
//! chatmem-sql's [`load_snapshot`](chatmem_sql::load_snapshot) and
//! [`history_messages`](chatmem_sql::history_messages) read them, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use std::borrow::Cow;

use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::FromSql;

use chatmem::store::StoreError;
use chatmem_sql::SqlColumns;

/// The conversation's rows are read through chatmem-sql's
/// [`RowReader`](chatmem_sql::RowReader): its corrupt-data
/// errors and message decoding are every store's.
pub(crate) use chatmem_sql::RowReader as Reader;

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

/// [`Column`] as chatmem-sql's [`SqlColumns`]: how the load and history rows are read.
pub(crate) const COLUMNS: SqlColumns<Row> = SqlColumns {
    bigint: |read, row, index| read.get(row, index),
    text: |read, row, index| Ok(read.get::<Option<&str>>(row, index)?.map(Cow::Borrowed)),
};
