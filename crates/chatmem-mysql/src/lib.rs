//! A MySQL and MariaDB [`Store`](chatmem::Store) for chatmem: conversation memory that
//! survives restarts and is shared by every process connected to the same database.
//!
//! [`MysqlStore`] keeps each conversation as one row plus an append-only message log, and
//! does each [`Store::load`](chatmem::Store::load) in one statement and each
//! [`Store::commit`](chatmem::Store::commit) in one atomic, version-checked call of a stored
//! procedure: one round trip each, whatever the history length. Use it with
//! [`chatmem::ChatMemory`]; it holds no window logic of its own.
//!
//! **For** applications that already run MySQL (8.0 and later) or MariaDB (10.6 and later:
//! the commit reads its batch with `JSON_TABLE`). Its tests run against MariaDB 10.11; the
//! SQL keeps to what MySQL 8.0 documents too, but has not been run against it here. **Not for**: a general MySQL client, TLS
//! connections (it connects without TLS: use loopback or a network you trust), or servers
//! where the connecting user may not create tables and procedures unless an administrator
//! ran the migration once (later connects then run no DDL).
//!
//! # The client
//!
//! [`mysql_async`](https://docs.rs/mysql_async) (pure Rust, on tokio, maintained): it speaks
//! the binary protocol with prepared statements cached per connection, so an operation is
//! one `COM_STMT_EXECUTE`; it calls stored procedures that return a result set; and it has a
//! connection pool. sqlx's MySQL driver would also do, but brings its own pool, macros and
//! migration machinery that this crate does not need. It is built without TLS and with the
//! pure-Rust compression backend: nothing to link.
//!
//! # Round trips
//!
//! Load is one `SELECT` (the conversation row `UNION ALL` its messages from the window
//! start on, one consistent read). Commit is one `CALL <prefix>_commit_v3(…)`: the procedure
//! locks the conversation row, checks the version, and in one transaction updates the row
//! (recording the commit's time, see [*Data layout*](#data-layout)), inserts the whole batch (passed as one JSON array parameter and read with `JSON_TABLE`)
//! and its index entries (another JSON array, see [*Recall*](#recall)), deletes below [`Commit::delete_below`](chatmem::store::Commit::delete_below), commits, and
//! returns one row. A lost version check is the same one call. The round-trip tests (`chatmem_test::sql_suite::round_trips`) count
//! this on the wire with a loopback proxy that splits the client's packets and counts the
//! commands that wait for a reply: load = 1, commit = 1 (history, list,
//! [`recent`](chatmem::Store::recent), [`search`](chatmem::Store::search), clear and purge are 1 each;
//! a search with a vector sends its second statement at the same time, on a second connection,
//! and [`put_vectors`](chatmem::Store::put_vectors) is 2, see [*Recall*](#recall)), and so is
//! each facts call, its commit included (`chatmem_test::sql_suite::facts`; see
//! [*Facts*](#facts)). Each statement is prepared once per pooled connection, at its first use there
//! (one more round trip then); pooled connections are kept and never reset between uses.
//!
//! One value can never exceed the server's `max_allowed_packet` (MariaDB ships 16 MiB, less
//! than the 16 MiB of text plus JSON a commit may carry). A batch whose JSON passes 4 MiB is
//! therefore staged first on the same connection, in a temporary table filled one 4 MiB
//! chunk per statement, and the call reads it from there: 4 more round trips plus one per
//! chunk, for such batches only (an import's; a turn's messages are far below); index
//! entries whose JSON passes 4 MiB are staged the same way, in a table of their own. The
//! staging writes nothing durable; the commit is still the one atomic call. One message is
//! one value: a message larger than `max_allowed_packet` as stored JSON (read when the store
//! connects; control characters take 7 bytes each there) is refused as too large with
//! [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput), before
//! anything is sent.
//!
//! # Outages
//!
//! Every operation is bounded by the [timeouts](#settings) and fails with
//! [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable) when the server
//! cannot be reached or does not answer in time; the pool opens new connections once it is
//! back. An error the server reported (an error code) means nothing was written; a deadlock
//! (1213) is a [`Conflict`](chatmem::store::StoreErrorKind::Conflict): rolled back, reload and
//! retry.
//!
//! A commit can land while its answer is lost. Each conversation row keeps the
//! [token](chatmem::store::Commit::token) of its last commit (`commit_token`); a commit that
//! finds the version one past the one it expected, with its own token, was already applied
//! and answers with that version. When a commit gets no answer, the store sends it once more
//! on a new connection (outside the pool), within the connect timeout plus the statement
//! timeout. The procedure's locking read sees the newest committed row, so that one resend
//! tells applied from conflict even when it waited for the first send's row lock. Only when
//! the resend fails too does the commit fail, with an error saying that whether it was
//! applied is unknown (reload to find out). Either way a commit is applied whole or not at
//! all. As in every store, only the last token is kept: a resend that arrives after another
//! writer's commit reports a conflict although the first send applied.
//!
//! A user's [facts commit](chatmem::Store::commit_facts) is resent the same way: the user's
//! row keeps the token of the last one.
//!
//! # Settings
//!
//! Set with [`MysqlStoreBuilder`] methods, or with `chatmem_*` query parameters of the
//! `mysql://` URL (for programs that only take a URL, such as the CLI), in milliseconds; a
//! builder method wins over the URL.
//!
//! | Builder method | URL parameter | Default | What it bounds |
//! |---|---|---|---|
//! | [`timeout`](MysqlStoreBuilder::timeout) | `chatmem_timeout_ms` | — | the three below at once |
//! | [`connect_timeout`](MysqlStoreBuilder::connect_timeout) | `chatmem_connect_timeout_ms` | [`DEFAULT_TIMEOUT`] (5 s) | opening one connection |
//! | [`pool_timeout`](MysqlStoreBuilder::pool_timeout) | `chatmem_pool_timeout_ms` | [`DEFAULT_TIMEOUT`] (5 s) | waiting for a free pooled connection |
//! | [`statement_timeout`](MysqlStoreBuilder::statement_timeout) | `chatmem_statement_timeout_ms` | [`DEFAULT_TIMEOUT`] (5 s) | one statement as the client waits; also the server's `innodb_lock_wait_timeout` (whole seconds, rounded up) |
//! | [`pool_size`](MysqlStoreBuilder::pool_size) | — | [`DEFAULT_POOL_SIZE`] (16) | pooled connections |
//! | [`prefix`](MysqlStoreBuilder::prefix) | — | [`DEFAULT_PREFIX`] (`chatmem`) | the tables' and procedures' name prefix |
//! | [`migrate`](MysqlStoreBuilder::migrate) | — | true | false: create nothing, only check the schema version |
//!
//! The URL must name a database (`mysql://user[:password]@host[:port]/database`); other
//! query parameters go to `mysql_async`. The store connects over TCP as given (never
//! switching to the server's Unix socket). Errors and `Debug` print the URL through
//! [`chatmem::store::redact_url`], never a password.
//!
//! ```no_run
//! use std::time::Duration;
//! use chatmem::{ChatMemory, ConversationId, Message};
//! use chatmem_mysql::MysqlStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MysqlStore::builder("mysql://root@127.0.0.1:3306/test")
//!     .pool_size(8)
//!     .timeout(Duration::from_secs(2))
//!     .connect()
//!     .await?;
//! let memory = ChatMemory::new(store);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("我的订单还没发货。🦀"), Message::assistant("已查询。")]).await?;
//! assert_eq!(memory.get(&id).await?.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # Recall
//!
//! The store [searches](chatmem::Store::searches): a commit made with recall on writes its
//! [index entries](chatmem::store::Commit::index) in the same procedure call, so the same
//! transaction, as its messages, with the commit's time (the one `updated_at` gets, in Unix
//! microseconds); a commit that loses its version check, or a resent one answered as applied,
//! writes none. The index is a table of postings keyed by (conversation, term, seq), a row per
//! indexed message (its length and time) and, kept by the commit so that a search counts
//! nothing, each term's document frequency and the conversation's indexed messages and total
//! length. Terms are `VARBINARY`, compared as bytes: `Order`, `order` and `order ` are three
//! terms, as they are to the core (MySQL's text collations would make them one). InnoDB
//! `FULLTEXT` is not used: its tokenizer, stopwords and query syntax are not chatmem's.
//!
//! A [search](chatmem::Store::search) is one statement: each query term's
//! [most recent postings](chatmem::recall::MAX_POSTINGS_PER_TERM) before the query's bound, one
//! backward range of the postings' key each, scored by BM25 in SQL exactly as
//! [`chatmem::recall::bm25`] scores them, the best joined to their messages. Its cost follows the
//! number of query terms and how many of those postings there are, not the conversation's
//! length. (MariaDB has no `LATERAL`, so the statement has a slot per term: statements for 1,
//! 2, 4, … 256 terms, the smallest that fits; a query of more terms takes a statement that ranks
//! every posting of its terms, slower but the same answer.)
//!
//! The index goes wherever its messages go: deleted with them below a new window start (and
//! taken off the counts), with the conversation on [`clear`](chatmem::Store::clear) and
//! [`purge_expired`](chatmem::Store::purge_expired), and when an expired conversation starts
//! afresh, which also gets a new index number: nothing of the old index can be found. A clear
//! or purge costs in proportion to the index it deletes (a posting per distinct term of each
//! message).
//!
//! The store [keeps vectors](chatmem::Store::keeps_vectors) for recall by meaning, in the
//! message's row (`vector_model`, `vector`), so they go wherever their messages go too.
//! [`put_vectors`](chatmem::Store::put_vectors) reads the indexed messages at the vectors'
//! seqs, keeps the vectors that [fit](chatmem::recall::MessageVector::fits) them, and writes
//! them in one `UPDATE` on the rows that still hold the JSON it checked (compared by its
//! SHA-256): a conversation cleared and written again in between never gets the old messages'
//! vectors. A message keeps one vector, the last written (of any model). A
//! [search](chatmem::Store::search) with a vector reads the conversation's vectors of that
//! model and dimension before the bound (the model compared as bytes) and ranks them here by
//! [`chatmem::recall::rank_by_similarity`], an exact scan that costs in proportion to the
//! conversation's embedded messages (MariaDB 10 and MySQL 8 have no vector type to index
//! them); it is sent beside the lexical search, on a second pooled connection, so a turn still
//! waits one round trip. The pool's connections report an `UPDATE`'s matched rows
//! (`CLIENT_FOUND_ROWS`, whatever the URL says), so a vector written again where it already
//! is counts as kept.
//!
//! # Data layout
//!
//! In the URL's database, at schema version [`SCHEMA_VERSION`] (5), with the default prefix:
//!
//! - `chatmem_conversations`, one row per conversation: `id` (`VARBINARY(256)`, the primary
//!   key), `version`, `window_start`, `next_seq`, `expires_at` (`DATETIME(6)` in UTC; NULL:
//!   never; indexed for purging), `updated_at` (`DATETIME(6)` in UTC: when the last commit
//!   landed, see below), `commit_token` (`BIGINT UNSIGNED`, see
//!   [*Outages*](#outages)), the system message as `system_json`, `system_seq`,
//!   `system_tokens`, `system_counted_by` (all NULL: none), and `summary`, the
//!   [`Summary`](chatmem::Summary) as [`Summary::to_json`](chatmem::Summary::to_json) writes it
//!   (NULL: none), and for recall `indexed_docs`, `indexed_len` (the indexed messages and their
//!   total length) and `index_key` (the conversation's number in the index tables; NULL until
//!   its first indexed commit);
//! - `chatmem_messages`, the append-only log keyed by (`conversation_id`, `seq`): `tokens`,
//!   `counted_by` (the [`TokenCounter`](chatmem::TokenCounter) that made the count; NULL: not
//!   recorded) and `json`, the message exactly as serde_json wrote it; `vector_model`
//!   (`VARBINARY(256)`) and `vector` (`MEDIUMBLOB`, little-endian `f32`s), the message's
//!   embedding for recall (NULL: none yet); a foreign key with `ON DELETE CASCADE` deletes a
//!   conversation's messages with its row;
//! - `chatmem_index_keys` (`ckey`, `AUTO_INCREMENT`, per conversation id; a foreign key with
//!   `ON DELETE CASCADE` from the conversation), and, each keyed by `ckey` with a cascading
//!   foreign key to it: `chatmem_index_terms`, the postings, keyed (`ckey`, `term`
//!   `VARBINARY(64)`, `seq`) with `tf` and the message's `len`; `chatmem_index_docs`, keyed
//!   (`ckey`, `seq`): `len`, `at_micros` and the message's `terms` as the commit sent them (how
//!   a delete below a seq finds its postings without a second index on them); and
//!   `chatmem_index_df`, keyed (`ckey`, `term`): `df`;
//! - `chatmem_fact_users`, `chatmem_facts` and `chatmem_fact_history`, users' facts (see
//!   [*Facts*](#facts));
//! - `chatmem_schema_version`, one row per applied migration;
//! - procedures `chatmem_commit_v3` (the commit), `chatmem_commit` (the commit as versions 1
//!   and 2 call it), `chatmem_clear` and `chatmem_commit_facts` (a user's facts commit).
//!
//! [`Store::recent`](chatmem::Store::recent) lists conversations by `updated_at`, which the
//! commit procedure sets from the same `UTC_TIMESTAMP(6)` reading as `expires_at` (so their
//! difference is the TTL exactly). Both are `DATETIME`s in UTC, like every time this store
//! writes, rather than `BIGINT` microseconds: the procedure's expiry arithmetic and the live
//! checks stay on one type, and turning the server's clock into Unix microseconds in SQL
//! (`UNIX_TIMESTAMP`) would go through the session's time zone. They are read back as
//! microseconds by `TIMESTAMPDIFF` from `1970-01-01 00:00:00`: calendar arithmetic, no time
//! zone. Conversations last committed before schema version 2 hold that epoch (the column
//! is `NOT NULL`, so the order and the cursor have no NULL case) and list with time 0, last.
//! The listing is one `SELECT` with an escaped binary `LIKE` for the prefix (bytes; `%` and
//! `_` are not patterns), the cursor as `(updated_at, id)` below the last listed, `ORDER BY
//! updated_at DESC, id DESC` and one more row than asked. The index `chatmem_recent` on
//! (`updated_at DESC`, `id DESC`, `expires_at`) gives that order and covers the whole query;
//! for a tenant with few conversations the optimizer takes the primary key's prefix range and
//! sorts those instead.
//!
//! Text columns are `utf8mb4` with the binary collation `utf8mb4_bin` (4-byte characters
//! such as emoji are stored as they are; the connection is `SET NAMES utf8mb4`). Ids are
//! `VARBINARY`, not `utf8mb4_bin` text: MySQL's and MariaDB's `utf8mb4_bin` is a PAD SPACE
//! collation, under which `a` and `a ` would be one key; bytes compare exactly and list in
//! the UTF-8 byte order the contract asks for. Expired conversations read as absent, a
//! commit expecting version 0 starts one afresh in place, and
//! [`Store::purge_expired`](chatmem::Store::purge_expired) deletes them. A TTL beyond 5,000
//! years never expires (`DATETIME` ends in 9999).
//!
//! The migrations (`migrations/000N_*.sql`) run on connect under a named lock
//! (`GET_LOCK`), so concurrent connects take turns. MySQL commits DDL at once, so each step
//! is idempotent and an interrupted migration is run again by the next connect. A schema
//! newer than this code is refused with
//! [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind::SchemaTooNew).
//! Version 2 (`0002_updated_at.sql`) adds `updated_at` and its index (an in-place `ALTER`)
//! and re-creates the commit procedure with the same parameters: processes of the previous
//! version still running keep committing through it (and so record times too), though a new
//! connect of that version is refused. For the instant between the procedure's `DROP` and
//! `CREATE` another process's commit fails with a server error, applying nothing.
//! Version 3 (`0003_recall.sql`) adds recall's columns (an in-place `ALTER`) and tables, the
//! commit procedure `chatmem_commit_v3` with three more parameters (the index entries, their
//! count and total length), and re-creates `chatmem_commit` with its old parameters as a call
//! of it that indexes nothing: processes of version 2 still running keep committing, and their
//! deletes keep the index in step (their own purge statement leaves the index rows of what it
//! purges to the cascade). Messages stored before version 3 are not indexed.
//! Version 4 (`0004_vectors.sql`) adds the messages' `vector_model` and `vector` (nullable,
//! an in-place `ALTER`); nothing a version 3 process calls changes, so those still running
//! keep committing (they write no vectors). The indexed messages stored before it are
//! embedded by `chatmem reindex` ([`unembedded`](chatmem::Store::unembedded) finds them).
//! Version 5 (`0005_facts.sql`) adds only the facts tables and their procedure; version 4
//! processes still running keep committing (they keep no facts).
//!
//! # Facts
//!
//! The store [keeps facts](chatmem::Store::keeps_facts), per user and apart from every
//! conversation (clearing, expiring or purging one leaves its user's facts). User ids are
//! `VARBINARY(256)`, as conversation ids are: compared byte for byte (`ada`, `ada ` and `Ada`
//! are three users), for equality only, never as a pattern.
//!
//! - `chatmem_fact_users`, one row per user from their first facts commit until
//!   [`forget_user`](chatmem::Store::forget_user) deletes it (and, by foreign keys with `ON
//!   DELETE CASCADE`, the rows below): `version`, `next_id` (the id the next new fact gets) and
//!   `commit_token`;
//! - `chatmem_facts`, keyed by (`user_id`, `fact_id`): the current facts, each as the JSON
//!   [`fact_json`](chatmem::store::fact_json) writes of a [`Fact`](chatmem::facts::Fact);
//! - `chatmem_fact_history`, keyed by (`user_id`, `fact_id`, `version`, `ord`): each
//!   [`FactChange`](chatmem::facts::FactChange) as JSON, ordered by the commit that wrote it
//!   and its place in that commit.
//!
//! [`load_facts`](chatmem::Store::load_facts) is one `SELECT` (the user row `UNION ALL` the
//! facts, one consistent read). [`commit_facts`](chatmem::Store::commit_facts) is one `CALL
//! chatmem_commit_facts(…)`, as a conversation's commit is one call: the procedure locks the
//! user row and checks the version and token (expecting 0, it inserts the row, and of
//! creators at once one wins on the primary key; expecting more, the locked row must be at
//! that version), so of writers at one version exactly one wins; only then, in the same
//! transaction, does it delete the facts not in the new set, upsert the others (a row whose
//! JSON is the same is not written), delete the dropped facts' history and append the new
//! entries, each set passed as one JSON array parameter read with `JSON_TABLE`. A commit
//! whose parameters would pass the server's `max_allowed_packet` is refused as
//! [`InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput) before anything is sent
//! (the set goes whole in every commit; no facts commit is staged).
//! [`fact_history`](chatmem::Store::fact_history) and `forget_user` are one
//! statement each. A stored fact or entry that does not read back (bad JSON, an id other than
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
mod search;
mod sql;
mod store;
mod url;
mod vectors;

pub use crate::builder::{DEFAULT_POOL_SIZE, DEFAULT_PREFIX, DEFAULT_TIMEOUT, MysqlStoreBuilder};
pub use crate::store::{MysqlStore, SCHEMA_VERSION};
