//! The connection: one multiplexed connection to a single Redis, or a Cluster connection
//! that routes each command to the node owning its key's slot. Both implement
//! [`ConnectionLike`], so the store sends the same commands and scripts through either.

use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::{DriverError, from_redis, timed_out};

/// The URL scheme that selects Redis Cluster.
pub(crate) const CLUSTER_SCHEME: &str = "redis+cluster://";

/// A connection to a single Redis or to a Cluster. Cheap to clone: clones share the
/// underlying connections.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects to `url`; `shown`, its redacted form, is what messages print.
    pub(crate) async fn open(
        url: &str,
        shown: &str,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let what = format!("connecting to {shown}");
        // The driver's error says what is wrong with the URL; the context only names it.
        let invalid = |e: redis::RedisError| {
            StoreError::new(StoreErrorKind::InvalidInput, format!("redis URL {shown}")).with_source(DriverError(e))
        };
        let connecting = async {
            if url.starts_with(CLUSTER_SCHEME) {
                let nodes = cluster_nodes(url).ok_or_else(|| {
                    StoreError::new(
                        StoreErrorKind::InvalidInput,
                        format!("invalid redis cluster URL {shown}: expected redis+cluster://[user:password@]host:port[,host:port...]"),
                    )
                })?;
                let client = ClusterClient::builder(nodes)
                    .connection_timeout(connect_timeout)
                    .response_timeout(response_timeout)
                    .build()
                    .map_err(invalid)?;
                let conn = client.get_async_connection().await.map_err(|e| from_redis(e, &what))?;
                Ok(Conn::Cluster(conn))
            } else {
                let client = redis::Client::open(url).map_err(invalid)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(Some(response_timeout))
                    // Few, quick reconnection attempts: every operation is bounded by the
                    // response timeout anyway, and the next operation after a failure tries
                    // again.
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_secs(1));
                let conn = ConnectionManager::new_with_config(client, config)
                    .await
                    .map_err(|e| from_redis(e, &what))?;
                Ok(Conn::Single(conn))
            }
        };
        match tokio::time::timeout(connect_timeout, connecting).await {
            Ok(result) => result,
            Err(_) => Err(timed_out(&what, connect_timeout)),
        }
    }

    /// Whether this is a Cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The node URLs of `redis+cluster://[user[:password]@]host:port[,host:port...]`: each
/// node gets the same credentials. `None` when the URL has no node, an empty node, or a
/// path, query or fragment (a Cluster has only database 0).
pub(crate) fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let rest = url.strip_prefix(CLUSTER_SCHEME)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#']) {
        return None;
    }
    let (userinfo, hosts) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let nodes: Vec<String> = hosts
        .split(',')
        .map(|host| (!host.trim().is_empty()).then(|| format!("redis://{userinfo}{}", host.trim())))
        .collect::<Option<_>>()?;
    (!nodes.is_empty()).then_some(nodes)
}

#[cfg(test)]
mod tests {
    use super::cluster_nodes;

    #[test]
    fn cluster_urls() {
        assert_eq!(
            cluster_nodes("redis+cluster://127.0.0.1:7000,127.0.0.1:7001").unwrap(),
            ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]
        );
        assert_eq!(
            cluster_nodes("redis+cluster://u:p@h1:1, h2:2/").unwrap(),
            ["redis://u:p@h1:1", "redis://u:p@h2:2"]
        );
        assert_eq!(cluster_nodes("redis+cluster://h:1/0"), None);
        assert_eq!(cluster_nodes("redis+cluster://h:1,,h:2"), None);
        assert_eq!(cluster_nodes("redis+cluster://"), None);
        assert_eq!(cluster_nodes("redis://h:1"), None);
    }
}
