//! Creating, upgrading and checking the schema: the tables, and the version recorded in
//! `chatmem_schema`.

use chatmem::store::{StoreError, StoreErrorKind};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::db_error;

/// The schema version this code writes and understands.
/// 2 added which token counter made each count (`counted_by`) and the token of the last
/// commit (`commit_token`); 3 the conversation's summary (`summary`, the JSON of
/// [`chatmem::Summary`]); 4 when the last commit landed (`updated_at`) and the index that
/// lists conversations by it; 5 the lexical index for recall (`messages.recall_*`,
/// `conversations.recall_*`, `recall_segments`, `recall_postings`); 6 recall's vectors
/// (`messages.vector_model`, `messages.vector`); 7 users' facts (`FACTS_TABLES`).
pub(crate) const SCHEMA_VERSION: i64 = 7;

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
    expires_at INTEGER,
    updated_at INTEGER NOT NULL DEFAULT 0,
    recall_docs INTEGER NOT NULL DEFAULT 0,
    recall_len INTEGER NOT NULL DEFAULT 0,
    recall_tail INTEGER NOT NULL DEFAULT 0,
    recall_merged INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    recall_len INTEGER,
    recall_at INTEGER,
    recall_terms BLOB,
    json TEXT NOT NULL,
    counted_by TEXT,
    vector_model TEXT,
    vector BLOB,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS conversations_expires_at ON conversations (expires_at) WHERE expires_at IS NOT NULL;
";

/// The listing by recency (`sql::RECENT`) walks this index newest first and stops after a
/// page: `id` breaks ties in the listing's order and `expires_at` is there so that skipping
/// expired conversations needs no table lookup (it covers the query). Created for a new file
/// and by the upgrade to 4.
const RECENT_INDEX: &str = "
CREATE INDEX IF NOT EXISTS conversations_updated_at ON conversations (updated_at DESC, id DESC, expires_at);
";

/// The lexical index for recall (see `crate::recall`), created for a new file and by the
/// upgrade to 5: the segments of each conversation (`segment` is the seq of its oldest
/// message when it was made, so segments sort by age; `last_seq` its newest; `docs` how many
/// messages it holds) and each segment's postings of each term (how many of its messages hold
/// the term, and their seqs, counts and lengths, newest first, `crate::recall::encode_postings`:
/// as many as a search takes of a term in `head`, the older ones, if any, in `rest`, so that a
/// search reads no more than it takes).
/// The messages' own index columns are `messages.recall_*`.
const RECALL_TABLES: &str = "
CREATE TABLE IF NOT EXISTS recall_segments (
    conversation_id TEXT NOT NULL,
    segment INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    docs INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, segment)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS recall_postings (
    conversation_id TEXT NOT NULL,
    segment INTEGER NOT NULL,
    term TEXT NOT NULL,
    df INTEGER NOT NULL,
    head BLOB NOT NULL,
    rest BLOB,
    PRIMARY KEY (conversation_id, segment, term)
) WITHOUT ROWID;
";

/// Users' facts (see `crate::facts`), created for a new file and by the upgrade to 7: per
/// user, the version every facts commit bumps, the next fact id and the last facts commit's
/// token (`fact_users`); the current facts, each [`chatmem::facts::Fact`]'s JSON (`facts`);
/// each fact's history, each [`chatmem::facts::FactChange`]'s JSON, in the order committed:
/// by the version of the commit that wrote it, then its place in that commit
/// (`fact_history`). They belong to a user, not to a conversation: nothing expires them.
const FACTS_TABLES: &str = "
CREATE TABLE IF NOT EXISTS fact_users (
    user_id TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    next_id INTEGER NOT NULL,
    commit_token INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS facts (
    user_id TEXT NOT NULL,
    id INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (user_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fact_history (
    user_id TEXT NOT NULL,
    fact INTEGER NOT NULL,
    version INTEGER NOT NULL,
    n INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (user_id, fact, version, n)
) WITHOUT ROWID;
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

/// From schema 3 to 4: when the last commit landed, in Unix microseconds. A constant default
/// only changes the schema, no row is rewritten: conversations last written before read 0
/// until their next commit.
const UPGRADE_3_TO_4: &str = "
ALTER TABLE conversations ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
";

/// From schema 4 to 5: each message's index entry and each conversation's index totals (the
/// tables are `RECALL_TABLES`). Constant defaults again, nothing rewritten: nothing written
/// before is indexed, so every conversation starts with an empty index that its next indexed
/// commits fill. (A new file has the messages' index columns before `json`, so that reading
/// them never reads a long message; here they come after it.)
const UPGRADE_4_TO_5: &str = "
ALTER TABLE conversations ADD COLUMN recall_docs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN recall_len INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN recall_tail INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN recall_merged INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN recall_len INTEGER;
ALTER TABLE messages ADD COLUMN recall_at INTEGER;
ALTER TABLE messages ADD COLUMN recall_terms BLOB;
";

/// From schema 5 to 6: each message's vector (messages written before have none).
const UPGRADE_5_TO_6: &str = "
ALTER TABLE messages ADD COLUMN vector_model TEXT;
ALTER TABLE messages ADD COLUMN vector BLOB;
";

/// Creates the schema if absent, in one IMMEDIATE transaction so processes opening the same
/// new file at once do it exactly once; refuses a newer schema. A file whose schema is
/// current is only read: opening it never waits for another process's write lock. From
/// schema 6 to 7 only tables are added (`FACTS_TABLES`).
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
            if let Some(from @ (1..=6)) = found {
                if from == 1 {
                    tx.execute_batch(UPGRADE_1_TO_2)
                        .map_err(|e| db_error("upgrading the schema from version 1", e))?;
                }
                if from <= 2 {
                    tx.execute_batch(UPGRADE_2_TO_3)
                        .map_err(|e| db_error("upgrading the schema to version 3", e))?;
                }
                if from <= 3 {
                    tx.execute_batch(UPGRADE_3_TO_4)
                        .map_err(|e| db_error("upgrading the schema to version 4", e))?;
                }
                if from <= 4 {
                    tx.execute_batch(UPGRADE_4_TO_5)
                        .map_err(|e| db_error("upgrading the schema to version 5", e))?;
                }
                if from <= 5 {
                    tx.execute_batch(UPGRADE_5_TO_6)
                        .map_err(|e| db_error("upgrading the schema to version 6", e))?;
                }
            } else {
                // Nothing (or something older than the first version): the current schema.
                tx.execute_batch(CREATE)
                    .map_err(|e| db_error("creating the schema", e))?;
            }
            tx.execute_batch(RECENT_INDEX)
                .map_err(|e| db_error("creating the index of recent conversations", e))?;
            tx.execute_batch(RECALL_TABLES)
                .map_err(|e| db_error("creating the recall index", e))?;
            tx.execute_batch(FACTS_TABLES)
                .map_err(|e| db_error("creating the facts tables", e))?;
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
            match found {
                None => {
                    "the file opened read-only has no chatmem schema; open it read-write once to create it".to_string()
                }
                Some(v) => format!(
                    "the file opened read-only has schema version {v}; open it read-write once to upgrade it to {SCHEMA_VERSION}"
                ),
            },
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
