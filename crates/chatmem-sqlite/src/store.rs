//! [`SqliteStore`]: the pool of connections and the async [`Store`] face over [`crate::sql`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chatmem::facts::FactChange;
use chatmem::store::{
    Commit, FactsCommit, IndexedMessage, MessageVector, RecentPage, RecentQuery, SearchQuery, SearchResult, Snapshot,
    StoreError, StoreErrorKind, StoredFacts, StoredMessage,
};
use chatmem::{ConversationId, Page, Store, UserId};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{Mutex as AsyncMutex, Semaphore};
use tokio::time::Instant;

use crate::{error, facts, migrate, pragmas, recall, sql, vectors};

/// How long an operation may wait for a connection or for another process's write lock
/// before failing with [`StoreErrorKind::Unavailable`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections per store by default: enough for loads to run beside a commit.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// The schema version this crate writes; a file with a higher one is refused.
pub const SCHEMA_VERSION: i64 = migrate::SCHEMA_VERSION;

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

/// A [`Store`] in one SQLite file.
///
/// It [searches](Store::search): a commit made with recall on writes its messages' lexical
/// index entries in its own transaction, and a search answers from them as the in-memory
/// reference does (see the crate docs, "Recall").
///
/// Cheap to clone (clones share the connections). Each operation borrows one connection
/// from a small pool and runs on tokio's blocking thread pool
/// ([`spawn_blocking`](tokio::task::spawn_blocking)), never on the async executor, so it
/// must be used inside a tokio runtime.
///
/// Why a pool and a write lock: in WAL mode readers never wait for the writer, so a few
/// connections let loads run while a commit is in progress; SQLite admits one writer at a
/// time anyway, so commits from this process queue on an in-process lock (fair, no
/// sleeping) and only wait on SQLite's `busy_timeout` against other processes.
///
/// ```no_run
/// # async fn demo() -> Result<(), chatmem::store::StoreError> {
/// use std::time::Duration;
/// let store = chatmem_sqlite::SqliteStore::builder("data/chatmem.db")
///     .timeout(Duration::from_secs(2))
///     .pool_size(2)
///     .open()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    timeout: Duration,
    pool_size: usize,
    read_only: bool,
    /// Whether a connection reopened after a panic may create the file again.
    create_if_missing: bool,
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
    writer: Arc<AsyncMutex<()>>,
    statements: Arc<AtomicU64>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("timeout", &self.inner.timeout)
            .field("pool_size", &self.inner.pool_size)
            .finish_non_exhaustive()
    }
}

/// Options for opening a [`SqliteStore`]; see [`SqliteStore::builder`].
#[derive(Debug, Clone)]
pub struct SqliteStoreBuilder {
    path: PathBuf,
    timeout: Duration,
    pool_size: usize,
    read_only: bool,
    create_if_missing: bool,
}

/// The file a [`SqliteStoreBuilder`] was to open does not exist, and the builder was not
/// allowed to create it ([`create_if_missing(false)`](SqliteStoreBuilder::create_if_missing)
/// or [`read_only`](SqliteStoreBuilder::read_only)); nothing was created.
///
/// It is the [`source`](std::error::Error::source) of the
/// [`StoreErrorKind::InvalidInput`] error that [`SqliteStoreBuilder::open`] returns, so a
/// caller can tell a missing file from other refusals:
///
/// ```no_run
/// # async fn demo() {
/// use chatmem_sqlite::{MissingDatabase, SqliteStore};
/// let e = SqliteStore::builder("typo.db").create_if_missing(false).open().await.unwrap_err();
/// let missing = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<MissingDatabase>());
/// assert_eq!(missing.map(|m| m.path()), Some(std::path::Path::new("typo.db")));
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("no SQLite database at {}; nothing was created", .path.display())]
pub struct MissingDatabase {
    path: PathBuf,
}

