//! Per-turn latency of `ChatMemory` over `PostgresStore` at growing history sizes: the
//! shared flat-cost bench of [`chatmem_test::bench`]. A turn reads only the window and
//! writes only the new messages, so the latency should not grow with the history.
//!
//! `CHATMEM_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p chatmem-postgres --bench turn`
//! (`CHATMEM_BENCH_TURNS` sets the measured turns per history, default 300). Works in a
//! throwaway schema that it drops at the end.

use std::sync::Arc;

use chatmem_postgres::PostgresStore;
use chatmem_test::bench;
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
    bench::sql_server_flat_cost(Arc::new(store), "chatmem-postgres").await;

    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to drop the schema");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("dropping the bench schema");
}
