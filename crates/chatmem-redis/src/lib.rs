//! A Redis store for [`chatmem`]: conversation memory shared by every instance of an
//! application that talks to one Redis, expiring natively with Redis TTLs.
//!
//! [`RedisStore`] implements [`chatmem::Store`]. A load is one round trip and a commit is
//! one atomic round trip (a Lua script run with `EVALSHA`); the per-turn cost does not
//! grow with the length of the conversation's history. A load of a conversation the store
//! has loaded or committed before is a `MULTI`/`EXEC` of `HMGET` and `ZRANGEBYSCORE` that
//! reads only the messages added since it last saw the window (the store keeps the windows
//! it saw, 64 MiB by default: see
//! [`window_cache_bytes`](RedisStoreBuilder::window_cache_bytes)), its first load the load
//! script: a script's reply passes through Lua, which costs Redis about ten times the
//! commands for a window of messages. Every load still reads the conversation's version,
//! window start and system message from Redis, so writes by other processes are seen; a
//! stored message is never changed in place, and one edited by hand in Redis is not read
//! again by a store that has it cached. It runs on a single Redis (or a
//! primary with replicas) and on Redis Cluster (see *Redis Cluster* below). This crate is
//! not a cache in front of another database.
//!
//! TLS is not supported: a `rediss://` URL is refused with
//! [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind). Reach Redis over a private
//! network, or run a TLS tunnel (stunnel, for example) and connect to its local end with
//! `redis://`.
//!
//! ```no_run
//! use chatmem::{ChatMemory, ConversationId, Message};
//! use chatmem_redis::RedisStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::builder("redis://127.0.0.1:6379")
//!     .key_prefix("myapp")
//!     .timeout(std::time::Duration::from_secs(2))
//!     .connect()
//!     .await?;
//! let memory = ChatMemory::new(store);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("hi"), Message::assistant("hello")]).await?;
//! assert_eq!(memory.get(&id).await?.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! On Redis Cluster, name one or more seed nodes (the others are discovered):
//!
//! ```no_run
//! # async fn demo() -> Result<(), chatmem::store::StoreError> {
//! let store = chatmem_redis::RedisStore::connect(
//!     "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
//! )
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Data layout
//!
//! With the default prefix `chatmem`, conversation `id` has two keys sharing one hash
//! tag, `<tag>` being the lower-case hex of the id's bytes (so ids holding `{`, `}`, `:`,
//! `*`, quotes or `%` are safe):
//!
//! - `chatmem:{<tag>}:meta`, a hash: `id` (the raw id), `version`, `window_start`,
//!   `next_seq`, `commit_token` (see *Outages*), `created` (the token of the commit that
//!   created the conversation: tells it from one cleared and created again under the same
//!   id; absent in conversations created before chatmem stored it, whose loads then
//!   read the whole window), and the system message as `sys_seq`,
//!   `sys_tokens`, `sys_json` and `sys_counted_by` (the name of the token counter that
//!   made `sys_tokens`, [`StoredMessage::counted_by`](chatmem::store::StoredMessage); absent when
//!   none is recorded, and removed when a system message without one replaces it), and
//!   `summary`, the conversation's [`Summary`](chatmem::Summary) as
//!   [`Summary::to_json`](chatmem::Summary::to_json) writes it (absent until a commit
//!   carries one; a commit without one keeps it);
//! - `chatmem:{<tag>}:msgs`, a sorted set scored by sequence whose members are
//!   `<seq>:<tokens>[@<counter>]:<message JSON>`, `@<counter>` being the counter name when
//!   one is recorded, with `%` and `:` in it written `%25` and `%3A` (so any name, the empty
//!   one included, reads back as written). A load reads only scores `>= window_start`.
//!
//! Plus `chatmem:ids`, a sorted set of every conversation id (score 0, ordered by bytes)
//! that [`list`](chatmem::Store::list) pages through with `ZRANGEBYLEX` (never `KEYS`), and
//! `chatmem:schema`, the layout version ([`SCHEMA_VERSION`], 2), created on connect; a
//! larger value fails [`RedisStore::connect`] with
//! [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind).
//!
//! Layout 1 (chatmem-redis before counter names were recorded) had no `@<counter>` and no
//! `sys_counted_by`. Its data reads as is, every count with no counter (`None`, taken as
//! is), so connecting to a layout 1 database only sets `chatmem:schema` to 2; nothing is
//! rewritten. Layout 1 code cannot read the members layout 2 writes (it would take
//! `3@cl100k_base` for a corrupt token count), which is why the version is bumped: such code
//! refuses the upgraded database on connect with `SchemaTooNew`. A layout 1 process that
//! was already connected before the upgrade does not check again, so stop old processes
//! before new ones connect: until then they report conversations written by new ones as
//! corrupt.
//!
//! The `summary` field came later without a new layout version: data written before it
//! has no such field and reads as a conversation without a summary, so there is nothing to
//! convert, and layout 2 code from before it reads what this code writes (it ignores the
//! field, and its commits keep it). Such older code neither shows the summary to the model
//! nor waits for it: under `DropEvicted` it deletes every message below the window start,
//! including evicted messages still waiting to be summarized. So switch summaries on once
//! every process sharing the database runs a version that knows them.
//!
//! # Expiry
//!
//! Every commit sets `PEXPIRE` on both keys of the conversation to the commit's TTL, or,
//! when the TTL is `None` and the keys carry one (`PTTL`), `PERSIST`s them, inside the
//! commit script (so both keys always carry the same deadline). TTLs are rounded up to whole milliseconds (Redis's unit). A
//! TTL longer than 2^45 ms (about 1,100 years) is too long to pass to Redis safely and, as
//! chatmem documents for a TTL a store cannot represent, never expires. An expired
//! conversation's keys are gone, so it reads as empty at once. Its index entry stays until
//! a [`list`](chatmem::Store::list) meets it (each listed id is checked with `EXISTS` and
//! stale ones are removed from the index) or
//! [`purge_expired`](chatmem::Store::purge_expired) sweeps the index. Sequence numbers
//! must stay below 2^53 (sorted-set scores are doubles).
//!
//! # Eviction (`maxmemory`)
//!
//! A conversation is its `:meta` hash: when it is missing, the conversation does not exist
//! for any operation, whatever messages are left behind in `:msgs` (a key deleted by hand,
//! or evicted). `load` and `history` return nothing, `list` skips it, `clear` deletes the
//! leftover messages and returns `false`, and a commit creating it anew deletes them
//! first. The opposite loss cannot be told apart from a conversation whose messages were
//! all dropped: a `:meta` hash whose `:msgs` key was evicted keeps its version and system
//! message but has lost its messages.
//!
//! Redis evicts one key at a time, never a conversation's two keys together, so the
//! `maxmemory-policy` of the Redis that holds chatmem's keys decides what can be lost:
//!
//! - `noeviction` (Redis's default) is safe: nothing is lost before its TTL; when memory is
//!   full, commits fail with Redis's `OOM` error
//!   ([`StoreErrorKind::Other`](chatmem::store::StoreErrorKind)) and reads keep working.
//! - `volatile-lru`, `volatile-lfu`, `volatile-random`, `volatile-ttl` never evict a key
//!   without a TTL: conversations committed with no TTL, the id index and the schema key
//!   are safe. A conversation with a TTL may be evicted before its deadline, and one key at
//!   a time: without its `:meta` it is gone (as if expired early), without its `:msgs` it
//!   keeps its state but not its messages. Use these only when losing such conversations
//!   early is acceptable. (Expiry itself is safe: both keys carry the same deadline, set
//!   in the same script, and read as gone together.)
//! - `allkeys-lru`, `allkeys-lfu`, `allkeys-random` are not safe: they may evict any key
//!   at any time, including conversations without a TTL, half of a conversation as above,
//!   and the id index (its conversations then no longer `list`).
//!
//! The policy applies to the whole server, every database included: keep chatmem on a
//! Redis of its own, or on one whose other users also want `noeviction`, rather than on a
//! cache.
//!
//! # Redis Cluster
//!
//! A URL `redis+cluster://[user:password@]host:port[,host:port...]` selects Redis Cluster
//! (database 0 only; the credentials apply to every node). Each command is routed to the
//! node owning its key's slot, following `MOVED`/`ASK` redirections. All keys of one
//! conversation share one hash tag, so load, commit, history and the conversation part of
//! clear stay single scripts or commands on one node: atomic, one round trip each, exactly
//! as on a single Redis.
//!
//! Only the id index (`chatmem:ids`) lives in another slot, so on Cluster it cannot be
//! updated inside the commit and clear scripts (`CROSSSLOT`) and is kept with separate
//! commands instead:
//!
//! - a commit that creates a conversation (`expected_version == 0`) `ZADD`s the id
//!   *before* the commit script, so a crash after the commit cannot leave the
//!   conversation unlisted (if the commit then fails, `list` drops the entry as stale),
//!   and once more *after* a successful commit, in case a concurrent `list`, `purge` or
//!   `clear` removed the entry in between (a failure of that second `ZADD` is logged,
//!   not returned: the commit is applied);
//! - `clear` deletes the conversation's keys first, then removes the index entry;
//! - whoever removes entries (`clear`, or `list`/`purge_expired` meeting ids whose meta
//!   key is gone) checks with `EXISTS` afterwards and puts back any conversation that was
//!   created meanwhile.
//!
//! So an existing conversation is always listed, except after the rare combination of an
//! index sweep racing its creation *and* the creating process failing right after its
//! commit (before the second `ZADD`); its next commit does not re-add it, but `load`,
//! `commit`, `history` and `clear` work on it regardless. On a single Redis the index is
//! exact: it is updated inside the same atomic scripts as the conversation.
//!
//! Round trips per operation (`N` = ids in the listed page, at most `limit + 1`; index
//! batches hold at most 1,000 ids):
//!
//! | operation | single Redis | Redis Cluster |
//! |---|---|---|
//! | `load`, `history` | 1 | 1 |
//! | `commit` | 1 | 1; 3 when it creates the conversation (`ZADD`, script, `ZADD`) |
//! | `clear` | 1 | 1 when it did not exist; else 3 (script, `ZREM`, `EXISTS`) |
//! | `list` | 2 (`ZRANGEBYLEX`, one check-and-prune script) | 2 (`ZRANGEBYLEX`, then `N` `EXISTS` sent at once, one per node's connection); +2 (`ZREM`, `EXISTS`) when stale ids were met |
//! | `purge_expired` | 2 per batch | 2 per batch, +2 when the batch held expired ids |
//!
//! Re-adding an id found recreated during a removal costs one more `ZADD`. The scripts
//! are loaded on a node the first time it runs them (`NOSCRIPT`, then `SCRIPT LOAD` and
//! `EVALSHA` again). Outages behave as on a single Redis (see below); the cluster
//! client also refreshes its slot map by itself when the topology changes.
//!
//! # Outages
//!
//! Each operation is bounded by the response timeout (default 5 s) and fails with
//! [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind) when Redis does not answer in
//! time or the connection is refused; the connection is re-established on the next call
//! once Redis is back. A request whose connection was lost (server restart, killed
//! client) is sent once more on a new connection within that time.
//!
//! A commit must not leave its caller guessing whether it was applied. Each commit carries
//! a random token stored with the version, so the same commit sent again after it had in
//! fact been applied answers with its version instead of a conflict (no duplicated turn).
//! A commit whose reply does not come within the response timeout is therefore sent once
//! more, within a second window of the same length (so a commit may take up to twice the
//! response timeout); only if that fails too does the commit fail with `Unavailable`, and
//! its message then says that the outcome is unknown: it may or may not have been
//! applied (the next [`load`](chatmem::Store::load) tells). Reads are not sent again after
//! a timeout: they fail with `Unavailable` after one response timeout.
//!
//! The token recognises the resend only while the conversation is still at the version
//! that commit produced: if another writer commits on top of it in between, the resend
//! fails as a conflict although the first send was applied.
//!
//! # Batch size
//!
//! Redis runs one script at a time and answers no other client meanwhile, so the size of a
//! commit is how long it holds up everyone using that Redis. [`ChatMemory`](chatmem::ChatMemory)
//! refuses a batch of more than 10,000 messages or 16 MiB of text
//! ([`DEFAULT_MAX_BATCH_MESSAGES`](chatmem::DEFAULT_MAX_BATCH_MESSAGES),
//! [`DEFAULT_MAX_BATCH_BYTES`](chatmem::DEFAULT_MAX_BATCH_BYTES)) with
//! [`Error::BatchTooLarge`](chatmem::Error::BatchTooLarge) before anything is sent: nothing
//! is written, and a longer history is imported in several batches, oldest first. A commit
//! of 10,000 short messages holds a local Redis for some tens of milliseconds. Raising the
//! bound ([`ChatMemoryBuilder::max_batch`](chatmem::ChatMemoryBuilder::max_batch)) makes
//! longer scripts; one running past Redis's `busy-reply-threshold` (5 s by default) makes
//! other clients' requests fail with `BUSY`, which chatmem reports as `Unavailable`.
//! [`RedisStore`] itself does not bound a [`Commit`](chatmem::store::Commit) given to it
//! directly.

mod builder;
mod codec;
mod conn;
mod error;
mod index;
mod keys;
mod recent;
mod reply;
mod retry;
mod schema;
mod scripts;
mod store;
mod window_cache;

pub use crate::builder::{DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT, DEFAULT_WINDOW_CACHE_BYTES, RedisStoreBuilder};
pub use crate::schema::SCHEMA_VERSION;
pub use crate::store::RedisStore;
