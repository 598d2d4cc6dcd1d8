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
    /// The 16 parameters of `CALL <prefix>_commit_v3(...)`, in order.
    pub(crate) values: Vec<Value>,
    /// When the batch's JSON exceeds [`MAX_PARAM_BYTES`]: the batch as JSON arrays of at most
    /// that size each (a larger single message alone), to be staged in the connection's
    /// temporary table before the call, whose messages parameter is then NULL. Empty
    /// otherwise.
    pub(crate) staged: Vec<String>,
    /// The same for the index entries, when theirs exceeds [`MAX_PARAM_BYTES`]: staged in a
    /// temporary table of their own, the index parameter then NULL.
    pub(crate) staged_index: Vec<String>,
}

impl CommitParams {
    /// The bytes of the largest packet the commit sends: the call with its parameters, or
    /// the largest staged chunk.
    pub(crate) fn largest_packet(&self) -> usize {
        let call = values_len(&self.values);
        self.staged
            .iter()
            .chain(&self.staged_index)
            .map(String::len)
            .fold(call, usize::max)
    }
}

/// The bytes a statement's parameters take in its packet (a number as 8).
pub(crate) fn values_len(values: &[Value]) -> usize {
    values
        .iter()
        .map(|v| match v {
            Value::Bytes(b) => b.len(),
            _ => 8,
        })
        .sum()
}

/// `rows` (each already JSON) as JSON arrays of at most [`MAX_PARAM_BYTES`] each (a larger
/// single row alone): one array when they fit in one parameter, else the chunks to stage.
fn chunked(rows: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut chunks: Vec<String> = Vec::new();
    let mut chunk = String::from("[");
    for row in rows {
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
    chunks
}

/// One parameter's value when `chunks` is one array; else NULL, and the chunks to stage.
fn inline_or_staged(mut chunks: Vec<String>) -> (Value, Vec<String>) {
    if chunks.len() == 1 {
        (Value::Bytes(chunks.remove(0).into_bytes()), Vec::new())
    } else {
        (Value::NULL, chunks)
    }
}

/// A row serde_json could not write, as `InvalidInput` naming `what`.
fn json_row(row: Result<String, serde_json::Error>, what: &str) -> Result<String, StoreError> {
    row.map_err(|e| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("{what} cannot be written as JSON"),
        )
        .with_source(e)
    })
}

