//! Parsing script replies into a [`Snapshot`] and its [`StoredMessage`]s.

use chatmem::store::{Snapshot, StoreError, StoredMessage};
use chatmem::{ConversationId, Summary};
use redis::Value;

use crate::codec;

/// The bytes of a bulk or simple string reply; `None` for nil.
pub(crate) fn reply_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// A number reply (integers come back as strings from hashes).
pub(crate) fn reply_num(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::BulkString(b) => codec::parse_num(b),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// A snapshot as read, with what the window cache keeps beside it.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) snapshot: Snapshot,
    /// The conversation's creation marker (`None`: not stored, or no conversation).
    pub(crate) created: Option<u64>,
    /// The stored size of each of `snapshot.messages`, in order.
    pub(crate) sizes: Vec<usize>,
}

/// Builds the snapshot from a load's reply: the [`LOAD_FIELDS`](crate::scripts::LOAD_FIELDS)
/// values, then the message records (`{}` for no conversation).
pub(crate) fn parse_snapshot(id: &ConversationId, reply: Value) -> Result<Loaded, StoreError> {
    let bad_meta = |field: &str| StoreError::corrupt(id, format!("metadata field {field} is missing or invalid"));
    let unexpected = || StoreError::corrupt(id, "unexpected load reply");
    let Value::Array(items) = reply else {
        return Err(unexpected());
    };
    if items.is_empty() {
        return Ok(Loaded {
            snapshot: Snapshot::empty(),
            created: None,
            sizes: Vec::new(),
        });
    }
    let [
        version,
        window_start,
        next_seq,
        sys_seq,
        sys_tokens,
        sys_json,
        sys_counted_by,
        summary,
        created,
        records,
    ] = <[Value; 10]>::try_from(items).map_err(|_| unexpected())?;
    let version = reply_num(&version).ok_or_else(|| bad_meta("version"))?;
    let window_start = reply_num(&window_start).ok_or_else(|| bad_meta("window_start"))?;
    let next_seq = reply_num(&next_seq).ok_or_else(|| bad_meta("next_seq"))?;
    let system = match reply_bytes(&sys_json) {
        None => None,
        Some(json) => {
            let seq = reply_num(&sys_seq).ok_or_else(|| bad_meta("sys_seq"))?;
            let tokens = reply_num(&sys_tokens)
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| bad_meta("sys_tokens"))?;
            let mut system = StoredMessage::from_json(id, seq, tokens, &json)?;
            // Missing (nil) for a system message stored without a counter name.
            system.counted_by = reply_bytes(&sys_counted_by)
                .map(|by| {
                    String::from_utf8(by)
                        .map(Into::into)
                        .map_err(|_| bad_meta("sys_counted_by"))
                })
                .transpose()?;
            Some(system)
        }
    };
    // Missing (nil) until a commit stores one, and in data written before summaries.
    let summary = reply_bytes(&summary)
        .map(|json| Summary::from_json(id, &json))
        .transpose()?;
    let records = match records {
        Value::Array(records) => records,
        Value::Nil => Vec::new(),
        _ => return Err(unexpected()),
    };
    // Missing (nil) in conversations created before chatmem stored it.
    let created = match created {
        Value::Nil => None,
        v => Some(reply_num(&v).ok_or_else(|| bad_meta("created"))?),
    };
    let mut messages = Vec::with_capacity(records.len());
    let mut sizes = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let bytes = match r {
            Value::BulkString(b) => b.as_slice(),
            _ => return Err(StoreError::corrupt(id, format!("message record #{i} is not a string"))),
        };
        messages.push(codec::decode(id, bytes, i)?);
        sizes.push(bytes.len());
    }
    Ok(Loaded {
        snapshot: Snapshot {
            version,
            system,
            window_start,
            next_seq,
            messages: messages.into(),
            summary,
        },
        created,
        sizes,
    })
}
