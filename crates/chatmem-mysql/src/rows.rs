//! Reading result rows into [`Snapshot`]s and [`StoredMessage`]s, bad data becoming
//! [`StoreError::corrupt`] errors that name the conversation.

use mysql_async::Row;
use mysql_async::prelude::FromValue;

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
    let system = match read.get::<Option<Vec<u8>>>(head, 7)? {
        Some(json) => {
            let (Some(seq), Some(tokens)) = (read.get::<Option<i64>>(head, 4)?, read.get::<Option<i64>>(head, 5)?)
            else {
                return Err(StoreError::corrupt(id, "the system message has no seq or token count"));
            };
            Some(read.message(seq, tokens, read.get(head, 6)?, &json)?)
        }
        None => None,
    };
    let summary = read
        .get::<Option<Vec<u8>>>(head, 8)?
        .map(|json| Summary::from_json(id, &json))
        .transpose()?;
    let mut snapshot = Snapshot {
        version: read.u64(read.get::<Option<i64>>(head, 1)?, "version")?,
        system,
        window_start: read.u64(read.get::<Option<i64>>(head, 2)?, "window_start")?,
        next_seq: read.u64(read.get::<Option<i64>>(head, 3)?, "next_seq")?,
        messages: SharedMessages::new(),
        summary,
    };
    let read = Reader {
        id,
        what: "a message row",
    };
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        let json = read.get::<Vec<u8>>(row, 7)?;
        messages.push(read.message(read.get(row, 4)?, read.get(row, 5)?, read.get(row, 6)?, &json)?);
    }
    snapshot.messages = messages.into();
    Ok(snapshot)
}

/// The rows of the history statement: seq, tokens, counted_by, json.
pub(crate) fn history(id: &ConversationId, rows: &[Row]) -> Result<Vec<StoredMessage>, StoreError> {
    let read = Reader {
        id,
        what: "a message row",
    };
    rows.iter()
        .map(|row| {
            let json = read.get::<Vec<u8>>(row, 3)?;
            read.message(read.get(row, 0)?, read.get(row, 1)?, read.get(row, 2)?, &json)
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
    pub(crate) fn get<T: FromValue>(&self, row: &Row, index: usize) -> Result<T, StoreError> {
        match row.get_opt::<T, usize>(index) {
            Some(Ok(value)) => Ok(value),
            Some(Err(e)) => Err(StoreError::corrupt(
                self.id,
                format!("{} has an unreadable column {index}", self.what),
            )
            .with_source(e)),
            None => Err(StoreError::corrupt(
                self.id,
                format!("{} has no column {index}", self.what),
            )),
        }
    }

    /// A NOT NULL counter as a u64; NULL or negative is corrupt.
    pub(crate) fn u64(&self, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
        stored_counter(self.id, value, column)
    }

    /// A message from its columns, through the one decoding every store shares.
    fn message(
        &self,
        seq: i64,
        tokens: i64,
        counted_by: Option<String>,
        json: &[u8],
    ) -> Result<StoredMessage, StoreError> {
        let mut message = StoredMessage::from_columns(self.id, seq, tokens, json)?;
        message.counted_by = counted_by.map(Into::into);
        Ok(message)
    }
}
