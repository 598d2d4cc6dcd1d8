//! Mapping rusqlite errors to [`StoreError`] kinds.

use chatmem::store::{StoreError, StoreErrorKind};

/// A rusqlite error while doing `what`, as a store error: lock waits that ran out and I/O
/// failures are `Unavailable`, a damaged file is `Corrupt`, the rest `Other`.
pub(crate) fn db_error(what: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    let kind = match e.sqlite_error_code() {
        Some(C::DatabaseBusy | C::DatabaseLocked) => StoreErrorKind::Unavailable,
        Some(C::CannotOpen | C::SystemIoFailure | C::DiskFull | C::PermissionDenied | C::ReadOnly) => {
            StoreErrorKind::Unavailable
        }
        Some(C::DatabaseCorrupt | C::NotADatabase) => StoreErrorKind::Corrupt,
        _ => StoreErrorKind::Other,
    };
    let context = match kind {
        StoreErrorKind::Unavailable if e.sqlite_error_code() == Some(C::DatabaseBusy) => {
            format!("{what}: the database stayed locked by another writer for the whole timeout")
        }
        _ => what.to_owned(),
    };
    StoreError::new(kind, context).with_source(e)
}
