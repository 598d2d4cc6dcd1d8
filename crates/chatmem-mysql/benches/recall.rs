//! What recall costs a turn on `MysqlStore`, at 1,000 and 100,000 indexed messages: the shared
//! recall bench of [`chatmem_test::recall_bench`] (search p50/p95 and its growth, a turn's
//! commit with and without its index entries, a whole turn with recall).
//!
//! `CHATMEM_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test cargo bench -p chatmem-mysql --bench recall`
//! (`CHATMEM_BENCH_TURNS` sets the samples per size, default 300). Works in throwaway tables
//! that it drops at the end.

use std::sync::Arc;

use chatmem_mysql::MysqlStore;
use chatmem_test::bench;
use chatmem_test::recall_bench::{self, RecallBenchConfig};
use mysql_async::prelude::Queryable;

fn main() {
    let Some(url) = bench::service_url("CHATMEM_TEST_MYSQL_URL", "start MySQL or MariaDB") else {
        return;
    };
    bench::block_on(run(&url));
}

async fn run(url: &str) {
    let prefix = format!("cmbench_recall_{:012x}", fastrand::u64(..) >> 16);
    let store = MysqlStore::builder(url)
        .prefix(&prefix)
        .pool_size(2)
        // Seeding commits 5,000 indexed messages at a time; clearing 100,000 takes a while.
        .statement_timeout(std::time::Duration::from_secs(120))
        .connect()
        .await
        .expect("connect");
    let report = recall_bench::run(Arc::new(store), &RecallBenchConfig::default().samples_from_env())
        .await
        .expect("bench");
    print!("{}", report.table("chatmem-mysql"));

    let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(url).expect("url"))
        .await
        .expect("connect to drop the tables");
    for sql in chatmem_test::sql_suite::mysql_drop_statements(&prefix) {
        conn.query_drop(sql).await.expect("dropping the bench tables");
    }
}
