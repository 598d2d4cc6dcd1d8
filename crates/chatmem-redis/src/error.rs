//! Turning driver errors into [`StoreError`]s, and URLs into text safe to print.

use chatmem::{StoreError, StoreErrorKind};
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Classifies a driver error: anything that says "the server is not there or not ready"
/// is [`StoreErrorKind::Unavailable`], so callers can retry later.
pub(crate) fn from_redis(e: RedisError, what: &str) -> StoreError {
    let unavailable = e.is_io_error()
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
        || e.code() == Some("BUSY");
    let kind = if unavailable {
        StoreErrorKind::Unavailable
    } else {
        StoreErrorKind::Other
    };
    StoreError::new(kind, format!("redis: {what}")).with_source(e)
}

/// Whether the request failed because the connection was lost or could not be made (so
/// sending it again on a new connection may work), rather than by a timeout or a server
/// reply.
pub(crate) fn connection_lost(e: &RedisError) -> bool {
    (e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_unrecoverable_error())
        && !e.is_timeout()
}

/// The error for an operation that did not finish within the response timeout.
pub(crate) fn timed_out(what: &str, timeout: std::time::Duration) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unavailable,
        format!("redis: {what}: no answer within {timeout:?}"),
    )
}

/// A reply that is not what the scripts return: the keys hold something chatmem did not
/// write.
pub(crate) fn corrupt(context: String) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, context)
}

/// `url` with any password (in the user info or a `pass=` query parameter) replaced by
/// `***`, for error messages and `Debug`.
pub(crate) fn redact_url(url: &str) -> String {
    let url = redact_query(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some(at) = authority.rfind('@') else {
        return url;
    };
    let (userinfo, host) = authority.split_at(at);
    let userinfo = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        // `redis://secret@host` is taken as a password by some clients: hide it too.
        None if userinfo.is_empty() => String::new(),
        None => "***".to_owned(),
    };
    format!("{scheme}://{userinfo}{host}{tail}")
}

/// Hides the value of `pass=` / `password=` query parameters (unix socket URLs).
fn redact_query(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("pass") || name.eq_ignore_ascii_case("password") => {
                format!("{name}=***")
            }
            _ => param.to_owned(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("redis://u:p%40ss@h:1/2"), "redis://u:***@h:1/2");
        assert_eq!(redact_url("redis://:pw@h"), "redis://:***@h");
        assert_eq!(redact_url("redis://pw@h/0"), "redis://***@h/0");
        assert_eq!(
            redact_url("redis+unix:///tmp/r.sock?db=1&pass=x"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        assert_eq!(redact_url("nonsense"), "nonsense");
    }
}
