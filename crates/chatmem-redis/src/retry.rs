//! Running one request: bounded by the response timeout, resent once when the connection
//! was lost; a commit is also resent once after a timeout, so that its outcome is known.

use std::future::Future;
use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind};
use redis::{RedisError, RedisResult};

use crate::conn::Conn;
use crate::error::{self, DriverError, from_redis, timed_out};
use crate::store::RedisStore;

/// How one response-timeout window of a request ended without a result.
enum Failure {
    /// No answer in time: the driver's response timeout (its error kept) or ours.
    TimedOut(Option<RedisError>),
    /// Any other driver error: an error reply, or a connection lost twice or refused.
    Driver(RedisError),
}

impl RedisStore {
    /// Runs one request under the response timeout; `what` names it in errors. A request
    /// that failed because the connection was lost (killed, server restarted) is sent once
    /// more, on the fresh connection the manager opens: requests sent through here are
    /// idempotent (reads, index updates). Commits go through [`run_commit`](Self::run_commit).
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, send: F) -> Result<T, StoreError>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match self.window(&send).await {
            Ok(v) => Ok(v),
            Err(Failure::TimedOut(Some(e)) | Failure::Driver(e)) => Err(from_redis(e, what)),
            Err(Failure::TimedOut(None)) => Err(timed_out(what, self.response_timeout)),
        }
    }

    /// [`run`](Self::run) for a commit, which may have been applied even though its reply
    /// never came: after a response timeout it is sent once more, within a second window of
    /// the same length. The commit carries its token, so a resend of a commit that did land
    /// answers with the version it produced instead of applying it twice. Only when that
    /// window fails too is the result `Unavailable`, saying that the outcome is unknown.
    pub(crate) async fn run_commit<T, F, Fut>(&self, what: &str, send: F) -> Result<T, StoreError>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match self.window(&send).await {
            Ok(v) => return Ok(v),
            Err(Failure::Driver(e)) => return Err(from_redis(e, what)),
            Err(Failure::TimedOut(_)) => {
                tracing::debug!(timeout = ?self.response_timeout, "redis commit timed out; sending it once more");
            }
        }
        let failed = match self.window(&send).await {
            Ok(v) => return Ok(v),
            Err(Failure::TimedOut(e)) => e,
            // Redis answered the resend with an error reply: the outcome is that reply.
            Err(Failure::Driver(e)) if !error::unavailable(&e) => return Err(from_redis(e, what)),
            Err(Failure::Driver(e)) => Some(e),
        };
        Err(outcome_unknown(what, self.response_timeout, failed))
    }

    /// One response-timeout window of a request: sent, and sent once more if the connection
    /// was lost.
    async fn window<T, F, Fut>(&self, send: &F) -> Result<T, Failure>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let attempts = async {
            match send(self.conn.clone()).await {
                Err(e) if error::connection_lost(&e) => {
                    tracing::debug!(error = %e, "redis connection lost; sending once more on a new connection");
                    send(self.conn.clone()).await
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.response_timeout, attempts).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.is_timeout() => Err(Failure::TimedOut(Some(e))),
            Ok(Err(e)) => Err(Failure::Driver(e)),
            Err(_) => Err(Failure::TimedOut(None)),
        }
    }
}

/// The error for a commit that was sent twice without an answer: it may or may not have
/// been applied. `source` is the driver's last error, if there was one.
fn outcome_unknown(what: &str, timeout: Duration, source: Option<RedisError>) -> StoreError {
    let e = StoreError::new(
        StoreErrorKind::Unavailable,
        format!(
            "redis: {what}: no usable answer within {timeout:?}, and none to the same commit sent once more; \
             the outcome is unknown (the commit may or may not have been applied)"
        ),
    );
    match source {
        Some(source) => e.with_source(DriverError(source)),
        None => e,
    }
}