impl MissingDatabase {
    /// The path that was asked for, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Fails with [`MissingDatabase`] unless `path` exists. Checked before SQLite opens the file
/// so that the error names the path (SQLite's own says only "unable to open database file").
fn require_existing(path: &Path) -> Result<(), StoreError> {
    match path.try_exists() {
        Ok(true) => Ok(()),
        Ok(false) => Err(StoreError::new(StoreErrorKind::InvalidInput, "the store must exist")
            .with_source(MissingDatabase { path: path.to_owned() })),
        Err(e) => Err(StoreError::new(
            StoreErrorKind::Unavailable,
            format!("checking whether {} exists", path.display()),
        )
        .with_source(e)),
    }
}

impl SqliteStoreBuilder {
    /// How long an operation may wait for a connection or another process's write lock
    /// (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many connections the store keeps (default [`DEFAULT_POOL_SIZE`]; at least 1,
    /// checked by [`open`](SqliteStoreBuilder::open)).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Opens the file read-only (default: read-write): loads, history, listing and search work
    /// on a file this process cannot write; writes fail with [`StoreErrorKind::InvalidInput`].
    /// The file must exist with a current schema (a missing one is [`MissingDatabase`]).
    /// `sqlite:PATH?mode=ro` sets this.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Whether [`open`](SqliteStoreBuilder::open) creates a missing file and its parent
    /// directories (default: true). With false a missing file is an error whose source is
    /// [`MissingDatabase`], and nothing is created: no directory, no file, no WAL or
    /// shared-memory file. An existing file is opened as usual (its schema created or
    /// upgraded if needed, unless [`read_only`](SqliteStoreBuilder::read_only)).
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// Opens the file (creating it and its parent directories if missing, unless
    /// [`create_if_missing(false)`](SqliteStoreBuilder::create_if_missing) or
    /// [`read_only`](SqliteStoreBuilder::read_only)), sets WAL mode and creates or checks
    /// the schema.
    ///
    /// # Errors
    /// [`StoreErrorKind::Unavailable`] when the file cannot be opened or stays locked,
    /// [`StoreErrorKind::SchemaTooNew`] when a newer chatmem wrote it,
    /// [`StoreErrorKind::Corrupt`] when it is not a SQLite database,
    /// [`StoreErrorKind::InvalidInput`] for a pool size of 0 or a zero timeout, or with a
    /// [`MissingDatabase`] source for a missing file the builder may not create.
    pub async fn open(self) -> Result<SqliteStore, StoreError> {
        if self.pool_size == 0 {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                "pool_size must be at least 1",
            ));
        }
        if self.timeout.is_zero() {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                "timeout must be longer than zero",
            ));
        }
        let statements = Arc::new(AtomicU64::new(0));
        let counter = statements.clone();
        let Self {
            path,
            timeout,
            pool_size,
            read_only,
            create_if_missing,
        } = self;
        let create = create_if_missing && !read_only;
        let path2 = path.clone();
        let conns = run_blocking(move || {
            if !create {
                require_existing(&path2)?;
            }
            let mode = Mode { read_only, create };
            if read_only {
                let first = open_connection(&path2, timeout, &counter, mode)?;
                migrate::check_schema(&first)?;
                let mut conns = vec![first];
                for _ in 1..pool_size {
                    conns.push(open_connection(&path2, timeout, &counter, mode)?);
                }
                return Ok(conns);
            }
            if create && let Some(parent) = path2.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    StoreError::new(
                        StoreErrorKind::Unavailable,
                        format!("creating the directory {}", parent.display()),
                    )
                    .with_source(e)
                })?;
            }
            let mut first = open_connection(&path2, timeout, &counter, mode)?;
            migrate::migrate(&mut first)?;
            let mut conns = vec![first];
            for _ in 1..pool_size {
                conns.push(open_connection(&path2, timeout, &counter, mode)?);
            }
            Ok(conns)
        })
        .await?;
        tracing::debug!(path = %path.display(), pool_size, read_only, "opened sqlite store");
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                timeout,
                pool_size,
                read_only,
                create_if_missing: create,
                idle: Mutex::new(conns),
                permits: Arc::new(Semaphore::new(pool_size)),
                writer: Arc::new(AsyncMutex::new(())),
                statements,
            }),
        })
    }
}

/// How a connection opens the file.
#[derive(Debug, Clone, Copy)]
struct Mode {
    read_only: bool,
    /// Whether SQLite may create a missing file (never when read-only).
    create: bool,
}

fn open_connection(
    path: &Path,
    timeout: Duration,
    counter: &Arc<AtomicU64>,
    mode: Mode,
) -> Result<Connection, StoreError> {
    let flags = match mode {
        Mode { read_only: true, .. } => OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        Mode { create: true, .. } => {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        }
        Mode { create: false, .. } => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    };
    let mut conn = Connection::open_with_flags(path, flags)
        .map_err(|e| error::db_error(&format!("opening {}", path.display()), e))?;
    let counter = counter.clone();
    // Counts every statement SQLite starts on this connection: the measured basis of the
    // per-operation statement counts in the crate docs.
    conn.trace_v2(
        rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
        Some(move |event: rusqlite::trace::TraceEvent<'_>| {
            if matches!(event, rusqlite::trace::TraceEvent::Stmt(..)) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }),
    )
    .map_err(|e| error::db_error("installing the statement counter", e))?;
    // Room for every statement the store runs (rusqlite keeps 16 by default; a commit with
    // recall and a search use a dozen between them), so none is prepared again.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    pragmas::configure(&conn, timeout, mode.read_only)?;
    Ok(conn)
}

