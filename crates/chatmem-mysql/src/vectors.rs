//! Recall's vectors: the parameters of their statements (see `sql.rs`) and reading their rows.
//!
//! A vector lives in its message's row (`vector_model`, `vector`: little-endian `f32`s), so it
//! goes wherever its message goes. Writing one is two statements: the messages at the seqs
//! are read and checked here with [`MessageVector::fits`] (the fingerprint is the core's, so
//! it cannot be computed in SQL), then written in one `UPDATE` on the rows that still hold
//! the JSON that was checked (compared by its SHA-256, so the message is not sent back). A
//! search reads the conversation's vectors of one model and dimension and ranks them here by
//! the core's rule, an exact scan.

use std::collections::HashMap;

use mysql_async::{Row, Value};

use chatmem::ConversationId;
use chatmem::recall::{IndexedMessage, MessageVector, Vector, VectorHit, rank_by_similarity};
use chatmem::store::{StoreError, StoreErrorKind, StoredMessage};

use crate::rows::{Column, Reader};

/// The columns of a message in the statements' rows: seq, tokens, json, counted_by.
const SEQ: usize = 0;
const TOKENS: usize = 1;
const JSON: usize = 2;
const COUNTED_BY: usize = 3;
/// After them: the commit's time (a search's and `unembedded`'s rows), or the JSON's hash (a
/// target's).
const AT: usize = 4;
const HASH: usize = 4;
/// A search row's vector.
const VECTOR: usize = 5;

fn key(id: &ConversationId) -> Value {
    Value::Bytes(id.as_str().as_bytes().to_vec())
}

/// A vector of `dim` values as stored: four bytes each.
fn stored_len(dim: usize) -> Value {
    Value::UInt(u64::try_from(dim).unwrap_or(u64::MAX).saturating_mul(4))
}

/// A JSON array parameter, as `serde_json` wrote it.
fn json_param(what: &str, json: serde_json::Result<String>) -> Result<Value, StoreError> {
    json.map(|json| Value::Bytes(json.into_bytes())).map_err(|e| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("{what} cannot be written as JSON"),
        )
        .with_source(e)
    })
}

fn message(read: &Reader<'_>, row: &Row) -> Result<StoredMessage, StoreError> {
    let json: String = read.get(row, JSON)?;
    let counted_by: Option<String> = read.get(row, COUNTED_BY)?;
    read.message(
        read.get(row, SEQ)?,
        read.get(row, TOKENS)?,
        json.as_bytes(),
        counted_by.as_deref(),
    )
}

/// The parameters of `VECTOR_SEARCH` for `query` before `before`.
pub(crate) fn search_params(id: &ConversationId, query: &Vector, before: u64) -> Vec<Value> {
    vec![
        key(id),
        Value::Int(i64::try_from(before).unwrap_or(i64::MAX)),
        Value::Bytes(query.model().as_bytes().to_vec()),
        stored_len(query.dim()),
    ]
}

