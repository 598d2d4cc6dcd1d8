//! Turning driver errors into [`StoreError`]s whose printed chain says each fact once.

use std::fmt;

use chatmem::store::{StoreError, StoreErrorKind};
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Classifies a driver error: anything that says "the server is not there or not ready"
/// is [`StoreErrorKind::Unavailable`], so callers can retry later. `what` says what was
/// being done; the driver's text is the source, never repeated in the context.
pub(crate) fn from_redis(e: RedisError, what: &str) -> StoreError {
    let kind = if unavailable(&e) {
        StoreErrorKind::Unavailable
    } else {
        StoreErrorKind::Other
    };
    StoreError::new(kind, format!("redis: {what}")).with_source(DriverError(e))
}

/// Whether `e` says that the server is not there or not ready (rather than that it answered
/// with an error).
pub(crate) fn unavailable(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.kind() == ErrorKind::ClusterConnectionNotFound
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
            )
        )
        || e.code() == Some("BUSY")
}

/// A driver error as the source of a [`StoreError`].
///
/// A `RedisError` that wraps a cause (an I/O error, a server or parse error) prints that
/// cause's text as its own *and* returns the cause as its source, so a printed chain would
/// say "Connection refused" twice. This prints the driver's text and skips the cause when
/// it only repeats it (its own sources still follow).
pub(crate) struct DriverError(pub(crate) RedisError);

impl DriverError {
    /// The driver's cause, unless its text is exactly the driver's own.
    fn cause(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let cause = std::error::Error::source(&self.0)?;
        if cause.to_string() == self.0.to_string() {
            cause.source()
        } else {
            Some(cause)
        }
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause()
    }
}

/// Whether the request failed because the connection was lost or could not be made (so
/// sending it again on a new connection may work), rather than by a timeout or a server
/// reply.
pub(crate) fn connection_lost(e: &RedisError) -> bool {
    (e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_unrecoverable_error())
        && !e.is_timeout()
}

/// The error for an operation that did not finish within `timeout`.
pub(crate) fn timed_out(what: &str, timeout: std::time::Duration) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unavailable,
        format!("redis: {what}: no answer within {timeout:?}"),
    )
}

/// A reply or key that is not what chatmem writes, outside any one conversation (the id
/// index, the schema key). Unreadable data of a conversation is [`StoreError::corrupt`].
pub(crate) fn corrupt(context: impl Into<String>) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, context)
}

/// A setting or request this store refuses.
pub(crate) fn invalid(context: impl Into<String>) -> StoreError {
    StoreError::new(StoreErrorKind::InvalidInput, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layer of `e`'s chain, outermost first.
    fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut cause = e.source();
        while let Some(c) = cause {
            out.push(c.to_string());
            cause = c.source();
        }
        out
    }

    #[test]
    fn the_driver_cause_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused by test");
        let e = from_redis(RedisError::from(io), "connecting to redis://h:1");
        assert_eq!(e.kind(), StoreErrorKind::Unavailable);
        let layers = chain(&e);
        assert_eq!(
            layers.iter().filter(|l| l.contains("refused by test")).count(),
            1,
            "{layers:?}"
        );

        // A driver error without a cause keeps its own text.
        let e = from_redis(
            RedisError::from((ErrorKind::InvalidClientConfig, "Missing hostname")),
            "opening",
        );
        assert_eq!(
            chain(&e),
            ["store error: redis: opening", "Missing hostname - InvalidClientConfig"]
        );
    }
}
