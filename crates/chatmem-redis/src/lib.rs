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
//! not a cache in front of another database. It keeps users' facts too (see *Facts* below),
//! which never expire.
//!
//! TLS is not supported: a `rediss://` URL is refused with
//! [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind). Reach Redis over a private
//! network, or run a TLS tunnel (stunnel, for example) and connect to its local end with
//! `redis://`.
//!
//! The timeouts (5 s each by default) are the builder's settings or, where one is not set,
//! the URL's parameters `chatmem_connect_timeout_ms` and `chatmem_response_timeout_ms`, then
//! `chatmem_timeout_ms` for both, in milliseconds (`redis://host:6379/?chatmem_timeout_ms=500`,
//! as the command line and the server take a store). A URL parameter the driver does not read
//! (it reads `protocol`, and `db`, `user` and `pass` over a Unix socket) is refused, not
//! ignored.
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
//! tag, three once it is indexed for recall, `<tag>` being the lower-case hex of the id's
//! bytes (so ids holding `{`, `}`, `:`, `*`, quotes or `%` are safe):
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
//!   carries one; a commit without one keeps it), and `indexed` (`1` once a commit has
//!   written index entries: the index key is this conversation's);
//! - `chatmem:{<tag>}:msgs`, a sorted set scored by sequence whose members are
//!   `<seq>:<tokens>[@<counter>]:<message JSON>`, `@<counter>` being the counter name when
//!   one is recorded, with `%` and `:` in it written `%25` and `%3A` (so any name, the empty
//!   one included, reads back as written). A load reads only scores `>= window_start`;
//! - `chatmem:{<tag>}:idx`, the lexical index for recall (see *Recall* below), a hash
//!   only commits made with recall on write.
//!
//! Plus `chatmem:ids`, a sorted set of every conversation id (score 0, ordered by bytes)
//! that [`list`](chatmem::Store::list) pages through with `ZRANGEBYLEX` (never `KEYS`);
//! `chatmem:{chatmem:ids}:recent`, the recency index: a sorted set of the same ids scored
//! by the time of each one's last commit in microseconds since the Unix epoch (Redis's
//! `TIME`, read inside the commit script: the server's clock; a double holds today's
//! microseconds exactly), whose hash tag puts it in the id index's Cluster slot; and
//! `chatmem:schema`, the layout version ([`SCHEMA_VERSION`], 2), created on connect; a
//! larger value fails [`RedisStore::connect`] with
//! [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind).
//!
//! [`recent`](chatmem::Store::recent) reads the recency index newest first (`ZREVRANGE`,
//! whose equal scores come in reverse byte order of the ids, as the listing wants), a batch
//! of at most 1,000 entries per script run, keeping the ids that start with the prefix,
//! until it has the page (plus one, to know whether more follow) or the index ends: a
//! prefix whose conversations are few among many others costs one run per 1,000 entries
//! newer than them. Each listed conversation's expiry is the `PTTL` of its meta key added
//! to the server's `TIME` read with it; a conversation whose meta key is gone is expired and
//! leaves both indexes (as with `list`). The cursor's place in the index is found again by
//! binary search on each call, so a page costs the same wherever it starts.
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
//! The recency index came later without a new layout version either: older code reads
//! what this code writes, and what it wrote reads as is. On connect, a script compares the
//! sizes of the two indexes (`ZCARD`) and, when the id index holds more ids, walks it in
//! batches of 1,000 (one script each, `ZADD NX`: recorded times are kept) and adds the
//! missing ones to the recency index with time 0: conversations last committed before it
//! are listed by `recent` after all others, with `updated_micros` 0, until their next
//! commit. This runs once per database in practice (later connects find the sizes equal);
//! batches rather than one `ZUNIONSTORE` because a single command holds Redis for everyone
//! (about half a second per 200,000 ids when tried), while a batch holds it for about a
//! millisecond and the walk costs only the connecting process (one round trip per 1,000
//! conversations). The commit script reads `TIME` before it writes, which needs scripts
//! replicated by their effects: the only mode since Redis 7, the default since Redis 5.
//! Older processes still running neither
//! record their commits' times nor add the conversations they create to the recency index
//! (the next connect of a newer process lists those, with time 0), and the ids they prune
//! from the id index stay in the recency index until `recent` meets them: so run one
//! version everywhere before relying on the listing.
//!
//! The `summary` field came later without a new layout version: data written before it
//! has no such field and reads as a conversation without a summary, so there is nothing to
//! convert, and layout 2 code from before it reads what this code writes (it ignores the
//! field, and its commits keep it). Such older code neither shows the summary to the model
//! nor waits for it: under `DropEvicted` it deletes every message below the window start,
//! including evicted messages still waiting to be summarized. So switch summaries on once
//! every process sharing the database runs a version that knows them.
//!
//! # Recall
//!
//! [`RedisStore`] [searches](chatmem::Store::searches): a commit made with recall on
//! writes its index entries ([`Commit::index`](chatmem::store::Commit::index)) in the same
//! script, only when its version check passes (a resend answered as applied writes
//! nothing again), with the time the script reads for `recent`; and
//! [`search`](chatmem::Store::search) is one script on the conversation's node (one round
//! trip, on Cluster too), answering as chatmem's reference index does: BM25 computed in
//! Lua operation for operation as [`bm25`](chatmem::recall::bm25) (the same doubles),
//! then checked by the store with `bm25` itself over the candidates the script answers
//! (a few more than `limit`).
//!
//! The index key, `chatmem:{<tag>}:idx`, is one hash: per term a posting list (its newest
//! postings in one field, older ones in fixed chunks of 64), per message an entry (its
//! length, time and term counts), and a header (counts, and the entries not yet in the
//! lists: a commit of a turn writes its messages' entries only, and every 32 messages one
//! commit moves them into their terms' lists, each term once). Terms are hex-encoded in
//! field names, so no term is ever read as anything but bytes, and the key shares the
//! conversation's hash tag, so Cluster keeps it in the conversation's slot. A search reads,
//! of each query term, only its
//! [`MAX_POSTINGS_PER_TERM`](chatmem::recall::MAX_POSTINGS_PER_TERM) most recent postings
//! before `before`, and the pending entries: its cost grows with its terms (each up to
//! that many postings), not with the conversation. Redis runs one script at a time, so a
//! search of a very long question holds up everyone for that long (a few milliseconds per
//! hundred common terms, measured).
//!
//! The index goes wherever its messages go: `clear` deletes the key with the others, a
//! commit deleting messages below a seq deletes their entries and postings in the same
//! script, and the key carries the conversation's TTL (below). A conversation created
//! again starts with an empty index (the creating commit deletes any key left behind, as
//! it does messages).
//!
//! No new layout version: the index is a key older chatmem never reads, marked by a meta
//! field it ignores, so data written by either reads as is. Switch recall on once every
//! process sharing the database runs a chatmem that knows it: an older one does not give
//! the index key the conversation's TTL when it commits (the index of a conversation kept
//! alive only by such commits can expire first; the conversation then searches as if
//! unindexed until its next indexed commit starts anew), does not delete index entries
//! below a seq (a search leaves out hits whose message is gone, but still counts them),
//! and its `clear` leaves the key behind (deleted when the conversation is created again,
//! else at its TTL, if it has one).
//!
//! # Facts
//!
//! [`RedisStore`] [keeps facts](chatmem::Store::keeps_facts), per user and apart from every
//! conversation: clearing, expiring or purging a conversation, that of the same id included,
//! leaves its user's facts. A user's keys share the hash tag `{u:<tag>}`, `<tag>` being the
//! lower-case hex of the user id's bytes (as for a conversation, so any id is safe; the `u:`
//! makes it a tag no conversation has, so a user and a conversation of one id share no key),
//! so Cluster keeps them in one slot:
//!
//! - `chatmem:{u:<tag>}:user`, a hash: `version`, `next_id` (the id the next new fact gets),
//!   `token` (the last facts commit's, see *Outages*) and `id` (the raw user id). A user is
//!   this hash: without it the user loads as unknown, whatever is left in the other two, and
//!   the next commit deletes those first;
//! - `chatmem:{u:<tag>}:facts`, a hash of the current facts: the fact id (decimal) -> the
//!   JSON [`fact_json`](chatmem::store::fact_json) writes of the [`Fact`](chatmem::facts::Fact);
//! - `chatmem:{u:<tag>}:history`, a hash of the facts' history: the fact id -> its
//!   [`FactChange`](chatmem::facts::FactChange)s as JSON, each followed by a newline, in the
//!   order committed (a fact superseded or evicted keeps its field; one deleted by hand loses
//!   it).
//!
//! [`load_facts`](chatmem::Store::load_facts) is a `MULTI`/`EXEC` of `HMGET` (version, next
//! id) and `HGETALL` (the facts), as a load of a window seen before is: no script, whose reply
//! would pass through Lua. [`commit_facts`](chatmem::Store::commit_facts) is one script: the
//! version check (and the token check: a resend of a commit that landed is answered with the
//! version it made), then only what changed is written: the facts the commit made or changed
//! (`HSET`), those no longer in the set deleted (`HKEYS`, `HDEL`), the dropped facts' history
//! deleted, each fact's new entries appended to its field (`HMGET`, `HSET`), the header set.
//! [`fact_history`](chatmem::Store::fact_history) (`HGET` of the header's version and of the
//! fact's field) and [`forget_user`](chatmem::Store::forget_user) (`HGET` of the version, `DEL`
//! of the three keys) are a `MULTI`/`EXEC` each. A stored fact or entry that does not read
//! back (bad JSON, an id other than its field's, a set breaking
//! [`FactSet`](chatmem::facts::FactSet)'s rules, a version that is not a number) is a
//! [`Corrupt`](chatmem::store::StoreErrorKind::Corrupt) error naming the user and the field,
//! never quoting it (chatmem's [`read_fact`](chatmem::store::read_fact) and the other readers
//! check it, as every store does).
//!
//! None of these keys is ever given a TTL, whatever the store's commits set on
//! conversations: facts belong to a user, not to a conversation. So `volatile-*` eviction
//! policies never evict them (see *Eviction*), and only
//! [`forget_user`](chatmem::Store::forget_user) deletes them. No new layout version: older
//! chatmem never reads these keys (it keeps no facts).
//!
//! # Expiry
//!
//! Every commit sets `PEXPIRE` on the keys of the conversation (both, or all three once it
//! is indexed) to the commit's TTL, or, when the TTL is `None` and the keys carry one
//! (`PTTL`), `PERSIST`s them, inside the commit script (so the keys always carry the same
//! deadline). TTLs are rounded up to whole milliseconds (Redis's unit). A
//! TTL longer than 2^45 ms (about 1,100 years) is too long to pass to Redis safely and, as
//! chatmem documents for a TTL a store cannot represent, never expires. An expired
//! conversation's keys are gone, so it reads as empty at once. Its entries in the id and
//! recency indexes stay until a [`list`](chatmem::Store::list) or a
//! [`recent`](chatmem::Store::recent) meets it (each listed id is checked and stale ones
//! are removed from both indexes) or [`purge_expired`](chatmem::Store::purge_expired)
//! sweeps the id index. Sequence numbers
//! must stay below 2^53 (sorted-set scores are doubles).
//!
//! # Eviction (`maxmemory`)
//!
//! A conversation is its `:meta` hash: when it is missing, the conversation does not exist
//! for any operation, whatever messages (or index) are left behind in `:msgs` and `:idx`
//! (a key deleted by hand, or evicted). `load`, `history` and `search` return nothing,
//! `list` skips it, `clear` deletes the leftovers and returns `false`, and a commit
//! creating it anew deletes them first. The opposite loss cannot be told apart from a conversation whose messages were
//! all dropped: a `:meta` hash whose `:msgs` key was evicted keeps its version and system
//! message but has lost its messages. One whose `:idx` key was evicted searches as if
//! unindexed until its next indexed commit starts a new index.
//!
//! Redis evicts one key at a time, never a conversation's keys together, so the
//! `maxmemory-policy` of the Redis that holds chatmem's keys decides what can be lost:
//!
//! - `noeviction` (Redis's default) is safe: nothing is lost before its TTL; when memory is
//!   full, commits fail with Redis's `OOM` error
//!   ([`StoreErrorKind::Other`](chatmem::store::StoreErrorKind)) and reads keep working.
//! - `volatile-lru`, `volatile-lfu`, `volatile-random`, `volatile-ttl` never evict a key
//!   without a TTL: conversations committed with no TTL, users' facts, the indexes and the
//!   schema key are safe. A conversation with a TTL may be evicted before its deadline, and one key at
//!   a time: without its `:meta` it is gone (as if expired early), without its `:msgs` it
//!   keeps its state but not its messages. Use these only when losing such conversations
//!   early is acceptable. (Expiry itself is safe: a conversation's keys carry the same deadline, set
//!   in the same script, and read as gone together.)
//! - `allkeys-lru`, `allkeys-lfu`, `allkeys-random` are not safe: they may evict any key
//!   at any time, including conversations without a TTL, half of a conversation as above,
//!   a user's facts (a user without its `:user` hash is unknown; without its `:facts` or
//!   `:history` it loses those), and the indexes (their conversations then no longer
//!   `list`; an evicted recency index is rebuilt by the next connect, every time 0).
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
//! Only the indexes (`chatmem:ids` and the recency index, which share one slot) live in
//! another slot, so on Cluster they cannot be updated inside the commit and clear scripts
//! (`CROSSSLOT`) and are kept with separate commands instead:
//!
//! - a commit that creates a conversation (`expected_version == 0`) `ZADD`s the id
//!   *before* the commit script (to the recency index with time 0, `NX`), so a crash
//!   after the commit cannot leave the conversation unlisted (if the commit then fails,
//!   `list` and `recent` drop the entries as stale);
//! - every commit script returns its node's `TIME`, and *after* a successful commit the
//!   store `ZADD`s it to the recency index with `GT` (so two writers' updates arriving out
//!   of order keep the later time; Redis 6.2 or later) and, for a creating commit, the id
//!   once more to the id index in the same pipeline, in case a concurrent `list`,
//!   `recent`, `purge` or `clear` removed the entry in between (a failure of this step is
//!   logged, not returned: the commit is applied; the conversation then keeps its
//!   previous time until its next commit);
//! - `clear` deletes the conversation's keys first, then removes the index entries;
//! - whoever removes entries (`clear`, or `list`/`recent`/`purge_expired` meeting ids
//!   whose meta key is gone) checks with `EXISTS` afterwards and puts back any
//!   conversation that was created meanwhile (in the recency index with time 0 if its
//!   entry went too: it gets its time back with its next commit).
//!
//! So an existing conversation is always listed, except after the rare combination of an
//! index sweep racing its creation *and* the creating process failing right after its
//! commit (before the second `ZADD`); its next commit does not re-add it, but `load`,
//! `commit`, `history` and `clear` work on it regardless. On a single Redis the indexes are
//! exact: they are updated inside the same atomic scripts as the conversation.
//!
//! `recent` reads the recency index with the same script as on a single Redis, without
//! its checks; each listed conversation is then checked on its own node by a small script
//! (that node's `TIME` and the meta key's `PTTL`), all at once. Commit times come from the
//! clock of each conversation's node, so the order between conversations on different
//! nodes is as good as the nodes' clocks agree.
//!
//! Round trips per operation (`N` = ids in the listed page, at most `limit + 1`; index
//! batches hold at most 1,000 ids):
//!
//! | operation | single Redis | Redis Cluster |
//! |---|---|---|
//! | `load`, `history`, `search` | 1 | 1 |
//! | `load_facts`, `commit_facts`, `fact_history`, `forget_user` | 1 | 1 (the user's node) |
//! | `commit` | 1 | 2 (script, `ZADD` of its time); 3 when it creates the conversation (`ZADD`s, script, `ZADD`s) |
//! | `clear` | 1 | 1 when it did not exist; else 3 (script, `ZREM`s, `EXISTS`) |
//! | `list` | 2 (`ZRANGEBYLEX`, one check-and-prune script) | 2 (`ZRANGEBYLEX`, then `N` `EXISTS` sent at once, one per node's connection); +2 (`ZREM`, `EXISTS`) when stale ids were met |
//! | `recent` | 1 per batch (one script: read, check, prune) | 2 per batch (the script, then `N` check scripts sent at once); +2 when expired ids were met |
//! | `purge_expired` | 2 per batch | 2 per batch, +2 when the batch held expired ids |
//!
//! A batch of `recent` reads at most 1,000 index entries; usually one batch makes a page.
//! Connecting runs two scripts (the schema check, then the recency backfill check).
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
//! A user's [facts commit](chatmem::Store::commit_facts) is resent the same way: the user's
//! header hash keeps the token of the last one.
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
mod facts;
mod index;
mod keys;
mod recall;
mod recent;
mod reply;
mod retry;
mod schema;
mod scripts;
mod store;
mod window_cache;

pub use crate::builder::{
    CONNECT_TIMEOUT_PARAM, DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT, DEFAULT_WINDOW_CACHE_BYTES, RESPONSE_TIMEOUT_PARAM,
    RedisStoreBuilder, TIMEOUT_PARAM,
};
pub use crate::schema::SCHEMA_VERSION;
pub use crate::store::RedisStore;
