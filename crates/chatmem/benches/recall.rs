//! What recall costs a turn on the in-memory store, at 1,000 and 100,000 indexed messages:
//! the shared recall bench of `chatmem_test::recall_bench`.
//!
//! Run with `cargo bench -p chatmem --bench recall` (`CHATMEM_BENCH_TURNS=50` for a quick run).

use std::sync::Arc;

use chatmem_test::recall_bench::{self, RecallBenchConfig};

fn main() {
    chatmem_test::bench::block_on(async {
        let store = Arc::new(chatmem::InMemoryStore::new());
        let report = recall_bench::run(store, &RecallBenchConfig::default().samples_from_env())
            .await
            .expect("bench");
        print!("{}", report.table("chatmem (in memory)"));
    });
}
