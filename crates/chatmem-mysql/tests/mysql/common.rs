//! Helpers shared by the tests: the server URL, throwaway table prefixes, a raw
//! connection, and [`Mysql`], what the suites shared with PostgreSQL need to know about
//! MySQL.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::ConversationId;
use chatmem::store::{Commit, StoreError};
use chatmem_mysql::MysqlStore;
use chatmem_test::proxy::Protocol;
use chatmem_test::sql_suite::{HeldRow, Settings, SqlDb};
use mysql_async::prelude::Queryable;

/// `CHATMEM_TEST_MYSQL_URL`, which every test marked `#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]` needs.
pub(crate) fn mysql_url() -> String {
    Mysql::url()
}

/// A table prefix unique to this call.
pub(crate) fn fresh_prefix(tag: &str) -> String {
    format!("cmt_{tag}_{:012x}", fastrand::u64(..) >> 16)
}

/// A store with tables `prefix_…`.
pub(crate) async fn store_in(url: &str, prefix: &str) -> MysqlStore {
    Mysql::store_in(url, prefix).await
}

/// A plain driver connection, for setting up what the store would never write.
pub(crate) async fn raw_conn(url: &str) -> mysql_async::Conn {
    mysql_async::Conn::new(mysql_async::Opts::from_url(url).expect("url"))
        .await
        .expect("raw connect")
}

/// Drops the tables and procedures of a prefix made by [`fresh_prefix`].
pub(crate) async fn drop_prefix(url: &str, prefix: &str) {
    let mut conn = raw_conn(url).await;
    for sql in chatmem_test::sql_suite::mysql_drop_statements(prefix) {
        conn.query_drop(sql).await.expect("dropping the test tables");
    }
    let _ = conn.disconnect().await;
}

/// The TCP address of the server in `url`.
fn tcp_addr(url: &str) -> SocketAddr {
    let opts = mysql_async::Opts::from_url(url).expect("CHATMEM_TEST_MYSQL_URL parses");
    let host = match opts.ip_or_hostname() {
        "localhost" => "127.0.0.1",
        h => h,
    };
    format!("{host}:{}", opts.tcp_port())
        .parse()
        .expect("CHATMEM_TEST_MYSQL_URL is not a TCP address; the loopback proxy needs one")
}

/// `url` pointed at `addr` instead (user, password and database kept).
fn url_via(url: &str, addr: SocketAddr) -> String {
    let opts = mysql_async::Opts::from_url(url).expect("CHATMEM_TEST_MYSQL_URL parses");
    let user = opts.user().unwrap_or("root");
    let password = opts.pass().map(|p| format!(":{p}")).unwrap_or_default();
    format!("mysql://{user}{password}@{addr}/{}", opts.db_name().unwrap_or("test"))
}

/// MySQL (or MariaDB) for the shared suites: a namespace is a table prefix.
pub(crate) struct Mysql;

#[async_trait]
impl SqlDb for Mysql {
    type Store = MysqlStore;

    const URL_VAR: &'static str = "CHATMEM_TEST_MYSQL_URL";
    const HOW: &'static str = "start MySQL or MariaDB";
    const PROTOCOL: Protocol = Protocol::Mysql;
    const SHARED_NAMESPACE: &'static str = "chatmem_test_shared";
    const DEFAULT_NAMESPACE: &'static str = "chatmem";
    const CONNECT_TIMEOUTS: u32 = 1;
    const PREPARES_PER_CONNECTION: bool = true;
    const RESEND_STATEMENTS: (u64, &'static str) = (2, "the first send and the resend");
    const RECENT_BY_ID_FIRST: bool = true;

    fn fresh_namespace(tag: &str) -> String {
        fresh_prefix(tag)
    }

    async fn connect(url: &str, settings: Settings<'_>) -> Result<MysqlStore, StoreError> {
        let mut builder = MysqlStore::builder(url);
        if let Some(prefix) = settings.namespace {
            builder = builder.prefix(prefix);
        }
        if let Some(size) = settings.pool_size {
            builder = builder.pool_size(size);
        }
        if let Some(timeout) = settings.timeout {
            builder = builder.timeout(timeout);
        }
        builder.connect().await
    }

    async fn connect_default(url: &str) -> (MysqlStore, String) {
        let store = MysqlStore::connect(url).await.expect("connect");
        let prefix = store.prefix().to_owned();
        (store, prefix)
    }

    async fn drop_namespace(url: &str, namespace: &str) {
        drop_prefix(url, namespace).await;
    }

    fn unreachable_url() -> &'static str {
        "mysql://root:hunter2@127.0.0.1:1/test"
    }

    fn url_at(addr: SocketAddr) -> String {
        format!("mysql://root@{addr}/test")
    }

    fn tcp_addr(url: &str) -> SocketAddr {
        tcp_addr(url)
    }

    fn url_via(url: &str, addr: SocketAddr) -> String {
        url_via(url, addr)
    }

    async fn hold_row(url: &str, prefix: &str, id: &ConversationId, next: &Commit) -> Box<dyn HeldRow> {
        let mut raw = raw_conn(url).await;
        raw.query_drop("START TRANSACTION").await.expect("begin");
        raw.exec_drop(
            format!("UPDATE `{prefix}_conversations` SET version = 2, next_seq = 5, commit_token = ? WHERE id = ?"),
            (next.token(), id.as_str().as_bytes()),
        )
        .await
        .expect("hold the row");
        for m in next.appended() {
            raw.exec_drop(
                format!("INSERT INTO `{prefix}_messages` (conversation_id, seq, tokens, json) VALUES (?, ?, 2, ?)"),
                (id.as_str().as_bytes(), m.seq, m.message_json().expect("json")),
            )
            .await
            .expect("insert");
        }
        Box::new(HeldTransaction(raw))
    }

    /// The resend's locking read sees the newest committed row, so it finds its own token
    /// and reports the commit applied, not a conflict.
    fn resend_lands_after(timeout: Duration) -> Duration {
        timeout / 4
    }
}

/// The transaction [`Mysql::hold_row`] opened.
struct HeldTransaction(mysql_async::Conn);

#[async_trait]
impl HeldRow for HeldTransaction {
    async fn land(self: Box<Self>) {
        let mut conn = self.0;
        conn.query_drop("COMMIT").await.expect("land the first send");
        let _ = conn.disconnect().await;
    }
}
