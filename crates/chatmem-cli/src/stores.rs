//! Opening a store from a URL: `memory:`, `sqlite:PATH`, `postgres://…`, `mysql://…`,
//! `redis://…`.
//!
//! A command that only reads or deletes opens an existing store and never creates one (a typo
//! in a path must not leave a new empty database behind); a command that adds creates it.

use std::sync::Arc;

use anyhow::{anyhow, bail};
use chatmem::store::redact_url;
use chatmem::{InMemoryStore, Store};
use chatmem_sqlite::{MissingDatabase, SqliteStore};

/// The environment variable that overrides the default store.
pub(crate) const STORE_ENV: &str = "CHATMEM_STORE";

/// What a command does with its store, which decides whether opening may create it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only reads (`get`, `history`, `recall`, `list`, `export`): the store must exist and is
    /// opened without a write: SQLite read-only, PostgreSQL and MySQL without migrations.
    Read,
    /// Deletes (`clear`, `purge`): the store must exist, as for [`Access::Read`] (a missing
    /// one holds nothing to delete), and is opened for writing, without migrations.
    Delete,
    /// Adds: a missing store (file, schema) is created.
    Write,
}

/// The default store: an SQLite file in the user's data directory.
pub(crate) fn default_url() -> anyhow::Result<String> {
    let dir = dirs::data_dir()
        .ok_or_else(|| anyhow!("no user data directory is known here; pass --store or set {STORE_ENV}"))?;
    Ok(format!("sqlite:{}", dir.join("chatmem").join("chatmem.db").display()))
}

/// Opens the store `url` names, for `access`.
pub(crate) async fn open(url: &str, access: Access) -> anyhow::Result<Arc<dyn Store>> {
    // The colon is part of the scheme: `memory` alone is refused like `sqlite` alone.
    let Some((scheme, _)) = url.split_once(':') else {
        return Err(unknown_url(url));
    };
    let store: Arc<dyn Store> = match scheme {
        "memory" => Arc::new(InMemoryStore::new()),
        // Each store's errors name its file or server (passwords hidden): no context here,
        // so the URL is printed once.
        "sqlite" => Arc::new(open_sqlite(url, access).await?),
        "postgres" | "postgresql" => Arc::new(
            chatmem_postgres::PostgresStore::builder(url)
                .migrate(access == Access::Write)
                .connect()
                .await?,
        ),
        "mysql" => Arc::new(
            chatmem_mysql::MysqlStore::builder(url)
                .migrate(access == Access::Write)
                .connect()
                .await?,
        ),
        // Nothing to create: a conversation that is not there reads as empty.
        "redis" | "rediss" | "redis+cluster" => Arc::new(chatmem_redis::RedisStore::connect(url).await?),
        _ => return Err(unknown_url(url)),
    };
    Ok(store)
}

async fn open_sqlite(url: &str, access: Access) -> anyhow::Result<SqliteStore> {
    let builder = SqliteStore::builder_from_url(url)?;
    let (builder, doing) = match access {
        Access::Read => (builder.read_only(true), "reading"),
        Access::Delete => (builder.create_if_missing(false), "deleting"),
        Access::Write => (builder, "adding"),
    };
    match builder.open().await {
        Ok(store) => Ok(store),
        Err(e) => match std::error::Error::source(&e).and_then(|s| s.downcast_ref::<MissingDatabase>()) {
            Some(missing) => bail!(
                "no SQLite store at {}: {doing} creates none (add, import, chat and serve create one)",
                missing.path().display()
            ),
            None => Err(e.into()),
        },
    }
}

/// A URL with no scheme the CLI knows, shown as typed (a password hidden), with the fix
/// when a likely one is clear.
fn unknown_url(url: &str) -> anyhow::Error {
    const EXPECTED: &str =
        "expected memory:, sqlite:PATH, postgres://…, mysql://…, redis://… or redis+cluster://host:port,…";
    if url.is_empty() {
        return anyhow!("the store URL is empty: {EXPECTED}");
    }
    let shown = redact_url(url);
    let hint = match url {
        "memory" => " (did you mean memory:?)".to_owned(),
        "sqlite" => " (did you mean sqlite:PATH?)".to_owned(),
        "postgres" | "postgresql" => " (did you mean postgres://USER@HOST/DATABASE?)".to_owned(),
        "mysql" => " (did you mean mysql://USER@HOST/DATABASE?)".to_owned(),
        "redis" | "rediss" => " (did you mean redis://HOST:PORT?)".to_owned(),
        "redis+cluster" => " (did you mean redis+cluster://HOST:PORT,…?)".to_owned(),
        // No scheme, nothing that could be a password or a connection string: a file path.
        _ if !url.contains([':', '=', '@']) => format!(" (did you mean sqlite:{shown}?)"),
        _ => String::new(),
    };
    anyhow!("unknown store URL \"{shown}\": {EXPECTED}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refused(url: &str) -> String {
        match open(url, Access::Write).await {
            Ok(_) => panic!("{url:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[tokio::test]
    async fn an_unknown_url_prints_no_secret() {
        for url in [
            "host=db user=u password=secret",
            "mssql://u:secret@db/x",
            "ftp://db/x?password=secret",
            "u:secret@db/x",
            "secret@db/x",
        ] {
            let e = refused(url).await;
            assert!(e.starts_with("unknown store URL"), "{e}");
            assert!(!e.contains("secret"), "{url:?} printed as {e:?}");
        }
    }

    #[tokio::test]
    async fn an_unknown_url_is_shown_as_typed_with_the_likely_fix() {
        for (url, said) in [
            (
                "data/x.db",
                "unknown store URL \"data/x.db\": expected memory:, sqlite:PATH, postgres://…, mysql://…, redis://… or redis+cluster://host:port,… (did you mean sqlite:data/x.db?)",
            ),
            ("memory", "(did you mean memory:?)"),
            ("sqlite", "(did you mean sqlite:PATH?)"),
            ("postgres", "(did you mean postgres://USER@HOST/DATABASE?)"),
            ("redis", "(did you mean redis://HOST:PORT?)"),
            (
                "mssql://u:pw@db/x",
                "unknown store URL \"mssql://u:***@db/x\": expected",
            ),
            ("mysql", "(did you mean mysql://USER@HOST/DATABASE?)"),
            (
                "host=db password=pw",
                "unknown store URL \"host=db password=***\": expected",
            ),
            ("", "the store URL is empty"),
        ] {
            let e = refused(url).await;
            assert!(e.contains(said), "{url:?}: {e}");
        }
        // No sqlite: suggestion for what is not a path.
        assert!(!refused("mssql://db/x").await.contains("did you mean"));
    }
}
