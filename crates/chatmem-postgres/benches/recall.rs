//! What recall costs a turn on `PostgresStore`, at 1,000 and 100,000 indexed messages in one
//! conversation: the shared recall bench of [`chatmem_test::recall_bench`] (search p50/p95,
//! a turn's commit with and without its index entries, a whole turn with recall).
//!
//! `CHATMEM_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p chatmem-postgres --bench recall`
//! (`CHATMEM_BENCH_TURNS` sets the samples per size, default 300). Works in a throwaway
//! schema that it drops at the end.

use std::sync::Arc;

use chatmem_postgres::PostgresStore;
use chatmem_test::bench;
use chatmem_test::recall_bench::{self, RecallBenchConfig};
use deadpool_postgres::tokio_postgres::{self, NoTls};

fn main() {
    let Some(url) = bench::service_url("CHATMEM_TEST_PG_URL", "start PostgreSQL") else {
        return;
    };
    bench::block_on(run(&url));
}

async fn run(url: &str) {
    let schema = format!("cmbench_{:016x}", fastrand::u64(..));
    let store = PostgresStore::builder(url)
        .schema(&schema)
        .pool_size(2)
        .connect()
        .await
        .expect("connect");
    let report = recall_bench::run(Arc::new(store), &RecallBenchConfig::default().samples_from_env())
        .await
        .expect("bench");
    print!("{}", report.table("chatmem-postgres"));

    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to drop the schema");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("dropping the bench schema");
}
