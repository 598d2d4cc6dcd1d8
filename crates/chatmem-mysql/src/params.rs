//! Turning a [`Commit`] into the commit procedure's parameters.
//!
//! A `Commit` cannot be built invalid, so nothing here checks sequences or the window:
//! values are only converted to what MySQL stores.

use std::time::Duration;

use mysql_async::Value;

use chatmem::store::{Commit, StoreError, StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Summary};

/// The longest TTL written as an expiry: 5,000 years. `DATETIME` ends in 9999, so a much
/// longer one could not be stored; as `ChatMemory::ttl` documents, a TTL too long to
/// represent never expires.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(5_000 * 366 * 24 * 3600);

/// The 13 parameters of `CALL <prefix>_commit(...)`, in order, converted before anything
/// is sent.
pub(crate) fn commit_params(id: &ConversationId, commit: &Commit) -> Result<Vec<Value>, StoreError> {
    // The appended messages as one JSON array of [seq, tokens, counted_by, json text]:
    // the procedure reads it with JSON_TABLE, so a batch of any size is one parameter.
    let mut rows = Vec::with_capacity(commit.appended().len());
    for m in commit.appended() {
        rows.push((
            bigint(m.seq, "sequence")?,
            m.tokens,
            m.counted_by.as_deref(),
            m.message_json()?,
        ));
    }
    let messages = serde_json::to_string(&rows).map_err(|e| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            "the appended messages cannot be written as JSON",
        )
        .with_source(e)
    })?;
    let system = commit.system();
    let text = |s: Option<String>| s.map_or(Value::NULL, |s| Value::Bytes(s.into_bytes()));
    let int = |n: Option<i64>| n.map_or(Value::NULL, Value::Int);
    Ok(vec![
        Value::Bytes(id.as_str().as_bytes().to_vec()),
        Value::Int(bigint(commit.expected_version(), "expected version")?),
        int(system.map(|s| bigint(s.seq, "system sequence")).transpose()?),
        int(system.map(|s| i64::from(s.tokens))),
        text(system.map(StoredMessage::message_json).transpose()?),
        text(system.and_then(|s| s.counted_by.as_deref().map(str::to_owned))),
        Value::Int(bigint(commit.window_start(), "window start")?),
        Value::Int(bigint(commit.next_seq(), "next sequence")?),
        int(commit.delete_below().map(|b| bigint(b, "delete bound")).transpose()?),
        int(commit.ttl().and_then(ttl_micros)),
        Value::UInt(commit.token()),
        text(commit.summary().map(Summary::to_json)),
        Value::Bytes(messages.into_bytes()),
    ])
}

/// A number as MySQL's `BIGINT`.
fn bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("{what} {value} is beyond what MySQL's BIGINT holds"),
        )
    })
}

/// A TTL in microseconds, or `None` (never expires) beyond [`MAX_TTL`].
fn ttl_micros(ttl: Duration) -> Option<i64> {
    if ttl > MAX_TTL {
        return None;
    }
    i64::try_from(ttl.as_micros()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_too_long_to_store_never_expire() {
        assert_eq!(ttl_micros(Duration::from_secs(2)), Some(2_000_000));
        assert!(ttl_micros(MAX_TTL).is_some());
        assert_eq!(ttl_micros(MAX_TTL + Duration::from_secs(1)), None);
        assert_eq!(ttl_micros(Duration::MAX), None);
    }

    #[test]
    fn messages_travel_as_one_json_array() {
        use chatmem::Message;
        let id = ConversationId::new("c").unwrap();
        let commit = chatmem_test::commit(
            0,
            vec![StoredMessage::new(1, 3, Message::user("hi 🦀 \"q\"")).counted_by("heuristic")],
            1,
            chatmem::Retention::DropEvicted,
        );
        let params = commit_params(&id, &commit).unwrap();
        assert_eq!(params.len(), 13);
        let Value::Bytes(json) = &params[12] else {
            panic!("{:?}", params[12])
        };
        let rows: Vec<(i64, u32, Option<String>, String)> = serde_json::from_slice(json).unwrap();
        assert_eq!(rows[0].0, 1);
        assert_eq!(rows[0].2.as_deref(), Some("heuristic"));
        assert_eq!(rows[0].3, commit.appended()[0].message_json().unwrap());
    }
}
