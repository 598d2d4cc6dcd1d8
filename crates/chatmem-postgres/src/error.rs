//! Mapping driver and pool errors to [`StoreError`] kinds.

use std::error::Error as _;

use deadpool_postgres::PoolError;
use deadpool_postgres::tokio_postgres;

use chatmem::{StoreError, StoreErrorKind};

/// The kind of a driver error: server-side by SQLSTATE class, client-side by whether the
/// connection itself failed.
fn kind_of(e: &tokio_postgres::Error) -> StoreErrorKind {
    if let Some(code) = e.code() {
        let code = code.code();
        return match &code[..2] {
            // Connection exception, insufficient resources, operator intervention (this
            // includes statement_timeout's query_canceled and shutdowns), system error.
            "08" | "53" | "57" | "58" => StoreErrorKind::Unavailable,
            // A read-only (standby) server, or a lock that could not be had in time.
            _ if code == "25006" || code == "55P03" => StoreErrorKind::Unavailable,
            // Serialization failure and deadlock: nothing was written; reload and retry.
            "40" => StoreErrorKind::Conflict,
            _ => StoreErrorKind::Other,
        };
    }
    if e.is_closed() || has_io_source(e) {
        return StoreErrorKind::Unavailable;
    }
    // Kinds without a source that still mean "the server did not answer".
    let text = e.to_string();
    if text.starts_with("timeout waiting for server") || text.starts_with("error connecting to server") {
        StoreErrorKind::Unavailable
    } else {
        StoreErrorKind::Other
    }
}

fn has_io_source(e: &tokio_postgres::Error) -> bool {
    let mut source = e.source();
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// A driver error while doing `what` on `target` (a URL without password).
pub(crate) fn db_error(e: tokio_postgres::Error, what: &str, target: &str) -> StoreError {
    let kind = kind_of(&e);
    let detail = e
        .as_db_error()
        .map(|db| format!(" ({}: {})", db.code().code(), db.message()));
    StoreError::new(kind, format!("{what} on {target}{}", detail.unwrap_or_default())).with_source(e)
}

/// A pool error while getting a connection for `what`.
pub(crate) fn pool_error(e: PoolError, what: &str, target: &str) -> StoreError {
    match e {
        PoolError::Backend(e) => db_error(e, what, target),
        PoolError::Timeout(_) => timed_out(what, target),
        PoolError::Closed => StoreError::new(StoreErrorKind::Unavailable, format!("{what}: the pool is closed")),
        other => StoreError::new(
            StoreErrorKind::Other,
            format!("{what} on {target}: connection pool failed"),
        )
        .with_source(other.to_string()),
    }
}

/// The operation did not finish within the store's timeout.
pub(crate) fn timed_out(what: &str, target: &str) -> StoreError {
    StoreError::new(StoreErrorKind::Unavailable, format!("{what} on {target}: timed out"))
}
