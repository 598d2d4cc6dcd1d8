//! Helpers shared by the tests: the server URL, throwaway schemas, a raw client, and
//! [`Pg`], what the suites shared with MySQL need to know about PostgreSQL.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::ConversationId;
use chatmem::store::{Commit, StoreError};
use chatmem_postgres::PostgresStore;
use chatmem_test::proxy::Protocol;
use chatmem_test::sql_suite::{HeldRow, Settings, SqlDb};
use deadpool_postgres::tokio_postgres::config::Host;
use deadpool_postgres::tokio_postgres::{self, Config, NoTls};

/// `CHATMEM_TEST_PG_URL`, which every test marked `#[ignore = "needs CHATMEM_TEST_PG_URL"]` needs.
pub(crate) fn pg_url() -> String {
    Pg::url()
}

/// A schema name unique to this call.
pub(crate) fn fresh_schema(tag: &str) -> String {
    format!("cmt_{tag}_{:016x}", fastrand::u64(..))
}

/// A store in `schema`.
pub(crate) async fn store_in(url: &str, schema: &str) -> PostgresStore {
    Pg::store_in(url, schema).await
}

/// A plain driver connection, for setting up what the store would never write.
pub(crate) async fn raw_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("raw connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Drops a schema made by [`fresh_schema`].
pub(crate) async fn drop_schema(url: &str, schema: &str) {
    let client = raw_client(url).await;
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("dropping the test schema");
}

/// The TCP address of the server in `url`, when it is reached over TCP.
fn tcp_addr(url: &str) -> Option<SocketAddr> {
    let config = Config::from_str(url).ok()?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(h) => h.clone(),
        Host::Unix(_) => return None,
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let host = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    format!("{host}:{port}").parse().ok()
}

/// `url` pointed at `addr` instead (key=value form, password kept).
fn url_via(url: &str, addr: SocketAddr) -> String {
    let config = Config::from_str(url).expect("CHATMEM_TEST_PG_URL parses");
    let mut out = format!("host={} port={}", addr.ip(), addr.port());
    if let Some(user) = config.get_user() {
        out.push_str(&format!(" user='{}'", user.replace('\'', "\\'")));
    }
    if let Some(password) = config.get_password() {
        out.push_str(&format!(
            " password='{}'",
            String::from_utf8_lossy(password).replace('\'', "\\'")
        ));
    }
    if let Some(db) = config.get_dbname() {
        out.push_str(&format!(" dbname='{}'", db.replace('\'', "\\'")));
    }
    out
}

/// PostgreSQL for the shared suites: a namespace is a schema.
pub(crate) struct Pg;

#[async_trait]
impl SqlDb for Pg {
    type Store = PostgresStore;

    const URL_VAR: &'static str = "CHATMEM_TEST_PG_URL";
    const HOW: &'static str = "start PostgreSQL";
    const PROTOCOL: Protocol = Protocol::Postgres;
    const SHARED_NAMESPACE: &'static str = "chatmem_test_shared";
    const DEFAULT_NAMESPACE: &'static str = "public";
    const CONNECT_TIMEOUTS: u32 = 1;
    const PREPARES_PER_CONNECTION: bool = false;
    const RESEND_STATEMENTS: (u64, &'static str) = (3, "the first send, the resend, and its second look");
    const RECENT_BY_ID_FIRST: bool = false;

    fn fresh_namespace(tag: &str) -> String {
        fresh_schema(tag)
    }

    async fn connect(url: &str, settings: Settings<'_>) -> Result<PostgresStore, StoreError> {
        let mut builder = PostgresStore::builder(url);
        if let Some(schema) = settings.namespace {
            builder = builder.schema(schema);
        }
        if let Some(size) = settings.pool_size {
            builder = builder.pool_size(size);
        }
        if let Some(timeout) = settings.timeout {
            builder = builder.timeout(timeout);
        }
        builder.connect().await
    }

    async fn connect_default(url: &str) -> (PostgresStore, String) {
        let store = PostgresStore::connect(url).await.expect("connect");
        let schema = store.schema().to_owned();
        (store, schema)
    }

    async fn drop_namespace(url: &str, namespace: &str) {
        drop_schema(url, namespace).await;
    }

    fn unreachable_url() -> &'static str {
        "postgres://postgres:hunter2@127.0.0.1:1/test"
    }

    fn url_at(addr: SocketAddr) -> String {
        format!("postgres://postgres@{addr}/test")
    }

    fn tcp_addr(url: &str) -> SocketAddr {
        tcp_addr(url).expect("CHATMEM_TEST_PG_URL is not a TCP address; the loopback proxy needs one")
    }

    fn url_via(url: &str, addr: SocketAddr) -> String {
        url_via(url, addr)
    }

    async fn hold_row(url: &str, schema: &str, id: &ConversationId, next: &Commit) -> Box<dyn HeldRow> {
        let raw = raw_client(url).await;
        let (conv, msgs) = (
            format!("\"{schema}\".chatmem_conversations"),
            format!("\"{schema}\".chatmem_messages"),
        );
        raw.batch_execute("BEGIN").await.expect("begin");
        let token = i64::from_ne_bytes(next.token().to_ne_bytes());
        raw.execute(
            &format!("UPDATE {conv} SET version = 2, next_seq = 5, commit_token = $2 WHERE id = $1"),
            &[&id.as_str(), &token],
        )
        .await
        .expect("hold the row");
        for m in next.appended() {
            let (seq, json) = (m.seq as i64, m.message_json().expect("json"));
            raw.execute(
                &format!("INSERT INTO {msgs} (conversation_id, seq, tokens, json) VALUES ($1, $2, 2, $3)"),
                &[&id.as_str(), &seq, &json],
            )
            .await
            .expect("insert");
        }
        Box::new(HeldTransaction(raw))
    }

    /// Half a timeout on: the first send has been cancelled by the server at its statement
    /// timeout, and the resend has taken its snapshot and waits for the row. Its version
    /// check then fails against a row version its snapshot does not show; it must look once
    /// more and find its own token.
    fn resend_lands_after(timeout: Duration) -> Duration {
        timeout / 2
    }
}

/// The transaction [`Pg::hold_row`] opened.
struct HeldTransaction(tokio_postgres::Client);

#[async_trait]
impl HeldRow for HeldTransaction {
    async fn land(self: Box<Self>) {
        self.0.batch_execute("COMMIT").await.expect("land the first send");
    }
}
