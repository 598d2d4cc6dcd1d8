//! The synchronous SQL behind the store: schema, and one function per store operation.
//! Everything here runs on a blocking thread, never on the async executor.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chatmem::{
    Commit, ConversationId, CounterName, Page, SharedMessages, Snapshot, StoreError, StoreErrorKind, StoredMessage,
    Summary,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The schema version this code writes and understands.
/// 2 added which token counter made each count (`counted_by`) and the token of the last
/// commit (`commit_token`); 3 the conversation's summary (`summary`, the JSON of
/// [`chatmem::Summary`]).
pub(crate) const SCHEMA_VERSION: i64 = 3;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    system_json TEXT,
    system_tokens INTEGER,
    system_seq INTEGER,
    system_counted_by TEXT,
    commit_token INTEGER,
    summary TEXT,
    window_start INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    expires_at INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    json TEXT NOT NULL,
    counted_by TEXT,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS conversations_expires_at ON conversations (expires_at) WHERE expires_at IS NOT NULL;
";

/// From schema 1 to 2: the counter columns (rows written before read back as `None`) and the
/// last commit's token.
const UPGRADE_1_TO_2: &str = "
ALTER TABLE conversations ADD COLUMN system_counted_by TEXT;
ALTER TABLE conversations ADD COLUMN commit_token INTEGER;
ALTER TABLE messages ADD COLUMN counted_by TEXT;
";

/// From schema 2 to 3: the summary (conversations written before have none).
const UPGRADE_2_TO_3: &str = "
ALTER TABLE conversations ADD COLUMN summary TEXT;
";

/// A rusqlite error as a store error: lock waits that ran out and I/O failures are
/// `Unavailable`, a damaged file is `Corrupt`, the rest `Other`.
pub(crate) fn db_error(what: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    let kind = match e.sqlite_error_code() {
        Some(C::DatabaseBusy | C::DatabaseLocked) => StoreErrorKind::Unavailable,
        Some(C::CannotOpen | C::SystemIoFailure | C::DiskFull | C::PermissionDenied | C::ReadOnly) => {
            StoreErrorKind::Unavailable
        }
        Some(C::DatabaseCorrupt | C::NotADatabase) => StoreErrorKind::Corrupt,
        _ => StoreErrorKind::Other,
    };
    let context = match kind {
        StoreErrorKind::Unavailable if e.sqlite_error_code() == Some(C::DatabaseBusy) => {
            format!("{what}: the database stayed locked by another writer for the whole timeout")
        }
        _ => what.to_owned(),
    };
    StoreError::new(kind, context).with_source(e)
}

fn invalid(what: impl Into<String>) -> StoreError {
    StoreError::new(StoreErrorKind::InvalidInput, what)
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn expires_at(now: i64, ttl: Option<Duration>) -> Option<i64> {
    ttl.map(|ttl| now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)))
}

fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| invalid(format!("{what} {value} is out of range")))
}

fn to_u64(id: &ConversationId, value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::corrupt(id, format!("{what} is {value}")))
}

/// A message column's bytes (text, or a blob that may still hold JSON).
fn json_bytes<'a>(value: rusqlite::types::ValueRef<'a>, id: &ConversationId, seq: i64) -> Result<&'a [u8], StoreError> {
    value
        .as_bytes()
        .map_err(|_| StoreError::corrupt(id, format!("message seq {seq} is not stored as JSON text")))
}