async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::new(StoreErrorKind::Other, "a sqlite worker task failed").with_source(e))?
}

fn unavailable(what: &str, timeout: Duration) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unavailable,
        format!("{what}: no sqlite connection free within {timeout:?}"),
    )
}

impl SqliteStore {
    /// Options for opening the file at `path`.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteStoreBuilder {
        SqliteStoreBuilder {
            path: path.into(),
            timeout: DEFAULT_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
            read_only: false,
            create_if_missing: true,
        }
    }

    /// Options for the file a URL names (see [`connect`](SqliteStore::connect)), with
    /// `?mode=ro` applied: for a caller that takes a URL and sets more options, such as
    /// [`create_if_missing`](SqliteStoreBuilder::create_if_missing).
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for another scheme, an empty path or an unknown
    /// parameter.
    pub fn builder_from_url(url: &str) -> Result<SqliteStoreBuilder, StoreError> {
        let (path, read_only) = parse_url(url)?;
        Ok(Self::builder(path).read_only(read_only))
    }

    /// Opens the file at `path` with the default options; see [`SqliteStoreBuilder::open`].
    ///
    /// # Errors
    /// As [`SqliteStoreBuilder::open`].
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self, StoreError> {
        Self::builder(path).open().await
    }

    /// Opens the file named by a URL: `sqlite:PATH` or `sqlite://PATH` (`sqlite:///abs/path`
    /// for an absolute path), with the default options.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for another scheme or an empty path; otherwise as
    /// [`SqliteStoreBuilder::open`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder_from_url(url)?.open().await
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// How many SQL statements SQLite has started on this store's connections since it was
    /// opened (schema setup included), counted by SQLite's trace hook. For tests and
    /// benchmarks: the difference across one operation is its statement count.
    pub fn statements_executed(&self) -> u64 {
        self.inner.statements.load(Ordering::Relaxed)
    }

    /// Runs `f` on a pooled connection on a blocking thread. Writers first take the
    /// in-process write lock. Both waits are bounded by the timeout.
    async fn with_conn<T: Send + 'static>(
        &self,
        what: &'static str,
        write: bool,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        if write && self.inner.read_only {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("{what}: the store was opened read-only"),
            ));
        }
        let deadline = Instant::now() + self.inner.timeout;
        let guard = if write {
            let lock = tokio::time::timeout_at(deadline, self.inner.writer.clone().lock_owned()).await;
            Some(lock.map_err(|_| unavailable(what, self.inner.timeout))?)
        } else {
            None
        };
        let permit = tokio::time::timeout_at(deadline, self.inner.permits.clone().acquire_owned())
            .await
            .map_err(|_| unavailable(what, self.inner.timeout))?
            .map_err(|e| StoreError::new(StoreErrorKind::Other, "the sqlite pool is closed").with_source(e))?;
        let inner = self.inner.clone();
        // The closure owns the lock guard, the permit and the connection, so a caller that
        // stops waiting (dropped future) never returns a connection mid-transaction.
        run_blocking(move || {
            let _guard = guard;
            let _permit = permit;
            let mut conn = inner.take()?;
            let result = f(&mut conn);
            inner.give_back(conn);
            result
        })
        .await
    }
}

impl Inner {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        // Only push/pop happen under this lock; a poisoned Vec is still a valid Vec.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection; a new one if a panic lost one (the permit guarantees room).
    fn take(&self) -> Result<Connection, StoreError> {
        if let Some(conn) = self.idle().pop() {
            return Ok(conn);
        }
        let mode = Mode {
            read_only: self.read_only,
            create: self.create_if_missing,
        };
        open_connection(&self.path, self.timeout, &self.statements, mode)
    }

    fn give_back(&self, conn: Connection) {
        // A connection left inside a transaction (cannot happen: every transaction is
        // committed or rolled back on drop) would block writers; drop it instead.
        if conn.is_autocommit() {
            self.idle().push(conn);
        }
    }
}

