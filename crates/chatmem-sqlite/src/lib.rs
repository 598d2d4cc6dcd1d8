//! A SQLite [`Store`](chatmem::Store) for chatmem: conversation memory kept in one local file.
//!
//! Use it when one machine runs the application (or a few processes of it) and memory must
//! survive restarts. Several processes may share the file: it runs in WAL mode and every
//! write is one `BEGIN IMMEDIATE` transaction with a version check. It is not for several
//! machines sharing a network file system (SQLite's locking is unreliable there): use the
//! PostgreSQL or Redis store for that. It keeps data only; the window logic lives in
//! [`chatmem::ChatMemory`]. It [searches](chatmem::Store::search), so it serves
//! [recall](chatmem::Recall) (see [Recall](#recall)), and it keeps users'
//! [facts](chatmem::facts) (see [Facts](#facts)).
//!
//! ```no_run
//! use chatmem::{ChatMemory, ConversationId, Message, Retention};
//! use chatmem_sqlite::SqliteStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteStore::connect("sqlite:data/chatmem.db").await?;
//! let memory = ChatMemory::builder(store).retention(Retention::KeepHistory).build()?;
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("我的订单是 LC202610060018，还没发货。")]).await?;
//! let window = memory.get(&id).await?;
//! # Ok(()) }
//! ```
//!
//! # What each operation costs
//! Counted with SQLite's statement trace hook (see [`SqliteStore::statements_executed`])
//! and asserted in this crate's tests:
//!
//! - **load** = 1 read transaction with 1 statement: one `SELECT` joining the conversation
//!   row to its messages with `seq >= window_start` (a range scan of the primary key), so
//!   its cost depends on the window, not on how much history is kept.
//! - **commit** = 1 transaction: `BEGIN IMMEDIATE`, 1 `SELECT` of the version, one execution
//!   of a cached `INSERT` per appended message (with its index entry, when recall is on), 1
//!   upsert of the conversation row (which also stamps `updated_at`, the commit's time), 1
//!   `DELETE` of evicted messages (only under [`Retention::DropEvicted`](chatmem::Retention)),
//!   `COMMIT`: 6 statements for a user + assistant turn that keeps history, with recall or
//!   without. Now and then a commit with recall also writes a segment of the index (below).
//! - **search** = 1 read transaction: the conversation's totals, the newest indexed messages
//!   (at most a few hundred rows), one statement per query term, one lookup per hit.
//! - **history** = 1 statement; **list** = 1 statement; **recent** = 1 statement (a walk
//!   of the index `conversations_updated_at` from the cursor, newest first, that stops after
//!   a page); **clear** = 1 transaction of 6 statements; **purge_expired** = 1 transaction
//!   of 6 statements.
//! - **load_facts** = 1 statement (the user row joined to the user's facts);
//!   **fact_history** = 1 statement; **commit_facts** = 1 transaction: `BEGIN IMMEDIATE`, 1
//!   `SELECT` of the version and token, 1 `SELECT` of the stored facts, one write per fact
//!   that changed, left or came (the others are not written), one `DELETE` per fact deleted
//!   by hand and one `INSERT` per history entry, 1 upsert of the user row, `COMMIT`: 7
//!   statements to confirm or pin one fact of many; **forget_user** = 1 transaction of 5
//!   statements.
//!
//! # Durability and concurrency
//! `journal_mode=WAL`, `synchronous=NORMAL`: a commit survives the process being killed at
//! any point (tested with SIGKILL); on power loss the last commits may be lost but the file
//! stays consistent. Writers in one process queue on an in-process lock; writers in other
//! processes wait on SQLite's lock for up to the timeout (`busy_timeout`), then the call
//! fails with [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind).
//!
//! # Recall
//! Every commit made with recall on writes its messages' index entries in its own
//! transaction, so a search finds them the moment the commit returns, and a commit that
//! fails leaves neither messages nor entries. An entry (the message's length in terms, its
//! distinct terms with their counts, and the commit's time) is kept in the message's own row:
//! indexing adds no row to a commit. The newest indexed messages of a conversation (up to 128)
//! are searched from those rows; the commit that brings them to 128 writes them as a
//! *segment*, one row per term holding that term's postings (newest first), and segments of
//! one size are merged four into one, so a long conversation has a handful of segments and a
//! term's postings are a few rows. Such a commit takes a few milliseconds (a merge of large
//! segments longer); the others cost what they cost without recall.
//!
//! A search reads the conversation's totals (kept by the commits: nothing is counted), the
//! newest messages' entries, and for each query term its rows in the segments, at most
//! [`MAX_POSTINGS_PER_TERM`](chatmem::recall::MAX_POSTINGS_PER_TERM) postings of it, then
//! scores the candidates with [`bm25`](chatmem::recall::bm25): its answers are the in-memory
//! reference's ([`chatmem::recall::MemoryIndex`]). Terms are bound as parameters and compared
//! as exact strings; there is no full-text query syntax anywhere. Index entries and segments
//! go with their messages: cleared, expired (an expired conversation finds nothing and a new
//! one of the same id starts empty), purged, or deleted below a window start. A read-only
//! store searches too.
//!
//! # Facts
//! A user's facts are kept apart from every conversation, by user id (compared exactly,
//! never as a pattern), and never expire: clearing, expiring or purging a conversation
//! leaves them, and only [`forget_user`](chatmem::Store::forget_user) deletes them. A facts
//! commit is one `BEGIN IMMEDIATE` transaction checked against the user's version: a stale
//! one changes nothing and fails with
//! [`StoreError::facts_conflict`](chatmem::store::StoreError::facts_conflict), a resent one
//! is answered with the version it made (the last commit's token is kept), so writers in
//! several processes never write over each other's facts. A fact is stored as the JSON
//! chatmem writes for a [`Fact`](chatmem::facts::Fact), a history entry as a
//! [`FactChange`](chatmem::facts::FactChange)'s; a row that cannot be read is a
//! [`Corrupt`](chatmem::store::StoreErrorKind) error naming the user and the column. A
//! read-only store loads facts and their history too.
//!
//! # Schema
//! Schema version 7 ([`SCHEMA_VERSION`]):
//!
//! - `chatmem_schema(id INTEGER PRIMARY KEY CHECK (id = 1), version)`: the version;
//! - `conversations(id TEXT PRIMARY KEY, version, system_json, system_tokens, system_seq,
//!   system_counted_by, commit_token, summary, window_start, next_seq, expires_at,
//!   updated_at, recall_docs, recall_len, recall_tail, recall_merged)`;
//! - `messages(conversation_id, seq, tokens, recall_len, recall_at, recall_terms, json,
//!   counted_by, vector_model, vector, PRIMARY KEY (conversation_id, seq))`;
//! - `recall_segments(conversation_id, segment, last_seq, docs, PRIMARY KEY
//!   (conversation_id, segment))` and `recall_postings(conversation_id, segment, term, df,
//!   head, rest, PRIMARY KEY (conversation_id, segment, term))`: the recall index's segments;
//! - `fact_users(user_id TEXT PRIMARY KEY, version, next_id, commit_token)`, `facts(user_id,
//!   id, json, PRIMARY KEY (user_id, id))` and `fact_history(user_id, fact, version, n, json,
//!   PRIMARY KEY (user_id, fact, version, n))`: users' facts (see [Facts](#facts)), a history
//!   entry ordered by the version of the commit that wrote it and its place `n` in it.
//!
//! Every table is `WITHOUT ROWID`, an index on
//! `conversations(expires_at)` covers the rows that expire, and
//! `conversations_updated_at(updated_at DESC, id DESC, expires_at)` serves
//! [`recent`](chatmem::Store::recent) without a sort or a table lookup. Messages (and the system message)
//! are stored as the JSON chatmem writes, `summary` as [`chatmem::Summary`]'s JSON;
//! `counted_by` and `system_counted_by` name the token counter of each count (NULL: not
//! recorded), `commit_token` is the token of the last commit (a resent commit is answered as
//! applied). A message's `recall_*` columns are its index entry (NULL: committed without
//! recall); a conversation's `recall_docs` and `recall_len` count its indexed messages and
//! their length, `vector_model` and `vector` (little-endian `f32`s) its embedding for recall
//! (NULL: none yet), `recall_merged` is where its newest, not yet segmented, indexed messages
//! start and `recall_tail` how many they are. `updated_at` is when the last commit landed, in Unix microseconds by the clock
//! of the process that made it (0: last written before schema 4, until its next commit);
//! [`recent`](chatmem::Store::recent) matches its prefix as a range of ids (`id >= prefix AND
//! id < end`, in the bytes' order), so `%` and `_` are plain characters. `expires_at` is Unix
//! time in milliseconds (listed as microseconds); expired conversations read as absent
//! until [`purge_expired`](chatmem::Store::purge_expired) deletes them. Created on first open,
//! unless [`SqliteStoreBuilder::create_if_missing`] is off or the store is read-only: then a
//! missing file is a [`MissingDatabase`] error and nothing is created. A file of schema 1 to
//! 6 is upgraded in place (columns added with constant defaults, nothing rewritten; the
//! upgrade to 4 builds the recency index, one pass over the conversations; the upgrade to 5
//! adds the empty recall index: messages written before are not indexed; the upgrade to 6
//! adds the vector columns, the upgrade to 7 the empty facts tables); a file written by a
//! newer schema is refused with [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind).

mod error;
mod facts;
mod migrate;
mod params;
mod pragmas;
mod recall;
mod rows;
mod sql;
mod store;
mod vectors;

pub use crate::store::{
    DEFAULT_POOL_SIZE, DEFAULT_TIMEOUT, MissingDatabase, SCHEMA_VERSION, SqliteStore, SqliteStoreBuilder,
};
