//! Opening a store from a URL: `memory:`, `sqlite:PATH`, `postgres://…`, `redis://…`.

use std::sync::Arc;

use anyhow::{anyhow, bail};
use chatmem::{InMemoryStore, Store, redact_url};

/// The environment variable that overrides the default store.
pub(crate) const STORE_ENV: &str = "CHATMEM_STORE";

/// The default store: an SQLite file in the user's data directory.
pub(crate) fn default_url() -> anyhow::Result<String> {
    let dir = dirs::data_dir()
        .ok_or_else(|| anyhow!("no user data directory is known here; pass --store or set {STORE_ENV}"))?;
    Ok(format!("sqlite:{}", dir.join("chatmem").join("chatmem.db").display()))
}

/// Opens the store `url` names.
pub(crate) async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let scheme = url.split(':').next().unwrap_or_default();
    let store: Arc<dyn Store> = match scheme {
        "memory" => Arc::new(InMemoryStore::new()),
        // Each store's errors name its file or server (passwords hidden): no context here,
        // so the URL is printed once.
        "sqlite" => Arc::new(chatmem_sqlite::SqliteStore::connect(url).await?),
        "postgres" | "postgresql" => Arc::new(chatmem_postgres::PostgresStore::connect(url).await?),
        "redis" | "rediss" | "redis+cluster" => Arc::new(chatmem_redis::RedisStore::connect(url).await?),
        _ => bail!(
            "unknown store URL {}: expected memory:, sqlite:PATH, postgres://…, redis://… or redis+cluster://host:port,…",
            redact_url(url)
        ),
    };
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_url_prints_no_secret() {
        for url in [
            "host=db user=u password=secret",
            "mysql://u:secret@db/x",
            "ftp://db/x?password=secret",
        ] {
            let e = open(url).await.expect_err("unknown scheme").to_string();
            assert!(e.starts_with("unknown store URL"), "{e}");
            assert!(!e.contains("secret"), "{url:?} printed as {e:?}");
        }
    }
}