/// Sets the per-connection pragmas. `journal_mode` is persistent in the file; setting it on
/// every open makes any file WAL, whoever created it.
pub(crate) fn configure(conn: &Connection, timeout: Duration, read_only: bool) -> Result<(), StoreError> {
    conn.busy_timeout(timeout)
        .map_err(|e| db_error("setting busy_timeout", e))?;
    if read_only {
        // A read-only connection reads in whatever mode the file is in.
        return Ok(());
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(|e| db_error("enabling WAL", e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::new(
            StoreErrorKind::Other,
            format!("the database refused WAL mode (journal_mode is {mode})"),
        ));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| db_error("setting synchronous", e))?;
    Ok(())
}

/// Creates the schema if absent, in one IMMEDIATE transaction so processes opening the same
/// new file at once do it exactly once; refuses a newer schema. A file whose schema is
/// current is only read: opening it never waits for another process's write lock.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    match current_version(conn)? {
        Some(v) if v == SCHEMA_VERSION => return Ok(()),
        Some(v) if v > SCHEMA_VERSION => return Err(schema_too_new(v)),
        _ => {}
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| db_error("starting the schema check", e))?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS chatmem_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);",
    )
    .map_err(|e| db_error("creating the schema table", e))?;
    let found: Option<i64> = tx
        .query_row("SELECT version FROM chatmem_schema WHERE id = 1", [], |r| r.get(0))
        .optional()
        .map_err(|e| db_error("reading the schema version", e))?;
    match found {
        Some(v) if v > SCHEMA_VERSION => return Err(schema_too_new(v)),
        Some(v) if v == SCHEMA_VERSION => {}
        found => {
            if let Some(from @ (1 | 2)) = found {
                if from == 1 {
                    tx.execute_batch(UPGRADE_1_TO_2)
                        .map_err(|e| db_error("upgrading the schema from version 1", e))?;
                }
                tx.execute_batch(UPGRADE_2_TO_3)
                    .map_err(|e| db_error("upgrading the schema to version 3", e))?;
            } else {
                // Nothing (or something older than the first version): the current schema.
                tx.execute_batch(CREATE)
                    .map_err(|e| db_error("creating the schema", e))?;
            }
            tx.execute(
                "INSERT INTO chatmem_schema (id, version) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                [SCHEMA_VERSION],
            )
            .map_err(|e| db_error("recording the schema version", e))?;
        }
    }
    tx.commit().map_err(|e| db_error("committing the schema", e))
}

/// Checks, without writing, that a file opened read-only has the current schema.
pub(crate) fn check_schema(conn: &Connection) -> Result<(), StoreError> {
    match current_version(conn)? {
        Some(v) if v == SCHEMA_VERSION => Ok(()),
        Some(v) if v > SCHEMA_VERSION => Err(schema_too_new(v)),
        found => Err(StoreError::new(
            StoreErrorKind::InvalidInput,
            format!(
                "the file opened read-only has {}; open it read-write once to create the schema",
                found.map_or("no chatmem schema".to_string(), |v| format!("schema version {v}"))
            ),
        )),
    }
}

/// The schema version recorded in the file, read without a write lock; `None` when there is
/// none yet.
fn current_version(conn: &Connection) -> Result<Option<i64>, StoreError> {
    let err = |e| db_error("reading the schema version", e);
    let exists: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chatmem_schema')",
            [],
            |r| r.get(0),
        )
        .map_err(err)?;
    if !exists {
        return Ok(None);
    }
    conn.query_row("SELECT version FROM chatmem_schema WHERE id = 1", [], |r| r.get(0))
        .optional()
        .map_err(err)
}

fn schema_too_new(v: i64) -> StoreError {
    StoreError::new(
        StoreErrorKind::SchemaTooNew,
        format!("the database has schema version {v}; this chatmem-sqlite knows up to {SCHEMA_VERSION}"),
    )
}

const LOAD: &str = "
SELECT c.version, c.system_json, c.system_tokens, c.system_seq, c.window_start, c.next_seq,
       m.seq, m.tokens, m.json, c.system_counted_by, m.counted_by, c.summary
FROM conversations c
LEFT JOIN messages m ON m.conversation_id = c.id AND m.seq >= c.window_start
WHERE c.id = ?1 AND (c.expires_at IS NULL OR c.expires_at > ?2)
ORDER BY m.seq";

