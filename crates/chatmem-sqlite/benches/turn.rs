//! Per-turn latency of the SQLite store at growing history sizes, all in one file: the
//! shared flat-cost bench of [`chatmem_test::bench`], plus the SQL statements per load and
//! per commit (counted by SQLite's trace hook) and the size of the database file.
//!
//! Run with `cargo bench -p chatmem-sqlite --bench turn` (`CHATMEM_BENCH_TURNS=50` for a
//! quick run; default 500 turns per history).

use std::sync::Arc;

use chatmem_sqlite::SqliteStore;
use chatmem_test::bench::{self, FlatCostConfig, OpCounter};

fn main() {
    bench::block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bench.db");
        let store = SqliteStore::open(&path).await.expect("opening the bench database");
        let statements = store.clone();
        let config = FlatCostConfig {
            warmup: 50,
            turns: 500,
            counter: Some(OpCounter::new("stmts", move || statements.statements_executed())),
            ..FlatCostConfig::default()
        }
        .turns_from_env();
        let report = bench::flat_cost(Arc::new(store), &config).await.expect("bench");
        print!("{}", report.table("chatmem-sqlite"));
        // Clearing the histories does not shrink the file: SQLite keeps the freed pages.
        let file_mb = std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / 1e6);
        println!("database file at the end {file_mb:.1} MB + WAL");
    });
}