/// The best `limit` of a vector search's candidate rows, ranked by the core's rule; only
/// their messages are decoded.
pub(crate) fn hits(
    id: &ConversationId,
    rows: &[Row],
    query: &Vector,
    limit: usize,
) -> Result<Vec<VectorHit>, StoreError> {
    let read = Reader {
        id,
        what: "a vector search row",
    };
    let mut candidates = Vec::with_capacity(rows.len());
    let mut at_row = HashMap::with_capacity(rows.len());
    let mut values: Vec<f32> = Vec::with_capacity(query.dim());
    for (i, row) in rows.iter().enumerate() {
        let seq = read.counter(read.get(row, SEQ)?, "seq")?;
        let Some(Value::Bytes(bytes)) = row.as_ref(VECTOR) else {
            return Err(StoreError::corrupt(id, "a vector is not stored as bytes"));
        };
        if bytes.len() != query.dim() * 4 {
            return Err(StoreError::corrupt(
                id,
                "a vector search found a vector of another length",
            ));
        }
        values.clear();
        values.extend(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        candidates.push((seq, query.dot(&values)));
        at_row.insert(seq, i);
    }
    rank_by_similarity(candidates, limit)
        .into_iter()
        .map(|(seq, similarity)| {
            let row = at_row
                .get(&seq)
                .and_then(|&i| rows.get(i))
                .ok_or_else(|| StoreError::corrupt(id, "a ranked vector lost its row"))?;
            Ok(VectorHit::new(message(&read, row)?, read.get(row, AT)?, similarity))
        })
        .collect()
}

/// The parameters of `VECTOR_TARGETS`: the distinct seqs of `vectors`; `None` when there is
/// none a message could have.
pub(crate) fn target_params(id: &ConversationId, vectors: &[MessageVector]) -> Result<Option<Vec<Value>>, StoreError> {
    let mut seqs: Vec<i64> = vectors.iter().filter_map(|v| i64::try_from(v.seq).ok()).collect();
    seqs.sort_unstable();
    seqs.dedup();
    if seqs.is_empty() {
        return Ok(None);
    }
    Ok(Some(vec![
        json_param("the seqs to embed", serde_json::to_string(&seqs))?,
        key(id),
    ]))
}

/// The parameters of `VECTOR_PUT` from the target rows: per stored message the last of
/// `vectors` that fits it (a message keeps one vector); `None` when none fits.
pub(crate) fn put_params(
    id: &ConversationId,
    rows: &[Row],
    vectors: &[MessageVector],
) -> Result<Option<Vec<Value>>, StoreError> {
    let read = Reader {
        id,
        what: "a message to embed",
    };
    let mut writes: Vec<(u64, String, &str, String)> = Vec::with_capacity(rows.len());
    for row in rows {
        let stored = message(&read, row)?;
        if let Some(v) = vectors.iter().rev().find(|v| v.fits(&stored)) {
            let hash: String = read.get(row, HASH)?;
            writes.push((stored.seq, hash, v.vector.model(), hex(&v.vector.to_bytes())));
        }
    }
    if writes.is_empty() {
        return Ok(None);
    }
    Ok(Some(vec![
        json_param("the vectors", serde_json::to_string(&writes))?,
        key(id),
    ]))
}

/// The parameters of `UNEMBEDDED`; `None` when no seq can follow `after`.
pub(crate) fn unembedded_params(
    id: &ConversationId,
    model: &str,
    dim: usize,
    after: u64,
    limit: usize,
) -> Option<Vec<Value>> {
    let after = i64::try_from(after).ok()?;
    Some(vec![
        key(id),
        Value::Int(after),
        Value::Bytes(model.as_bytes().to_vec()),
        stored_len(dim),
        Value::UInt(u64::try_from(limit).unwrap_or(u64::MAX)),
    ])
}

/// The rows of `UNEMBEDDED`.
pub(crate) fn unembedded(id: &ConversationId, rows: &[Row]) -> Result<Vec<IndexedMessage>, StoreError> {
    let read = Reader {
        id,
        what: "a message without a vector",
    };
    rows.iter()
        .map(|row| Ok(IndexedMessage::new(message(&read, row)?, read.get(row, AT)?)))
        .collect()
}

/// `bytes` in lowercase hex, as `UNHEX` reads them back (JSON holds no bytes).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_go_as_hex_of_their_stored_bytes() {
        assert_eq!(hex(&[0x00, 0x80, 0x3f, 0xff]), "00803fff");
        let v = Vector::new("m", vec![1.0]).unwrap();
        assert_eq!(hex(&v.to_bytes()), "0000803f");
    }

    #[test]
    fn targets_are_the_distinct_seqs_a_message_can_have() {
        let id = ConversationId::new("c").unwrap();
        let m = chatmem::Message::user("x");
        let v = |seq| MessageVector::new(seq, &m, Vector::new("m", vec![1.0]).unwrap());
        let params = target_params(&id, &[v(3), v(1), v(3), v(u64::MAX)]).unwrap().unwrap();
        assert_eq!(params[0], Value::Bytes(b"[1,3]".to_vec()));
        assert!(target_params(&id, &[v(u64::MAX)]).unwrap().is_none());
        assert!(target_params(&id, &[]).unwrap().is_none());
    }
}