/// One statement: the conversation row joined to its window's messages.
pub(crate) fn load(conn: &Connection, id: &ConversationId) -> Result<Snapshot, StoreError> {
    let err = |e| db_error("loading a conversation", e);
    let mut stmt = conn.prepare_cached(LOAD).map_err(err)?;
    let mut rows = stmt.query(params![id.as_str(), now_ms()]).map_err(err)?;
    let mut snap: Option<Snapshot> = None;
    let mut messages = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        if snap.is_none() {
            let system_json = row.get_ref(1).map_err(err)?;
            let system = match system_json {
                rusqlite::types::ValueRef::Null => None,
                json => {
                    let tokens: i64 = row.get(2).map_err(err)?;
                    let seq: i64 = row.get(3).map_err(err)?;
                    let json = json_bytes(json, id, seq)?;
                    let mut system = StoredMessage::from_columns(id, seq, tokens, json)?;
                    system.counted_by = counter_name(row, 9).map_err(err)?;
                    Some(system)
                }
            };
            snap = Some(Snapshot {
                version: to_u64(id, row.get(0).map_err(err)?, "version")?,
                system,
                window_start: to_u64(id, row.get(4).map_err(err)?, "window_start")?,
                next_seq: to_u64(id, row.get(5).map_err(err)?, "next_seq")?,
                messages: SharedMessages::new(),
                summary: match row.get_ref(11).map_err(err)? {
                    rusqlite::types::ValueRef::Null => None,
                    json => {
                        let json = json
                            .as_bytes()
                            .map_err(|_| StoreError::corrupt(id, "its summary is not stored as JSON text"))?;
                        Some(Summary::from_json(id, json)?)
                    }
                },
            });
        }
        let seq: Option<i64> = row.get(6).map_err(err)?;
        if let Some(seq) = seq {
            let tokens: i64 = row.get(7).map_err(err)?;
            let json = json_bytes(row.get_ref(8).map_err(err)?, id, seq)?;
            let mut m = StoredMessage::from_columns(id, seq, tokens, json)?;
            m.counted_by = counter_name(row, 10).map_err(err)?;
            messages.push(m);
        }
    }
    Ok(snap.map_or_else(Snapshot::empty, |snap| Snapshot {
        messages: messages.into(),
        ..snap
    }))
}

/// One IMMEDIATE transaction: version check, appends, conversation row, eviction.
pub(crate) fn commit(conn: &mut Connection, id: &ConversationId, commit: &Commit) -> Result<u64, StoreError> {
    let err = |e| db_error("committing to a conversation", e);
    let now = now_ms();
    // Serialise before taking the write lock: nothing slow happens inside it.
    fn row(m: &StoredMessage) -> Result<(i64, i64, String, Option<&str>), StoreError> {
        Ok((
            to_i64(m.seq, "sequence")?,
            i64::from(m.tokens),
            m.message_json()?,
            m.counted_by.as_deref(),
        ))
    }
    let append = commit
        .appended()
        .iter()
        .map(row)
        .collect::<Result<Vec<_>, StoreError>>()?;
    let system = commit.system().map(row).transpose()?;
    let summary = commit.summary().map(Summary::to_json);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let row: Option<(i64, Option<i64>, Option<i64>)> = tx
        .prepare_cached("SELECT version, expires_at, commit_token FROM conversations WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(err)?;
    // The token as SQLite keeps it: the u64's bits as an i64.
    let token = i64::from_ne_bytes(commit.token().to_ne_bytes());
    let (current, stored_token) = match row {
        Some((version, expires, stored)) if expires.is_none_or(|at| at > now) => {
            (to_u64(id, version, "version")?, stored)
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
            }
            (0, None)
        }
        None => (0, None),
    };
    // The version check is the only check: a `Commit` cannot be built invalid.
    if current != commit.expected_version() {
        // The same commit sent again: answered as applied, not applied twice.
        if commit.expected_version().checked_add(1) == Some(current) && stored_token == Some(token) {
            return Ok(current);
        }
        return Err(StoreError::conflict());
    }
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO messages (conversation_id, seq, tokens, json, counted_by) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(err)?;
        for (seq, tokens, json, counted_by) in &append {
            insert
                .execute(params![id.as_str(), seq, tokens, json, counted_by])
                .map_err(err)?;
        }
    }
    let new_version = current + 1;
    let new_version_i = to_i64(new_version, "version")?;
    let new_window_start = to_i64(commit.window_start(), "window_start")?;
    let new_next_seq = to_i64(commit.next_seq(), "next_seq")?;
    let (system_seq, system_tokens, system_json, system_counted_by) = match &system {
        Some((seq, tokens, json, counted_by)) => (Some(*seq), Some(*tokens), Some(json.as_str()), *counted_by),
        None => (None, None, None, None),
    };
    // A new system message replaces all four system columns; without one they stay.
    tx.prepare_cached(
        "INSERT INTO conversations (id, version, system_json, system_tokens, system_seq, window_start, next_seq, expires_at,
                                    system_counted_by, commit_token, summary)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
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
             summary = coalesce(excluded.summary, summary)",
    )
    .and_then(|mut s| {
        s.execute(params![
            id.as_str(),
            new_version_i,
            system_json,
            system_tokens,
            system_seq,
            new_window_start,
            new_next_seq,
            expires_at(now, commit.ttl()),
            system_counted_by,
            token,
            summary,
        ])
    })
    .map_err(err)?;
    if let Some(below) = commit.delete_below() {
        let below = to_i64(below, "delete bound")?;
        tx.prepare_cached("DELETE FROM messages WHERE conversation_id = ?1 AND seq < ?2")
            .and_then(|mut s| s.execute(params![id.as_str(), below]))
            .map_err(err)?;
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
    let err = |e| db_error("reading history", e);
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
    let mut rows = stmt.query(params![id.as_str(), after, now_ms(), limit]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        let seq: i64 = row.get(0).map_err(err)?;
        let tokens: i64 = row.get(1).map_err(err)?;
        let json = json_bytes(row.get_ref(2).map_err(err)?, id, seq)?;
        let mut m = StoredMessage::from_columns(id, seq, tokens, json)?;
        m.counted_by = counter_name(row, 3).map_err(err)?;
        out.push(m);
    }
    Ok(out)
}

