//! Mapping driver errors to [`StoreError`] kinds.

use mysql_async::{DriverError, Error};

use chatmem::store::{StoreError, StoreErrorKind};

/// MySQL/MariaDB server error codes this store tells apart.
mod code {
    /// `ER_LOCK_DEADLOCK`: the transaction was rolled back, nothing was written.
    pub(super) const DEADLOCK: u16 = 1213;
    /// `ER_LOCK_WAIT_TIMEOUT`: a row lock could not be had within `innodb_lock_wait_timeout`.
    pub(super) const LOCK_WAIT_TIMEOUT: u16 = 1205;
    /// `ER_CON_COUNT_ERROR`, `ER_SERVER_SHUTDOWN`, `ER_OPTION_PREVENTS_STATEMENT`
    /// (`--read-only`), `ER_QUERY_INTERRUPTED`, `ER_CONNECTION_KILLED` (MariaDB),
    /// `ER_STATEMENT_TIMEOUT` (MariaDB), `ER_QUERY_TIMEOUT` (MySQL), `ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION`.
    pub(super) const UNAVAILABLE: &[u16] = &[1040, 1053, 1290, 1317, 1927, 1969, 3024, 1792];
}

/// The kind of a driver error: server-side by its code, client-side always the connection.
fn kind_of(e: &Error) -> StoreErrorKind {
    match e {
        Error::Server(s) if s.code == code::DEADLOCK => StoreErrorKind::Conflict,
        Error::Server(s) if s.code == code::LOCK_WAIT_TIMEOUT || code::UNAVAILABLE.contains(&s.code) => {
            StoreErrorKind::Unavailable
        }
        Error::Server(_) => StoreErrorKind::Other,
        Error::Url(_) => StoreErrorKind::InvalidInput,
        Error::Io(_) | Error::Driver(_) | Error::Other(_) => StoreErrorKind::Unavailable,
    }
}

/// Whether a statement failed because its connection was lost rather than because the
/// server answered with an error: then it may have been applied although no answer came.
pub(crate) fn connection_lost(e: &Error) -> bool {
    match e {
        Error::Server(_) | Error::Url(_) => false,
        // The driver refused before sending anything.
        Error::Driver(DriverError::StmtParamsMismatch { .. } | DriverError::NestedTransaction) => false,
        Error::Io(_) | Error::Driver(_) | Error::Other(_) => true,
    }
}

/// A driver error while doing `what` on `target` (a server name without password). The
/// driver error stays the source, so the server's message is printed once, by it.
///
/// The driver's errors repeat their source in their own text (`Input/output error: …: …`),
/// so only the innermost message becomes the source: every fact printed once.
pub(crate) fn db_error(e: Error, what: &str, target: &str) -> StoreError {
    let kind = kind_of(&e);
    let (context, message) = match &e {
        Error::Server(s) => (
            format!("{what} on {target} (error {}, SQLSTATE {})", s.code, s.state),
            s.message.clone(),
        ),
        _ => (format!("{what} on {target}"), innermost(&e)),
    };
    StoreError::new(kind, context).with_source(message)
}

/// The text of the deepest error in `e`'s source chain.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = e;
    while let Some(next) = deepest.source() {
        deepest = next;
    }
    deepest.to_string()
}

/// No pooled connection within the pool and connect timeouts.
pub(crate) fn no_connection(what: &str, target: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unavailable,
        format!("{what} on {target}: no connection within the pool and connect timeouts"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_async::ServerError;

    fn server(code: u16) -> Error {
        Error::Server(ServerError {
            code,
            message: "m".into(),
            state: "HY000".into(),
        })
    }

    #[test]
    fn kinds_by_code() {
        assert_eq!(kind_of(&server(1213)), StoreErrorKind::Conflict);
        assert_eq!(kind_of(&server(1205)), StoreErrorKind::Unavailable);
        assert_eq!(kind_of(&server(1053)), StoreErrorKind::Unavailable);
        assert_eq!(kind_of(&server(1146)), StoreErrorKind::Other);
        assert!(!connection_lost(&server(1213)));
        let io = Error::Io(mysql_async::IoError::Io(std::io::Error::other("reset")));
        assert_eq!(kind_of(&io), StoreErrorKind::Unavailable);
        assert!(connection_lost(&io));
        let e = db_error(server(1146), "loading", "mysql://u@h/db");
        assert!(e.to_string().contains("error 1146"), "{e}");
        let e = db_error(io, "loading", "mysql://u@h/db");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("reset"), "the innermost message only");
    }
}
