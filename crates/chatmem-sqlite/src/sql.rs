//! One function per store operation, each one statement or one transaction; the schema is
//! `migrate`'s, decoding rows `rows`'s, a commit's parameters `params`'s. Everything here
//! runs on a blocking thread, never on the async executor.

use chatmem::store::{
    Commit, RecentConversation, RecentCursor, RecentPage, Snapshot, StoreError, StoredMessage, now_micros,
};
use chatmem::{ConversationId, Page};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::db_error;
use crate::params::{CommitParams, to_i64};
use crate::recall::{self, Totals};
use crate::rows;

/// Unix time in milliseconds, as `expires_at` holds it.
pub(crate) fn now_ms() -> i64 {
    ms_of(now_micros())
}

/// Unix microseconds (`updated_at`) as milliseconds (`expires_at`).
fn ms_of(micros: i64) -> i64 {
    micros.div_euclid(1000)
}

/// The conversation row joined to its window's messages, in the columns `rows::snapshot`
/// reads.
const LOAD: &str = "
SELECT c.version, c.window_start, c.next_seq, c.summary,
       c.system_seq, c.system_tokens, c.system_json, c.system_counted_by,
       m.seq, m.tokens, m.json, m.counted_by
FROM conversations c
LEFT JOIN messages m ON m.conversation_id = c.id AND m.seq >= c.window_start
WHERE c.id = ?1 AND (c.expires_at IS NULL OR c.expires_at > ?2)
ORDER BY m.seq";

/// One statement: the conversation row joined to its window's messages.
pub(crate) fn load(conn: &Connection, id: &ConversationId) -> Result<Snapshot, StoreError> {
    const WHAT: &str = "loading a conversation";
    let err = |e| db_error(WHAT, e);
    let mut stmt = conn.prepare_cached(LOAD).map_err(err)?;
    let rows = stmt.query(params![id.as_str(), now_ms()]).map_err(err)?;
    rows::snapshot(rows, id, WHAT)
}

