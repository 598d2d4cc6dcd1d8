//! Recall's vectors: one per indexed message, in the message's row (`vector_model`,
//! `vector`: little-endian `f32`s), so they go wherever their messages go. A vector search
//! reads the conversation's vectors of one model and dimension and ranks them here, by the
//! core's rule: an exact scan, which costs about a millisecond per 10,000 messages of 384
//! values and needs no extension SQLite would have to load.

use chatmem::ConversationId;
use chatmem::recall::{IndexedMessage, MessageVector, Vector, VectorHit, rank_by_similarity};
use chatmem::store::StoreError;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::db_error;
use crate::rows;

/// Where the message columns start in the statements below (seq, tokens, json, counted_by).
const MESSAGE: usize = 0;
const AT: usize = 4;

pub(crate) fn put(conn: &mut Connection, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
    const WHAT: &str = "storing vectors";
    let err = |e| db_error(WHAT, e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let mut kept = 0;
    {
        let mut read = tx
            .prepare_cached(
                "SELECT seq, tokens, json, counted_by FROM messages
                 WHERE conversation_id = ?1 AND seq = ?2 AND recall_at IS NOT NULL",
            )
            .map_err(err)?;
        let mut write = tx
            .prepare_cached(
                "UPDATE messages SET vector_model = ?3, vector = ?4 WHERE conversation_id = ?1 AND seq = ?2",
            )
            .map_err(err)?;
        for v in vectors {
            let Ok(seq) = i64::try_from(v.seq) else { continue };
            let stored = read
                .query_row(params![id.as_str(), seq], |row| {
                    Ok(rows::message(row, id, MESSAGE, WHAT))
                })
                .optional()
                .map_err(err)?
                .transpose()?;
            if stored.is_some_and(|m| v.fits(&m)) {
                write
                    .execute(params![id.as_str(), seq, v.vector.model(), v.vector.to_bytes()])
                    .map_err(err)?;
                kept += 1;
            }
        }
    }
    tx.commit().map_err(err)?;
    Ok(kept)
}

pub(crate) fn search(
    conn: &Connection,
    id: &ConversationId,
    query: &Vector,
    before: u64,
    limit: usize,
) -> Result<Vec<VectorHit>, StoreError> {
    const WHAT: &str = "searching vectors";
    let err = |e| db_error(WHAT, e);
    let before = i64::try_from(before).unwrap_or(i64::MAX);
    let bytes = i64::try_from(query.dim() * 4).unwrap_or(i64::MAX);
    let mut scan = conn
        .prepare_cached(
            "SELECT seq, vector FROM messages
             WHERE conversation_id = ?1 AND seq < ?2 AND vector_model = ?3 AND length(vector) = ?4",
        )
        .map_err(err)?;
    let mut found = scan
        .query(params![id.as_str(), before, query.model(), bytes])
        .map_err(err)?;
    let mut candidates = Vec::new();
    let mut values = Vec::with_capacity(query.dim());
    while let Some(row) = found.next().map_err(err)? {
        let seq: i64 = row.get(0).map_err(err)?;
        let rusqlite::types::ValueRef::Blob(blob) = row.get_ref(1).map_err(err)? else {
            return Err(StoreError::corrupt(id, "a vector is not stored as bytes"));
        };
        values.clear();
        values.extend(
            blob.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        candidates.push((u64::try_from(seq).unwrap_or(0), query.dot(&values)));
    }
    let mut read = conn
        .prepare_cached(
            "SELECT seq, tokens, json, counted_by, recall_at FROM messages WHERE conversation_id = ?1 AND seq = ?2",
        )
        .map_err(err)?;
    let mut hits = Vec::new();
    for (seq, similarity) in rank_by_similarity(candidates, limit) {
        let Ok(at) = i64::try_from(seq) else { continue };
        let hit = read
            .query_row(params![id.as_str(), at], |row| {
                let at_micros: Option<i64> = row.get(AT)?;
                Ok(
                    rows::message(row, id, MESSAGE, WHAT)
                        .map(|m| VectorHit::new(m, at_micros.unwrap_or(0), similarity)),
                )
            })
            .optional()
            .map_err(err)?
            .transpose()?;
        hits.extend(hit);
    }
    Ok(hits)
}

pub(crate) fn unembedded(
    conn: &Connection,
    id: &ConversationId,
    model: &str,
    dim: usize,
    after: u64,
    limit: usize,
) -> Result<Vec<IndexedMessage>, StoreError> {
    const WHAT: &str = "listing messages without vectors";
    let err = |e| db_error(WHAT, e);
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let bytes = i64::try_from(dim * 4).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tokens, json, counted_by, recall_at FROM messages
             WHERE conversation_id = ?1 AND seq > ?2 AND recall_at IS NOT NULL
               AND (vector_model IS NULL OR vector_model <> ?3 OR length(vector) <> ?4)
             ORDER BY seq LIMIT ?5",
        )
        .map_err(err)?;
    let mut found = stmt
        .query(params![id.as_str(), after, model, bytes, limit])
        .map_err(err)?;
    let mut out = Vec::new();
    while let Some(row) = found.next().map_err(err)? {
        let at: Option<i64> = row.get(AT).map_err(err)?;
        out.push(IndexedMessage::new(
            rows::message(row, id, MESSAGE, WHAT)?,
            at.unwrap_or(0),
        ));
    }
    Ok(out)
}
