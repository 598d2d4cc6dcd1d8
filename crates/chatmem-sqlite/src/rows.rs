//! Reading result rows into [`Snapshot`]s, [`StoredMessage`]s and ids; bad data becomes a
//! [`StoreError::corrupt`] error that names the conversation.

use chatmem::store::{CounterName, SharedMessages, Snapshot, StoreError, StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Summary};
use rusqlite::types::ValueRef;
use rusqlite::{Row, Rows};

use crate::error::db_error;

/// Where each of a message's four columns is, from its first.
const SEQ: usize = 0;
const TOKENS: usize = 1;
const JSON: usize = 2;
const COUNTED_BY: usize = 3;

/// The columns of the load statement (`sql::LOAD`): the conversation row's, then the system
/// message's and one window message's, each as [`message`] reads them (all NULL when there
/// is none).
mod load {
    pub(super) const VERSION: usize = 0;
    pub(super) const WINDOW_START: usize = 1;
    pub(super) const NEXT_SEQ: usize = 2;
    pub(super) const SUMMARY: usize = 3;
    pub(super) const SYSTEM: usize = 4;
    pub(super) const MESSAGE: usize = 8;
}

/// The rows of the load statement; `what` names the operation in driver errors. No row at
/// all: an unknown or expired conversation.
pub(crate) fn snapshot(mut rows: Rows<'_>, id: &ConversationId, what: &str) -> Result<Snapshot, StoreError> {
    let err = |e| db_error(what, e);
    let mut snap: Option<Snapshot> = None;
    let mut messages = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        if snap.is_none() {
            let system = match row.get_ref(load::SYSTEM + JSON).map_err(err)? {
                ValueRef::Null => None,
                _ => Some(message(row, id, load::SYSTEM, what)?),
            };
            snap = Some(Snapshot {
                version: to_u64(id, row.get(load::VERSION).map_err(err)?, "version")?,
                system,
                window_start: to_u64(id, row.get(load::WINDOW_START).map_err(err)?, "window_start")?,
                next_seq: to_u64(id, row.get(load::NEXT_SEQ).map_err(err)?, "next_seq")?,
                messages: SharedMessages::new(),
                summary: match row.get_ref(load::SUMMARY).map_err(err)? {
                    ValueRef::Null => None,
                    json => {
                        let json = json
                            .as_bytes()
                            .map_err(|_| StoreError::corrupt(id, "its summary is not stored as JSON text"))?;
                        Some(Summary::from_json(id, json)?)
                    }
                },
            });
        }
        // The conversation row joined to no message: an empty window.
        if !matches!(row.get_ref(load::MESSAGE + SEQ).map_err(err)?, ValueRef::Null) {
            messages.push(message(row, id, load::MESSAGE, what)?);
        }
    }
    Ok(snap.map_or_else(Snapshot::empty, |snap| Snapshot {
        messages: messages.into(),
        ..snap
    }))
}

/// The message in the four columns of `row` from `first` on: seq, tokens, json, counted_by.
pub(crate) fn message(
    row: &Row<'_>,
    id: &ConversationId,
    first: usize,
    what: &str,
) -> Result<StoredMessage, StoreError> {
    let err = |e| db_error(what, e);
    let seq: i64 = row.get(first + SEQ).map_err(err)?;
    let tokens: i64 = row.get(first + TOKENS).map_err(err)?;
    let json = row
        .get_ref(first + JSON)
        .map_err(err)?
        .as_bytes()
        // Text, or a blob that may still hold JSON.
        .map_err(|_| StoreError::corrupt(id, format!("message seq {seq} is not stored as JSON text")))?;
    let mut m = chatmem_sql::stored_message(id, seq, tokens, json)?;
    m.counted_by = counter_name(row, first + COUNTED_BY).map_err(err)?;
    Ok(m)
}

/// The conversation ids in the first column of `rows`.
pub(crate) fn ids(mut rows: Rows<'_>, what: &str) -> Result<Vec<ConversationId>, StoreError> {
    let err = |e| db_error(what, e);
    let mut ids = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        ids.push(id(row, 0, what)?);
    }
    Ok(ids)
}

/// The conversation id in column `i` of `row`.
pub(crate) fn id(row: &Row<'_>, i: usize, what: &str) -> Result<ConversationId, StoreError> {
    let raw: String = row.get(i).map_err(|e| db_error(what, e))?;
    ConversationId::new(raw)
        .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, "a stored conversation id is invalid").with_source(e))
}

/// A stored count or sequence; a negative one is corrupt data.
pub(crate) fn to_u64(id: &ConversationId, value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::corrupt(id, format!("{what} is {value}")))
}

/// The counter name in column `i` (NULL: none recorded), read without copying it when it
/// names one of chatmem's counters.
fn counter_name(row: &Row<'_>, i: usize) -> rusqlite::Result<Option<CounterName>> {
    let name = row.get_ref(i)?.as_str_or_null()?;
    Ok(name.map(CounterName::from))
}