/// One IMMEDIATE transaction: version check, appends (each with its index entry, in its row),
/// conversation row, eviction (of the index too), and now and then the index's upkeep
/// (`recall::flush_tail`).
pub(crate) fn commit(conn: &mut Connection, id: &ConversationId, commit: &Commit) -> Result<u64, StoreError> {
    let err = |e| db_error("committing to a conversation", e);
    // One reading of the clock for both times, so a listing shows the expiry exactly the TTL
    // (to the millisecond) after the commit.
    let now_us = now_micros();
    let now = ms_of(now_us);
    // Converted before taking the write lock: nothing slow happens inside it.
    let p = CommitParams::new(commit, now)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let row: Option<(i64, Option<i64>, Option<i64>, Totals)> = tx
        .prepare_cached(
            "SELECT version, expires_at, commit_token, recall_docs, recall_len, recall_tail, recall_merged
             FROM conversations WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([id.as_str()], |r| {
                let totals = Totals {
                    docs: r.get(3)?,
                    len: r.get(4)?,
                    tail: r.get(5)?,
                    merged: r.get(6)?,
                };
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, totals))
            })
            .optional()
        })
        .map_err(err)?;
    let mut totals = Totals::default();
    let (current, stored_token) = match row {
        Some((version, expires, stored, found)) if expires.is_none_or(|at| at > now) => {
            totals = found;
            (rows::to_u64(id, version, "version")?, stored)
        }
        Some(_) => {
            // Expired but not purged: it does not exist, so a new conversation replaces it.
            if commit.expected_version() == 0 {
                tx.prepare_cached("DELETE FROM conversations WHERE id = ?1")
                    .and_then(|mut s| s.execute([id.as_str()]))
                    .map_err(err)?;
                tx.prepare_cached("DELETE FROM messages WHERE conversation_id = ?1")
                    .and_then(|mut s| s.execute([id.as_str()]))
                    .map_err(err)?;
                recall::delete_all(&tx, id.as_str())?;
            }
            (0, None)
        }
        None => (0, None),
    };
    // The version check is the only check: a `Commit` cannot be built invalid.
    if current != commit.expected_version() {
        // The same commit sent again: answered as applied, not applied twice.
        if commit.expected_version().checked_add(1) == Some(current) && stored_token == Some(p.token) {
            return Ok(current);
        }
        return Err(StoreError::conflict());
    }
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO messages (conversation_id, seq, tokens, json, counted_by, recall_len, recall_at, recall_terms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(err)?;
        for m in &p.append {
            let (len, at, terms) = match &m.recall {
                Some((len, terms)) => (Some(*len), Some(now_us), Some(terms.as_slice())),
                None => (None, None, None),
            };
            insert
                .execute(params![
                    id.as_str(),
                    m.seq,
                    m.tokens,
                    m.json,
                    m.counted_by,
                    len,
                    at,
                    terms
                ])
                .map_err(err)?;
        }
    }
    // The index: the new entries join the tail; those below the delete bound leave (counted
    // before their messages go); a full tail becomes a segment once the messages are final.
    totals.docs += p.indexed.0;
    totals.len += p.indexed.1;
    totals.tail += p.indexed.0;
    if let Some(below) = p.delete_below
        && totals.docs > 0
    {
        recall::forget_below(&tx, id, below, &mut totals)?;
    }
    let tail_from = totals.merged;
    let flush = totals.tail_is_full(p.next_seq);
    if flush || totals.tail == 0 {
        (totals.tail, totals.merged) = (0, p.next_seq);
    }
    let new_version = current + 1;
    let new_version_i = to_i64(new_version, "version")?;
    let (system_seq, system_tokens, system_json, system_counted_by) = match &p.system {
        Some(m) => (Some(m.seq), Some(m.tokens), Some(m.json.as_str()), m.counted_by),
        None => (None, None, None, None),
    };
    // A new system message replaces all four system columns; without one they stay.
    tx.prepare_cached(
        "INSERT INTO conversations (id, version, system_json, system_tokens, system_seq, window_start, next_seq, expires_at,
                                    system_counted_by, commit_token, summary, updated_at,
                                    recall_docs, recall_len, recall_tail, recall_merged)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         ON CONFLICT (id) DO UPDATE SET
             version = excluded.version,
             commit_token = excluded.commit_token,
             system_counted_by = CASE WHEN excluded.system_json IS NULL THEN system_counted_by
                                      ELSE excluded.system_counted_by END,
             system_json = coalesce(excluded.system_json, system_json),
             system_tokens = coalesce(excluded.system_tokens, system_tokens),
             system_seq = coalesce(excluded.system_seq, system_seq),
             window_start = excluded.window_start,
             next_seq = excluded.next_seq,
             expires_at = excluded.expires_at,
             summary = coalesce(excluded.summary, summary),
             updated_at = excluded.updated_at,
             recall_docs = excluded.recall_docs,
             recall_len = excluded.recall_len,
             recall_tail = excluded.recall_tail,
             recall_merged = excluded.recall_merged",
    )
    .and_then(|mut s| {
        s.execute(params![
            id.as_str(),
            new_version_i,
            system_json,
            system_tokens,
            system_seq,
            p.window_start,
            p.next_seq,
            p.expires_at,
            system_counted_by,
            p.token,
            p.summary.as_deref(),
            now_us,
            totals.docs,
            totals.len,
            totals.tail,
            totals.merged,
        ])
    })
    .map_err(err)?;
    if let Some(below) = p.delete_below {
        tx.prepare_cached("DELETE FROM messages WHERE conversation_id = ?1 AND seq < ?2")
            .and_then(|mut s| s.execute(params![id.as_str(), below]))
            .map_err(err)?;
    }
    if flush {
        recall::flush_tail(&tx, id, tail_from)?;
    }
    tx.commit().map_err(err)?;
    Ok(new_version)
}

