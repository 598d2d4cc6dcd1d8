//! Mapping driver and pool errors to [`StoreError`] kinds.

use std::error::Error as _;

use deadpool_postgres::tokio_postgres;
use deadpool_postgres::{PoolError, TimeoutType};

use chatmem::store::{StoreError, StoreErrorKind};

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

/// Whether a statement failed because its connection was lost (closed, or broken at the
/// socket) rather than because the server answered with an error: then the statement may
/// have been applied although no answer came.
pub(crate) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    e.code().is_none() && (e.is_closed() || has_io_source(e))
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

/// A driver error while doing `what` on `target` (a server name without password).
///
/// The driver error stays the source, so the server's message is printed once, by it; the
/// context adds only the SQLSTATE code, which the driver's text does not show.
pub(crate) fn db_error(e: tokio_postgres::Error, what: &str, target: &str) -> StoreError {
    let kind = kind_of(&e);
    let context = match e.code() {
        Some(code) => format!("{what} on {target} (SQLSTATE {})", code.code()),
        None => format!("{what} on {target}"),
    };
    StoreError::new(kind, context).with_source(e)
}

/// A pool error while getting a connection for `what`.
pub(crate) fn pool_error(e: PoolError, what: &str, target: &str) -> StoreError {
    let unavailable = |why: &str| StoreError::new(StoreErrorKind::Unavailable, format!("{what} on {target}: {why}"));
    match e {
        PoolError::Backend(e) => db_error(e, what, target),
        PoolError::Timeout(TimeoutType::Wait) => {
            unavailable("no pooled connection became free within the pool timeout")
        }
        PoolError::Timeout(TimeoutType::Create) => unavailable("connecting took longer than the connect timeout"),
        PoolError::Timeout(TimeoutType::Recycle) => unavailable("reusing a pooled connection timed out"),
        PoolError::Closed => unavailable("the pool is closed"),
        other => StoreError::new(
            StoreErrorKind::Other,
            format!("{what} on {target}: the connection pool failed"),
        )
        .with_source(other.to_string()),
    }
}