/// The path of a `sqlite:` URL and whether it asks for `mode=ro`.
fn parse_url(url: &str) -> Result<(PathBuf, bool), StoreError> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                "a sqlite URL must start with sqlite: (sqlite:PATH or sqlite://PATH)",
            )
        })?;
    let (rest, read_only) = match rest.split_once('?') {
        None => (rest, false),
        Some((path, query)) => {
            let mut read_only = false;
            for param in query.split('&') {
                match param {
                    "mode=ro" => read_only = true,
                    "mode=rw" | "mode=rwc" => read_only = false,
                    _ => {
                        return Err(StoreError::new(
                            StoreErrorKind::InvalidInput,
                            format!(
                                "unknown sqlite URL parameter {:?}: only mode=ro or mode=rw",
                                chatmem::printable::printable(param)
                            ),
                        ));
                    }
                }
            }
            (path, read_only)
        }
    };
    if rest.is_empty() {
        return Err(StoreError::new(
            StoreErrorKind::InvalidInput,
            "the sqlite URL has no path",
        ));
    }
    if rest == ":memory:" {
        // Each pooled connection would get its own empty database.
        return Err(StoreError::new(
            StoreErrorKind::InvalidInput,
            "in-memory SQLite is not supported; use chatmem::InMemoryStore",
        ));
    }
    Ok((PathBuf::from(rest), read_only))
}

#[async_trait]
impl Store for SqliteStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        let id = id.clone();
        self.with_conn("load", false, move |c| sql::load(c, &id)).await
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let id = id.clone();
        self.with_conn("commit", true, move |c| sql::commit(c, &id, &commit))
            .await
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        let id = id.clone();
        self.with_conn("history", false, move |c| sql::history(c, &id, after, limit))
            .await
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let id = id.clone();
        self.with_conn("clear", true, move |c| sql::clear(c, &id)).await
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        let after = after.cloned();
        self.with_conn("list", false, move |c| sql::list(c, after.as_ref(), limit))
            .await
    }

    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        let (prefix, before, limit) = (query.prefix.as_str(), query.before.as_ref(), query.limit);
        let (prefix, before) = (prefix.to_owned(), before.cloned());
        let page = move |c: &mut Connection| sql::recent(c, &prefix, before.as_ref(), limit);
        self.with_conn("recent", false, page).await
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.with_conn("purge_expired", true, sql::purge_expired).await
    }

    /// Always: every commit writes its index entries, and a read-only store searches what
    /// others wrote.
    fn searches(&self) -> bool {
        true
    }

    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        let (id, query) = (id.clone(), query.clone());
        self.with_conn("search", false, move |c| {
            let found = recall::search(c, &id, &query)?;
            Ok(match &query.vector {
                Some(v) => found.with_vector_hits(vectors::search(c, &id, v, query.before, query.limit)?),
                None => found,
            })
        })
        .await
    }

    /// Always, as [`searches`](Store::searches).
    fn keeps_vectors(&self) -> bool {
        true
    }

    async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
        let (id, vectors) = (id.clone(), vectors.to_vec());
        self.with_conn("put_vectors", true, move |c| vectors::put(c, &id, &vectors))
            .await
    }

    async fn unembedded(
        &self,
        id: &ConversationId,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
    ) -> Result<Vec<IndexedMessage>, StoreError> {
        let (id, model) = (id.clone(), model.to_owned());
        self.with_conn("unembedded", false, move |c| {
            vectors::unembedded(c, &id, &model, dim, after, limit)
        })
        .await
    }

    /// Always: users' facts are kept in their own tables, apart from every conversation and
    /// never expired (see the crate docs, "Facts").
    fn keeps_facts(&self) -> bool {
        true
    }

    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        let user = user.clone();
        self.with_conn("load_facts", false, move |c| facts::load(c, &user))
            .await
    }

    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        let user = user.clone();
        self.with_conn("commit_facts", true, move |c| facts::commit(c, &user, commit))
            .await
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        let user = user.clone();
        self.with_conn("fact_history", false, move |c| facts::history(c, &user, fact))
            .await
    }

    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        let user = user.clone();
        self.with_conn("forget_user", true, move |c| facts::forget(c, &user))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let rw = |p: &str| Some((PathBuf::from(p), false));
        assert_eq!(parse_url("sqlite:data/x.db").ok(), rw("data/x.db"));
        assert_eq!(parse_url("sqlite://data/x.db").ok(), rw("data/x.db"));
        assert_eq!(parse_url("sqlite:///tmp/x.db").ok(), rw("/tmp/x.db"));
        assert_eq!(parse_url("sqlite:/tmp/x.db").ok(), rw("/tmp/x.db"));
        assert_eq!(
            parse_url("sqlite:/tmp/x.db?mode=ro").ok(),
            Some((PathBuf::from("/tmp/x.db"), true))
        );
        for bad in [
            "postgres://x",
            "sqlite:",
            "sqlite://",
            "x.db",
            "sqlite::memory:",
            "sqlite:/tmp/x.db?cache=shared",
            "sqlite:?mode=ro",
        ] {
            assert_eq!(
                parse_url(bad).map_err(|e| e.kind()).err(),
                Some(StoreErrorKind::InvalidInput),
                "{bad}"
            );
        }
    }
}