/// The procedure's parameters for `commit` to conversation `id`, converted before anything
/// is sent.
pub(crate) fn commit_params(id: &ConversationId, commit: &Commit) -> Result<CommitParams, StoreError> {
    // The appended messages as JSON arrays of [seq, tokens, counted_by, json text]: the
    // procedure reads them with JSON_TABLE, so a batch is one parameter.
    let rows = commit
        .appended()
        .iter()
        .map(|m| {
            let row = (
                bigint(m.seq, "sequence")?,
                m.tokens,
                m.counted_by.as_deref(),
                m.message_json()?,
            );
            json_row(serde_json::to_string(&row), "an appended message")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (messages, staged) = inline_or_staged(chunked(rows));
    // The index entries of the messages the commit keeps (the procedure inserts no message
    // below the delete bound) as [seq, len, [[term, tf], ...]], with their count and total
    // length for the conversation's totals.
    let kept = |seq: u64| commit.delete_below().is_none_or(|below| seq >= below);
    let (mut docs, mut total_len) = (0i64, 0i64);
    let mut index_rows = Vec::new();
    for entry in commit.index().iter().filter(|e| kept(e.seq)) {
        docs += 1;
        total_len += i64::from(entry.terms.len);
        let row = (bigint(entry.seq, "sequence")?, entry.terms.len, &entry.terms.terms);
        index_rows.push(json_row(serde_json::to_string(&row), "an index entry")?);
    }
    let (index, staged_index) = inline_or_staged(chunked(index_rows));
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
        index,
        Value::Int(docs),
        Value::Int(total_len),
    ];
    Ok(CommitParams {
        values,
        staged,
        staged_index,
    })
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

    /// An index entry as the procedure reads it: [seq, len, [[term, tf], ...]].
    type IndexRow = (i64, u32, Vec<(String, u32)>);

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
        assert_eq!(params.values.len(), 16);
        assert!(params.staged.is_empty() && params.staged_index.is_empty());
        assert_eq!(params.values[13], Value::Bytes(b"[]".to_vec()), "no index entries");
        assert_eq!(
            (&params.values[14], &params.values[15]),
            (&Value::Int(0), &Value::Int(0))
        );
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
            staged_index: Vec::new(),
        };
        assert_eq!(c.largest_packet(), 26);
        let c = CommitParams {
            staged: vec!["a".repeat(5), "b".repeat(40)],
            ..c
        };
        assert_eq!(c.largest_packet(), 40);
        let c = CommitParams {
            staged_index: vec!["c".repeat(50)],
            ..c
        };
        assert_eq!(c.largest_packet(), 50);
    }

    #[test]
    fn index_entries_travel_as_one_json_array_without_those_the_commit_deletes() {
        use chatmem::Message;
        use chatmem::store::Snapshot;
        let id = ConversationId::new("c").unwrap();
        let commit = Commit::on(&Snapshot::empty())
            .index(true)
            .append(Message::user("Order order LC2026"), 3)
            .append(Message::assistant("o'clock 'walrus' \"order\""), 3)
            .append(Message::user("..."), 1)
            .window_start(2)
            .build()
            .unwrap();
        assert_eq!(commit.delete_below(), Some(2));
        let params = commit_params(&id, &commit).unwrap();
        let Value::Bytes(json) = &params.values[13] else {
            panic!("{:?}", params.values[13])
        };
        let rows: Vec<IndexRow> = serde_json::from_slice(json).unwrap();
        let want: Vec<IndexRow> = vec![
            (
                2,
                3,
                vec![("o'clock".into(), 1), ("walrus".into(), 1), ("order".into(), 1)],
            ),
            // No terms, still an indexed message (of length 0).
            (3, 0, vec![]),
        ];
        assert_eq!(rows, want, "seq 1 is below the delete bound: not indexed");
        assert_eq!(
            (&params.values[14], &params.values[15]),
            (&Value::Int(2), &Value::Int(3))
        );
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
        assert!(params.staged_index.is_empty(), "not indexed");
        let mut seqs = Vec::new();
        for chunk in &params.staged {
            assert!(chunk.len() <= MAX_PARAM_BYTES);
            let rows: Vec<(i64, u32, Option<String>, String)> = serde_json::from_str(chunk).unwrap();
            seqs.extend(rows.iter().map(|r| r.0));
        }
        assert_eq!(seqs, (1..=9).collect::<Vec<_>>());
    }

    #[test]
    fn a_large_index_is_staged_in_chunks() {
        use chatmem::Message;
        use chatmem::store::Snapshot;
        let id = ConversationId::new("c").unwrap();
        let mut builder = Commit::on(&Snapshot::empty()).index(true);
        for m in 0..24 {
            // 4,096 distinct terms of 60 bytes: about 270 KB of index each.
            let text: String = (0..4096).map(|i| format!("{}{m:04}w{i:05} ", "t".repeat(50))).collect();
            builder = builder.append(Message::user(text), 1);
        }
        let commit = builder.build().unwrap();
        let params = commit_params(&id, &commit).unwrap();
        assert_eq!(params.values[13], Value::NULL);
        assert!(params.staged_index.len() >= 2, "{}", params.staged_index.len());
        let mut seqs = Vec::new();
        for chunk in &params.staged_index {
            assert!(chunk.len() <= MAX_PARAM_BYTES);
            let rows: Vec<IndexRow> = serde_json::from_str(chunk).unwrap();
            seqs.extend(rows.iter().map(|r| r.0));
        }
        assert_eq!(seqs, (1..=24).collect::<Vec<_>>());
        assert_eq!(params.values[14], Value::Int(24));
    }
}
