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
///
/// Done on the text rather than with a URL parser because cluster URLs
/// (`redis+cluster://u:pw@h1:7000,h2:7001`) are not valid URLs, and a parse failure must
/// never print the password.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    match authority[..at].find(':') {
        Some(colon) => format!("{}{}:***{}", &url[..scheme_end], &authority[..colon], &rest[at..]),
        None => url.to_string(),
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
        "redis" | "rediss" | "redis+cluster" => Arc::new(
            chatmem_redis::RedisStore::connect(url)
                .await
                .with_context(|| format!("connecting to {shown}"))?,
        ),
        _ => bail!(
            "unknown store URL {shown:?}: expected memory:, sqlite:PATH, postgres://…, redis://… or redis+cluster://host:port,…"
        ),
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
        assert_eq!(redact("redis://:pw@127.0.0.1:6379/0"), "redis://:***@127.0.0.1:6379/0");
        assert_eq!(
            redact("redis+cluster://u:pw@h1:7000,h2:7001"),
            "redis+cluster://u:***@h1:7000,h2:7001"
        );
        assert_eq!(
            redact("postgres://app@db/x?password=no-userinfo"),
            "postgres://app@db/x?password=no-userinfo"
        );
        assert_eq!(redact("postgres://a:p@ss@db/x"), "postgres://a:***@db/x");
    }
}
