//! Running one request: bounded by the response timeout, resent once when the connection
//! was lost.

use std::future::Future;

use chatmem::StoreError;
use redis::RedisResult;

use crate::conn::Conn;
use crate::error::{self, from_redis, timed_out};
use crate::store::RedisStore;

impl RedisStore {
    /// Runs one request under the response timeout; `what` names it in errors. A request
    /// that failed because the connection was lost (killed, server restarted) is sent once
    /// more, on the fresh connection the manager opens: reads are idempotent, and a commit
    /// carries a token that makes its replay answer with the version it already produced.
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, send: F) -> Result<T, StoreError>
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
            Ok(Err(e)) => Err(from_redis(e, what)),
            Err(_) => Err(timed_out(what, self.response_timeout)),
        }
    }
}
