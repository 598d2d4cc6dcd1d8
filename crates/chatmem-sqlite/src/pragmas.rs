//! The per-connection settings: lock wait, WAL, `synchronous`.

use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind};
use rusqlite::Connection;

use crate::error::db_error;

/// Sets the per-connection pragmas. `journal_mode` is persistent in the file; setting it on
/// every open makes any file WAL, whoever created it.
pub(crate) fn configure(conn: &Connection, timeout: Duration, read_only: bool) -> Result<(), StoreError> {
    conn.busy_timeout(timeout)
        .map_err(|e| db_error("setting busy_timeout", e))?;
    if read_only {
        // A read-only connection reads in whatever mode the file is in.
        return Ok(());
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(|e| db_error("enabling WAL", e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::new(
            StoreErrorKind::Other,
            format!("the database refused WAL mode (journal_mode is {mode})"),
        ));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| db_error("setting synchronous", e))?;
    Ok(())
}
