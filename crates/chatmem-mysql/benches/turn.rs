//! Per-turn latency of `ChatMemory` over `MysqlStore` at growing history sizes: the shared
//! flat-cost bench of [`chatmem_test::bench`]. A turn reads only the window and writes only
//! the new messages, so the latency should not grow with the history.
//!
//! `CHATMEM_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test cargo bench -p chatmem-mysql --bench turn`
//! (`CHATMEM_BENCH_TURNS` sets the measured turns per history, default 300). Works in
//! throwaway tables that it drops at the end.

use std::sync::Arc;

use chatmem_mysql::MysqlStore;
use chatmem_test::bench;
use mysql_async::prelude::Queryable;

fn main() {
    let Some(url) = bench::service_url("CHATMEM_TEST_MYSQL_URL", "start MySQL or MariaDB") else {
        return;
    };
    bench::block_on(run(&url));
}

async fn run(url: &str) {
    let prefix = format!("cmbench_{:012x}", fastrand::u64(..) >> 16);
    let store = MysqlStore::builder(url)
        .prefix(&prefix)
        .pool_size(2)
        .connect()
        .await
        .expect("connect");
    bench::sql_server_flat_cost(Arc::new(store), "chatmem-mysql").await;

    let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(url).expect("url"))
        .await
        .expect("connect to drop the tables");
    // The index tables reference the conversations, so they go first.
    let index =
        ["index_terms", "index_docs", "index_df", "index_keys"].map(|t| format!("DROP TABLE IF EXISTS `{prefix}_{t}`"));
    let procedure = format!("DROP PROCEDURE IF EXISTS `{prefix}_commit_v3`");
    let shared = chatmem_test::sql_suite::mysql_drop_statements(&prefix);
    for sql in index.into_iter().chain([procedure]).chain(shared) {
        conn.query_drop(sql).await.expect("dropping the bench tables");
    }
}
