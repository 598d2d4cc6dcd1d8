//! Turning a [`Commit`] into the commit procedure's parameters.
//!
//! A `Commit` cannot be built invalid, so nothing here checks sequences or the window:
//! values are only converted to what MySQL stores.

use std::time::Duration;

use mysql_async::Value;

use chatmem::store::{Commit, StoreError, StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Summary};
use chatmem_sql::to_bigint;

/// The longest TTL written as an expiry: 5,000 years. `DATETIME` ends in 9999, so a much
/// longer one could not be stored; as `ChatMemory::ttl` documents, a TTL too long to
/// represent never expires.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(5_000 * 366 * 24 * 3600);

/// The largest JSON text sent as one parameter: well under the smallest
/// `max_allowed_packet` servers ship with (MariaDB 16 MiB, MySQL 64 MiB), which a single
/// value can never exceed.
pub(crate) const MAX_PARAM_BYTES: usize = 4 << 20;

/// A commit as the procedure takes it.
pub(crate) struct CommitParams {
    /// The 13 parameters of `CALL <prefix>_commit(...)`, in order.
    pub(crate) values: Vec<Value>,
    /// When the batch's JSON exceeds [`MAX_PARAM_BYTES`]: the batch as JSON arrays of at most
    /// that size each (a larger single message alone), to be staged in the connection's
    /// temporary table before the call, whose messages parameter is then NULL. Empty
    /// otherwise.
    pub(crate) staged: Vec<String>,
}

impl CommitParams {
    /// The bytes of the largest packet the commit sends: the call with its parameters, or
    /// the largest staged chunk.
    pub(crate) fn largest_packet(&self) -> usize {
        let call: usize = self
            .values
            .iter()
            .map(|v| match v {
                Value::Bytes(b) => b.len(),
                _ => 8,
            })
            .sum();
        self.staged.iter().map(String::len).fold(call, usize::max)
    }
}

/// The procedure's parameters for `commit` to conversation `id`, converted before anything
/// is sent.
pub(crate) fn commit_params(id: &ConversationId, commit: &Commit) -> Result<CommitParams, StoreError> {
    // The appended messages as JSON arrays of [seq, tokens, counted_by, json text]: the
    // procedure reads them with JSON_TABLE, so a batch is one parameter.
    let mut chunks: Vec<String> = Vec::new();
    let mut chunk = String::from("[");
    for m in commit.appended() {
        let row = (
            bigint(m.seq, "sequence")?,
            m.tokens,
            m.counted_by.as_deref(),
            m.message_json()?,
        );
        let row = serde_json::to_string(&row).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                "an appended message cannot be written as JSON",
            )
            .with_source(e)
        })?;
        if chunk.len() > 1 && chunk.len() + row.len() + 1 > MAX_PARAM_BYTES {
            chunk.push(']');
            chunks.push(std::mem::replace(&mut chunk, String::from("[")));
        }
        if chunk.len() > 1 {
            chunk.push(',');
        }
        chunk.push_str(&row);
    }
    chunk.push(']');
    chunks.push(chunk);
    let (messages, staged) = if chunks.len() == 1 {
        (Value::Bytes(chunks.remove(0).into_bytes()), Vec::new())
    } else {
        (Value::NULL, chunks)
    };
    let system = commit.system();
    let text = |s: Option<String>| s.map_or(Value::NULL, |s| Value::Bytes(s.into_bytes()));
    let int = |n: Option<i64>| n.map_or(Value::NULL, Value::Int);
    let values = vec![
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
        messages,
    ];
    Ok(CommitParams { values, staged })
}

/// A number as MySQL's `BIGINT`.
fn bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    to_bigint(value, what, "MySQL's BIGINT")
}

/// A TTL in microseconds, or `None` (never expires) beyond [`MAX_TTL`].
fn ttl_micros(ttl: Duration) -> Option<i64> {
    chatmem_sql::ttl_micros(ttl, MAX_TTL)
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
        let commit = Commit::on(&chatmem::store::Snapshot::empty())
            .counted_by("heuristic")
            .append(Message::user("hi 🦀 \"q\""), 3)
            .build()
            .unwrap();
        let params = commit_params(&id, &commit).unwrap();
        assert_eq!(params.values.len(), 13);
        assert!(params.staged.is_empty());
        let Value::Bytes(json) = &params.values[12] else {
            panic!("{:?}", params.values[12])
        };
        let rows: Vec<(i64, u32, Option<String>, String)> = serde_json::from_slice(json).unwrap();
        assert_eq!(rows[0].0, 1);
        assert_eq!(rows[0].2.as_deref(), Some("heuristic"));
        assert_eq!(rows[0].3, commit.appended()[0].message_json().unwrap());
    }

    #[test]
    fn the_largest_packet_is_the_call_or_a_staged_chunk() {
        let c = CommitParams {
            values: vec![Value::Bytes(vec![b'x'; 10]), Value::Int(1), Value::NULL],
            staged: vec!["a".repeat(5)],
        };
        assert_eq!(c.largest_packet(), 26);
        let c = CommitParams {
            staged: vec!["a".repeat(5), "b".repeat(40)],
            ..c
        };
        assert_eq!(c.largest_packet(), 40);
    }

    #[test]
    fn a_large_batch_is_staged_in_chunks() {
        use chatmem::Message;
        let id = ConversationId::new("c").unwrap();
        let text = "x".repeat(1 << 20);
        let batch = (1..=9)
            .map(|seq| StoredMessage::new(seq, 1, Message::user(text.as_str())))
            .collect();
        let commit = chatmem_test::commit(0, batch, 1, chatmem::Retention::DropEvicted);
        let params = commit_params(&id, &commit).unwrap();
        assert_eq!(params.values[12], Value::NULL);
        assert_eq!(params.staged.len(), 3, "three messages of 1 MiB per 4 MiB chunk");
        let mut seqs = Vec::new();
        for chunk in &params.staged {
            assert!(chunk.len() <= MAX_PARAM_BYTES);
            let rows: Vec<(i64, u32, Option<String>, String)> = serde_json::from_str(chunk).unwrap();
            seqs.extend(rows.iter().map(|r| r.0));
        }
        assert_eq!(seqs, (1..=9).collect::<Vec<_>>());
    }
}
