//! Reading result rows into [`Snapshot`]s and [`StoredMessage`]s, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use deadpool_postgres::tokio_postgres::Row;

use chatmem::store::{SharedMessages, Snapshot, StoreError, StoredMessage, stored_counter};
use chatmem::{ConversationId, Summary};

/// The rows of the load statement: the conversation row, then its messages. No row at
/// all: an unknown or expired conversation.
pub(crate) fn snapshot(id: &ConversationId, rows: &[Row]) -> Result<Snapshot, StoreError> {
    let mut rows = rows.iter();
    let Some(head) = rows.next() else {
        return Ok(Snapshot::empty());
    };
    let read = Reader {
        id,
        what: "the conversation row",
    };
    let system = match read.get::<Option<String>>(head, 6)? {
        Some(json) => {
            let (Some(seq), Some(tokens)) = (read.get::<Option<i64>>(head, 4)?, read.get::<Option<i64>>(head, 5)?)
            else {
                return Err(StoreError::corrupt(id, "the system message has no seq or token count"));
            };
            let counted_by = read.get::<Option<&str>>(head, 7)?;
            Some(read.message(seq, tokens, &json, counted_by)?)
        }
        None => None,
    };
    let mut snapshot = Snapshot {
        version: read.u64(read.get::<Option<i64>>(head, 1)?, "version")?,
        system,
        window_start: read.u64(read.get::<Option<i64>>(head, 2)?, "window_start")?,
        next_seq: read.u64(read.get::<Option<i64>>(head, 3)?, "next_seq")?,
        messages: SharedMessages::new(),
        // NULL: none yet, as for every conversation written before schema version 4.
        summary: read
            .get::<Option<&str>>(head, 8)?
            .map(|json| Summary::from_json(id, json.as_bytes()))
            .transpose()?,
    };
    let read = Reader {
        id,
        what: "a message row",
    };
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        let seq = read.get::<i64>(row, 4)?;
        let tokens = read.get::<i64>(row, 5)?;
        let json = read.get::<&str>(row, 6)?;
        let counted_by = read.get::<Option<&str>>(row, 7)?;
        messages.push(read.message(seq, tokens, json, counted_by)?);
    }
    snapshot.messages = messages.into();
    Ok(snapshot)
}

/// The rows of the history statement: one message each.
pub(crate) fn history(id: &ConversationId, rows: &[Row]) -> Result<Vec<StoredMessage>, StoreError> {
    let read = Reader {
        id,
        what: "a message row",
    };
    rows.iter()
        .map(|row| {
            read.message(
                read.get::<i64>(row, 0)?,
                read.get::<i64>(row, 1)?,
                read.get::<&str>(row, 2)?,
                read.get::<Option<&str>>(row, 3)?,
            )
        })
        .collect()
}

/// Reads columns of one conversation's rows, turning bad data into
/// [`StoreError::corrupt`] errors.
pub(crate) struct Reader<'a> {
    pub(crate) id: &'a ConversationId,
    /// The row being read, for errors: "the conversation row", "a message row"...
    pub(crate) what: &'static str,
}

impl Reader<'_> {
    pub(crate) fn get<'r, T: deadpool_postgres::tokio_postgres::types::FromSql<'r>>(
        &self,
        row: &'r Row,
        index: usize,
    ) -> Result<T, StoreError> {
        row.try_get(index).map_err(|e| {
            StoreError::corrupt(self.id, format!("{} has an unreadable column {index}", self.what)).with_source(e)
        })
    }

    /// A NOT NULL counter as a u64; NULL or negative is corrupt.
    pub(crate) fn u64(&self, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
        stored_counter(self.id, value, column)
    }

    /// A message from its columns, through the one decoding every store shares.
    /// `counted_by` NULL: written before schema version 3, or without a counter name.
    fn message(
        &self,
        seq: i64,
        tokens: i64,
        json: &str,
        counted_by: Option<&str>,
    ) -> Result<StoredMessage, StoreError> {
        let mut message = StoredMessage::from_columns(self.id, seq, tokens, json.as_bytes())?;
        message.counted_by = counted_by.map(Into::into);
        Ok(message)
    }
}
