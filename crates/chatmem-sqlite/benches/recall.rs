//! What recall costs a turn on the SQLite store, at 1,000 and 100,000 indexed messages in
//! one conversation: the shared recall bench of `chatmem_test::recall_bench` (search p50 and
//! p95, a turn's commit with recall and without, a whole turn with recall).
//!
//! Run with `cargo bench -p chatmem-sqlite --bench recall` (`CHATMEM_BENCH_TURNS=50` for a
//! quick run).

use std::sync::Arc;

use chatmem_sqlite::SqliteStore;
use chatmem_test::recall_bench::{self, RecallBenchConfig};

fn main() {
    chatmem_test::bench::block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("recall.db");
        let store = Arc::new(SqliteStore::open(&path).await.expect("opening the bench database"));
        let report = recall_bench::run(store, &RecallBenchConfig::default().samples_from_env())
            .await
            .expect("bench");
        print!("{}", report.table("chatmem-sqlite"));
        let file_mb = std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / 1e6);
        println!("database file at the end {file_mb:.1} MB + WAL");
    });
}