/// One transaction: delete the row (reporting whether it was live) and its messages.
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
    tx.commit().map_err(err)?;
    Ok(matches!(expires, Some(e) if e.is_none_or(|at| at > now)))
}

/// One statement: live ids after `after`, one more than `limit` to know whether more remain.
pub(crate) fn list(conn: &Connection, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
    let err = |e| db_error("listing conversations", e);
    let limit = limit.max(1);
    let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    let now = now_ms();
    let mut ids = Vec::new();
    let mut push = |row: &rusqlite::Row<'_>| -> Result<(), StoreError> {
        let raw: String = row.get(0).map_err(err)?;
        let id = ConversationId::new(raw).map_err(|e| {
            StoreError::new(StoreErrorKind::Corrupt, "a stored conversation id is invalid").with_source(e)
        })?;
        ids.push(id);
        Ok(())
    };
    match after {
        Some(after) => {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM conversations WHERE id > ?1 AND (expires_at IS NULL OR expires_at > ?2)
                     ORDER BY id LIMIT ?3",
                )
                .map_err(err)?;
            let mut rows = stmt.query(params![after.as_str(), now, fetch]).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                push(row)?;
            }
        }
        None => {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM conversations WHERE expires_at IS NULL OR expires_at > ?1 ORDER BY id LIMIT ?2",
                )
                .map_err(err)?;
            let mut rows = stmt.query(params![now, fetch]).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                push(row)?;
            }
        }
    }
    Ok(Page::from_overfetch(ids, limit))
}

/// One transaction: delete expired conversations and their messages.
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
    let n = tx
        .prepare_cached("DELETE FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?1")
        .and_then(|mut s| s.execute([now]))
        .map_err(err)?;
    tx.commit().map_err(err)?;
    Ok(n as u64)
}

/// The counter name in column `i` (NULL: none recorded), read without copying it when it
/// names one of chatmem's counters.
fn counter_name(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<CounterName>> {
    let name = row.get_ref(i)?.as_str_or_null()?;
    Ok(name.map(CounterName::from))
}
