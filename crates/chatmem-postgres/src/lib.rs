//! A PostgreSQL [`Store`](chatmem::Store) for chatmem: conversation memory that survives
//! restarts and is shared by every process connected to the same database.
//!
//! [`PostgresStore`] keeps each conversation as one row plus an append-only message log,
//! and does each [`Store::load`](chatmem::Store::load) in one statement and each
//! [`Store::commit`](chatmem::Store::commit) in one atomic, version-checked statement — one
//! round trip each, whatever the history length. Use it with [`chatmem::ChatMemory`]; it
//! holds no window logic of its own.
//!
//! It is not a general PostgreSQL client, and it connects **without TLS**: use it on
//! loopback, a Unix socket or a network you trust. Schema creation and upgrades are
//! automatic (tables `chatmem_conversations`, `chatmem_messages`,
//! `chatmem_schema_version` in the configured schema, `public` by default), unless
//! [`PostgresStoreBuilder::migrate`] turns them off for a program that only reads.
//!
//! Round trips: every operation is one `query_typed` call (parse, bind, execute and sync
//! sent in one write, no separate prepare) on a pooled connection that is reused without a
//! test query. The round-trip tests (`chatmem_test::sql_suite::round_trips`) check this on the wire with a loopback proxy that
//! counts the client's `Sync` messages: load = 1, commit = 1 (a lost version check
//! included), history, list, [`recent`](chatmem::Store::recent), clear and purge = 1 each;
//! the crate's own tests check that a [`search`](chatmem::Store::search) and a commit that
//! writes its index are 1 each too, and so is each facts call (see [*Facts*](#facts)). Only a
//! commit that got no answer costs more (see [*Outages*](#outages)).
//!
//! # Outages
//!
//! Every operation is bounded by the [timeouts](#settings) and fails with
//! [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable) when the server
//! cannot be reached or does not answer in time; the pool opens new connections once it is
//! back. A failure the server reported (with a SQLSTATE, such as its own statement timeout)
//! means nothing was written.
//!
//! A commit can also land while its answer is lost: the connection drops, or the answer
//! does not come within the statement timeout. So each conversation row keeps the
//! [token](chatmem::store::Commit::token) of its last commit (column `commit_token`, schema
//! version 2), and the commit statement, when its version check fails, also returns the
//! current version and token (same statement, no extra round trip). A commit that finds the
//! version one past the one it expected, with its own token, was already applied: it
//! answers with that version, so the same [`Commit`](chatmem::store::Commit) sent twice is stored
//! once. When a commit gets no answer, the store sends it once more on a new connection
//! (outside the pool, closed afterwards), within at most the connect timeout plus the
//! statement timeout, and one round trip (two when the resend waited for the row while the
//! first send landed: it then looks once more). The resend either applies the commit, finds
//! it already applied (success with its version), or finds a conflict (nothing was written
//! by it). Only when the resend fails too does the commit fail, with an error saying that it
//! is unknown whether the commit was applied; reload to find out. Either way a commit is
//! applied whole or not at all.
//!
//! One case stays a conflict although the first send applied: another writer loaded and
//! committed on top of it before the resend arrived. The resend then finds a newer version
//! and another token (only the last commit's token is kept).
//!
//! A user's [facts commit](chatmem::Store::commit_facts) is resent the same way: the user's
//! row keeps the token of the last one.
//!
//! # Settings
//!
//! Set with [`PostgresStoreBuilder`] methods, or, for programs that only take a URL (the
//! CLI), with `chatmem_*` query parameters of a `postgres://` URL, in milliseconds. Each
//! timeout is taken from the first of: its builder method, the builder's `timeout`, its URL
//! parameter, the URL's `chatmem_timeout_ms`, the default.
//!
//! | Builder method | URL parameter | Default | What it bounds |
//! |---|---|---|---|
//! | [`timeout`](PostgresStoreBuilder::timeout) | `chatmem_timeout_ms` | — | the three below at once |
//! | [`connect_timeout`](PostgresStoreBuilder::connect_timeout) | `chatmem_connect_timeout_ms` (or the standard `connect_timeout`, in seconds) | [`DEFAULT_TIMEOUT`] (5 s) | opening one connection |
//! | [`pool_timeout`](PostgresStoreBuilder::pool_timeout) | `chatmem_pool_timeout_ms` | [`DEFAULT_TIMEOUT`] (5 s) | waiting for a free pooled connection; 0: do not wait |
//! | [`statement_timeout`](PostgresStoreBuilder::statement_timeout) | `chatmem_statement_timeout_ms` | [`DEFAULT_TIMEOUT`] (5 s) | one statement, on the server and on the client; 1 ms to [`MAX_STATEMENT_TIMEOUT`] |
//! | [`pool_size`](PostgresStoreBuilder::pool_size) | — | [`DEFAULT_POOL_SIZE`] (16) | pooled connections; at least 1 |
//! | [`schema`](PostgresStoreBuilder::schema) | — | [`DEFAULT_SCHEMA`] (`public`) | where the tables live |
//! | [`migrate`](PostgresStoreBuilder::migrate) | — | true | false: create nothing, only check the schema version |
//!
//! The statement timeout is every connection's server-side `statement_timeout`, so that a
//! statement the client gave up on does not keep running; the client waits 250 ms longer,
//! so that the server's own cancel (which says nothing was written) arrives first, then
//! fails with [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable)
//! and closes the connection. PostgreSQL counts whole milliseconds: a fraction is rounded up.
//!
//! For example `postgres://app@db/chat?chatmem_statement_timeout_ms=30000`. A value out of
//! range, a malformed value or an unknown `chatmem_*` parameter is refused with
//! [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput) naming it,
//! before connecting. The store sets the server's `statement_timeout` itself: one given in
//! the URL's `options` is overridden. The `key=value` connection-string form takes no
//! `chatmem_*` parameters.
//!
//! A commit's TTL beyond 100,000 years never expires: PostgreSQL's timestamps could not
//! hold the expiry (`ChatMemory`'s `ttl` documents this meaning).
//!
//! Errors and `Debug` output print the server through [`chatmem::store::redact_url`] (a
//! `key=value` string as `postgres://user@host:port/database`), never a password.
//!
//! ```no_run
//! use std::time::Duration;
//! use chatmem::{ChatMemory, ConversationId, Message};
//! use chatmem_postgres::PostgresStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = PostgresStore::builder("postgres://postgres@127.0.0.1:5432/test")
//!     .pool_size(8)
//!     .timeout(Duration::from_secs(2))
//!     .connect()
//!     .await?;
//! let memory = ChatMemory::new(store);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("我的订单还没发货。"), Message::assistant("已查询。")]).await?;
//! assert_eq!(memory.get(&id).await?.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # Data layout
//!
//! Eight tables and a sequence in the configured schema, at schema version
//! [`SCHEMA_VERSION`] (8): the postings tables and the sequence are the lexical index (see
//! [*Recall*](#recall)), the `chatmem_fact*` tables users' facts (see [*Facts*](#facts)):
//!
//! - `chatmem_conversations`, one row per conversation: `id` (the primary key, `COLLATE
//!   "C"` so that listing pages in byte order), `version`, `window_start`, `next_seq`,
//!   `expires_at` (NULL: never), `updated_at` (when the last commit landed, see below),
//!   `commit_token` (the last commit's token, see
//!   [*Outages*](#outages)), the system message as `system_seq`, `system_tokens`,
//!   `system_json` and `system_counted_by` (all NULL: no system message), and `summary`,
//!   the conversation's [`Summary`](chatmem::Summary) as the one JSON text
//!   [`Summary::to_json`](chatmem::Summary::to_json) writes (NULL: none). A load returns
//!   it in the same statement; a commit that carries a summary replaces it, one without
//!   keeps it, and messages are deleted below
//!   [`Commit::delete_below`](chatmem::store::Commit::delete_below), which is below the window
//!   start while evicted messages wait for a summary;
//! - `chatmem_messages`, the append-only message log keyed by (`conversation_id`, `seq`):
//!   `tokens`, `counted_by` and `json`, the message as text exactly as serde_json wrote it
//!   (JSONB would reorder keys). A load reads the messages from `window_start` on; deleting
//!   a conversation row deletes its messages (`ON DELETE CASCADE`); `vector_model` and
//!   `vector` (little-endian float4s) are the message's embedding for recall (NULL: none yet),
//!   written by [`put_vectors`](chatmem::Store::put_vectors) after the commit; a vector search
//!   reads the conversation's vectors of one model and dimension and ranks them exactly, in
//!   the same round trip as the lexical search (on a second connection);
//! - `chatmem_postings` and `chatmem_removed_postings`, the lexical index, and the sequence
//!   `chatmem_index_keys` (see [*Recall*](#recall));
//! - `chatmem_fact_users`, `chatmem_facts` and `chatmem_fact_history`, users' facts (see
//!   [*Facts*](#facts));
//! - `chatmem_schema_version`, one row per applied migration.
//!
//! `updated_at` is the commit statement's `now()` by the server's clock, the same instant its
//! expiry counts from (a `timestamptz` like `expires_at`); a row last written before schema
//! version 5 holds the Unix epoch, listed as 0, until its next commit.
//! [`recent`](chatmem::Store::recent) is one statement that walks the index
//! `chatmem_conversations_updated_at (updated_at DESC, id DESC)` from its cursor (a row
//! comparison) and stops after a page; the prefix is a range of ids, `id >= prefix AND id <
//! end` in byte order (`%` and `_` are plain characters), which also lets the planner take
//! the primary key instead for a prefix that matches few conversations. Once PostgreSQL
//! settles on a generic plan for the prepared statement, it walks the recency index, past
//! other prefixes' newer conversations. Keeping that index costs every commit: the row's
//! `updated_at` changes, so its update is never a HOT update and writes new entries to the
//! table's indexes.
//!
//! `counted_by` and `system_counted_by` name the [`TokenCounter`](chatmem::TokenCounter)
//! that made the count (`StoredMessage::counted_by`), so that a memory using another
//! counter recounts the message when it loads it instead of trusting a count in other units.
//! NULL, read back as `None` and taken as it is, means not recorded: a row written before
//! schema version 3, or a commit that named no counter.
//!
//! The migrations (`migrations/000N_*.sql`) run on connect, in one transaction under an
//! advisory lock, so concurrent connects take turns. With
//! [`migrate(false)`](PostgresStoreBuilder::migrate) connect only reads the version: a
//! missing or older schema is refused, nothing is created. Versions 2 (`commit_token`), 3
//! (`counted_by`, `system_counted_by`) and 4 (`summary`) only add nullable columns: a catalog
//! change, no table rewrite, and existing rows keep loading (without a summary) and taking
//! commits. Version 5 adds `updated_at` with a constant default (no rewrite either) and
//! builds its index in the migration's transaction: writes wait for one pass over the
//! conversation rows (not the messages). Version 6 adds the index's tables and sequence and
//! only nullable or constant-default columns: no rewrite, nothing indexed retroactively.
//! Version 7 adds two nullable columns, version 8 only the facts tables. A
//! schema newer than this code is refused with [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind::SchemaTooNew).
//!
//! # Recall
//!
//! The store [searches](chatmem::Store::searches): a commit made with recall on writes its
//! [index entries](chatmem::store::Commit::index) in the same statement as its messages (the
//! same version check, the same round trip), and [`search`](chatmem::Store::search) answers
//! in one statement, exactly as the in-memory reference does (`chatmem::recall::MemoryIndex`:
//! the same BM25 doubles, rounded the same way).
//!
//! - `chatmem_postings`, keyed by (`index_key`, `term`, `seq`): one row per indexed message
//!   and distinct term, with the term's count, the message's length and the term's `rank` (its
//!   postings so far). Terms are `COLLATE "C"` text compared for equality, bound as a
//!   `text[]`: never a pattern or a query language. A search walks each query term's newest
//!   postings before the window backwards, at most
//!   [`MAX_POSTINGS_PER_TERM`](chatmem::recall::MAX_POSTINGS_PER_TERM) of them, and scores them
//!   from the index alone: its cost follows the query, not the history.
//! - `index_key` comes from the sequence `chatmem_index_keys` and is set on the conversation
//!   row when it is created (or, for a row from before schema version 6, at its next commit): a
//!   conversation started afresh after it expired takes a new key, and its old index is
//!   deleted in that commit. Clear and purge delete a conversation's index by its key.
//! - The conversation row keeps `indexed_docs` and `indexed_len`, the statistics BM25 needs,
//!   updated by each commit; a term's document frequency is its newest posting's `rank` less
//!   the postings deleted with their messages (`chatmem_removed_postings`, written only by a
//!   commit that deletes indexed messages). A search counts nothing.
//! - Each indexed message carries its length (`index_len`) and when its commit landed
//!   (`indexed_at`, the same `now()` as `updated_at`). Messages written before schema version
//!   6, or by a commit without recall, are not indexed.
//!
//! A commit that neither indexes nor deletes messages is the statement it was before the
//! index. The others take their parameters through a one-row CTE, so that PostgreSQL settles
//! on one generic plan for them rather than planning the long statement at every commit.
//!
//! # Facts
//!
//! The store [keeps facts](chatmem::Store::keeps_facts), per user and apart from every
//! conversation (clearing, expiring or purging one leaves its user's facts). User ids are
//! `COLLATE "C"` text compared for equality, never a pattern.
//!
//! - `chatmem_fact_users`, one row per user from their first facts commit until
//!   [`forget_user`](chatmem::Store::forget_user) deletes it (and, `ON DELETE CASCADE`, the
//!   rows below): `version`, `next_id` (the id the next new fact gets) and `commit_token`.
//! - `chatmem_facts`, keyed by (`user_id`, `fact_id`): the current facts, each as the JSON
//!   [`fact_json`](chatmem::store::fact_json) writes of a [`Fact`](chatmem::facts::Fact).
//! - `chatmem_fact_history`, keyed by (`user_id`, `fact_id`, `version`, `ord`): each
//!   [`FactChange`](chatmem::facts::FactChange) as JSON, ordered by the commit that wrote it
//!   and its place in that commit.
//!
//! [`load_facts`](chatmem::Store::load_facts) is one statement (the user row `UNION ALL` the
//! facts, one snapshot). [`commit_facts`](chatmem::Store::commit_facts) is one statement: the
//! version check is the user row's INSERT (expecting 0) or its UPDATE `WHERE version =
//! expected`, so of writers at one version exactly one wins; only then does it delete the facts
//! not in the new set, upsert the others (a row written only if it changed), delete the
//! dropped facts' history and append the new entries. [`fact_history`](chatmem::Store::fact_history)
//! and `forget_user` are one statement each, and all four are prepared when a pooled
//! connection opens. A stored fact or entry that does not read back (bad JSON, an id other than
//! its row's, a set breaking [`FactSet`](chatmem::facts::FactSet)'s rules) is a
//! [`Corrupt`](chatmem::store::StoreErrorKind::Corrupt) error naming the user and the row,
//! never quoting it (chatmem's [`read_fact`](chatmem::store::read_fact) and the other readers
//! check it, as every store does).

mod builder;
mod error;
mod facts;
mod migrate;
mod params;
mod rows;
mod sql;
mod store;
mod url;

pub use crate::builder::{
    DEFAULT_POOL_SIZE, DEFAULT_SCHEMA, DEFAULT_TIMEOUT, MAX_STATEMENT_TIMEOUT, PostgresStoreBuilder,
};
pub use crate::store::{PostgresStore, SCHEMA_VERSION};
