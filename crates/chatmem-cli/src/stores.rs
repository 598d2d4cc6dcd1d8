//! Opening a store from a URL: `memory:`, `sqlite:PATH`, `postgres://…`, `redis://…`.

use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use chatmem::{InMemoryStore, Store};

/// The environment variable that overrides the default store.
pub(crate) const STORE_ENV: &str = "CHATMEM_STORE";

/// The default store: an SQLite file in the user's data directory.
pub(crate) fn default_url() -> anyhow::Result<String> {
    let dir = dirs::data_dir()
        .ok_or_else(|| anyhow!("no user data directory is known here; pass --store or set {STORE_ENV}"))?;
    Ok(format!("sqlite:{}", dir.join("chatmem").join("chatmem.db").display()))
}

/// The URL with any password replaced, safe to print.
pub(crate) fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Cannot fail for URLs that already carry a password.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// Opens the store `url` names.
pub(crate) async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let shown = redact(url);
    let scheme = url.split(':').next().unwrap_or_default();
    let store: Arc<dyn Store> = match scheme {
        "memory" => Arc::new(InMemoryStore::new()),
        "sqlite" => Arc::new(
            chatmem_sqlite::SqliteStore::connect(url)
                .await
                .with_context(|| format!("opening {shown}"))?,
        ),
        "postgres" | "postgresql" => Arc::new(
            chatmem_postgres::PostgresStore::connect(url)
                .await
                .with_context(|| format!("connecting to {shown}"))?,
        ),
        "redis" | "rediss" => Arc::new(
            chatmem_redis::RedisStore::connect(url)
                .await
                .with_context(|| format!("connecting to {shown}"))?,
        ),
        _ => bail!("unknown store URL {shown:?}: expected memory:, sqlite:PATH, postgres://… or redis://…"),
    };
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_print() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact("sqlite:/tmp/a.db"), "sqlite:/tmp/a.db");
    }
}