/// One statement: kept messages after `after`, of a live conversation.
pub(crate) fn history(
    conn: &Connection,
    id: &ConversationId,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    const WHAT: &str = "reading history";
    let err = |e| db_error(WHAT, e);
    if limit == 0 {
        return Ok(Vec::new());
    }
    // Sequences above i64::MAX cannot exist.
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare_cached(
            "SELECT m.seq, m.tokens, m.json, m.counted_by FROM conversations c
             JOIN messages m ON m.conversation_id = c.id AND m.seq > ?2
             WHERE c.id = ?1 AND (c.expires_at IS NULL OR c.expires_at > ?3)
             ORDER BY m.seq LIMIT ?4",
        )
        .map_err(err)?;
    let mut found = stmt.query(params![id.as_str(), after, now_ms(), limit]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(row) = found.next().map_err(err)? {
        // The message's columns are the row's.
        out.push(rows::message(row, id, 0, WHAT)?);
    }
    Ok(out)
}

/// One transaction: delete the row (reporting whether it was live), its messages and its
/// recall index.
pub(crate) fn clear(conn: &mut Connection, id: &ConversationId) -> Result<bool, StoreError> {
    let err = |e| db_error("clearing a conversation", e);
    let now = now_ms();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let expires: Option<Option<i64>> = tx
        .prepare_cached("DELETE FROM conversations WHERE id = ?1 RETURNING expires_at")
        .and_then(|mut s| s.query_row([id.as_str()], |r| r.get(0)).optional())
        .map_err(err)?;
    tx.prepare_cached("DELETE FROM messages WHERE conversation_id = ?1")
        .and_then(|mut s| s.execute([id.as_str()]))
        .map_err(err)?;
    recall::delete_all(&tx, id.as_str())?;
    tx.commit().map_err(err)?;
    Ok(matches!(expires, Some(e) if e.is_none_or(|at| at > now)))
}

/// One statement: live ids after `after`, one more than `limit` to know whether more remain.
pub(crate) fn list(conn: &Connection, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
    const WHAT: &str = "listing conversations";
    let err = |e| db_error(WHAT, e);
    let limit = limit.max(1);
    let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    let now = now_ms();
    let ids = match after {
        Some(after) => {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM conversations WHERE id > ?1 AND (expires_at IS NULL OR expires_at > ?2)
                     ORDER BY id LIMIT ?3",
                )
                .map_err(err)?;
            rows::ids(stmt.query(params![after.as_str(), now, fetch]).map_err(err)?, WHAT)?
        }
        None => {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM conversations WHERE expires_at IS NULL OR expires_at > ?1 ORDER BY id LIMIT ?2",
                )
                .map_err(err)?;
            rows::ids(stmt.query(params![now, fetch]).map_err(err)?, WHAT)?
        }
    };
    Ok(Page::from_overfetch(ids, limit))
}

/// Live conversations with an id from `?2` (a prefix) up to `?3` (exclusive; NULL: no upper
/// bound), before the cursor `(?4, ?5)` in the order newest first, at most `?6`; `?1` now in
/// Unix milliseconds. The cursor is compared as a row value so that SQLite walks
/// `conversations_updated_at` from it (no sort, no table lookups: the index covers the
/// query).
const RECENT: &str = "
SELECT id, updated_at, expires_at FROM conversations
WHERE (expires_at IS NULL OR expires_at > ?1)
  AND id >= ?2 AND (?3 IS NULL OR id < ?3)
  AND (updated_at, id) < (?4, ?5)
ORDER BY updated_at DESC, id DESC
LIMIT ?6";

/// One statement: a page of live conversations whose id starts with `prefix`, newest first,
/// one more than `limit` to know whether more remain.
pub(crate) fn recent(
    conn: &Connection,
    prefix: &str,
    before: Option<&RecentCursor>,
    limit: usize,
) -> Result<RecentPage, StoreError> {
    const WHAT: &str = "listing conversations by recency";
    let err = |e| db_error(WHAT, e);
    let limit = limit.max(1);
    let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    // Without a cursor, from above every stored time (a commit stamps the present, never
    // `i64::MAX`); the empty id is below every id.
    let (before_us, before_id) = before.map_or((i64::MAX, ""), |c| (c.updated_micros, c.id.as_str()));
    let mut stmt = conn.prepare_cached(RECENT).map_err(err)?;
    let mut rows = stmt
        .query(params![
            now_ms(),
            prefix,
            chatmem::store::prefix_end(prefix),
            before_us,
            before_id,
            fetch
        ])
        .map_err(err)?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        let expires_ms: Option<i64> = row.get(2).map_err(err)?;
        found.push(RecentConversation {
            id: rows::id(row, 0, WHAT)?,
            updated_micros: row.get(1).map_err(err)?,
            // An expiry too far to count in microseconds does not come (as in the core's stores).
            expires_micros: expires_ms.and_then(|ms| ms.checked_mul(1000)),
        });
    }
    Ok(RecentPage::from_overfetch(found, limit))
}

/// One transaction: delete expired conversations, their messages and their recall indexes.
pub(crate) fn purge_expired(conn: &mut Connection) -> Result<u64, StoreError> {
    let err = |e| db_error("purging expired conversations", e);
    let now = now_ms();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    tx.prepare_cached(
        "DELETE FROM messages WHERE conversation_id IN
             (SELECT id FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?1)",
    )
    .and_then(|mut s| s.execute([now]))
    .map_err(err)?;
    recall::delete_expired(&tx, now)?;
    let n = tx
        .prepare_cached("DELETE FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?1")
        .and_then(|mut s| s.execute([now]))
        .map_err(err)?;
    tx.commit().map_err(err)?;
    Ok(n as u64)
}
