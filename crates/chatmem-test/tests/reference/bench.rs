//! The flat-cost bench harness against the reference store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chatmem::{InMemoryStore, Store};
use chatmem_test::bench::{self, FlatCostConfig, OpCounter};

#[tokio::test(flavor = "multi_thread")]
async fn flat_cost_measures_every_history_and_clears_up() {
    let store = Arc::new(InMemoryStore::new());
    // The reference store counts nothing; a counter read three times per turn stands in.
    let reads = Arc::new(AtomicU64::new(0));
    let probe = reads.clone();
    let config = FlatCostConfig {
        histories: vec![0, 7, 250],
        warmup: 2,
        turns: 10,
        rounds: 3,
        seed_batch: 100,
        counter: Some(OpCounter::new("reads", move || probe.fetch_add(1, Ordering::Relaxed))),
        ..FlatCostConfig::default()
    };
    let report = bench::flat_cost(store.clone(), &config).await.expect("bench");

    assert_eq!(report.rows.iter().map(|r| r.history).collect::<Vec<_>>(), [0, 7, 250]);
    for row in &report.rows {
        assert_eq!(row.turns, 10);
        assert!(row.p50 <= row.p90 && row.p90 <= row.p95 && row.p95 <= row.p99);
        assert!(row.mean > std::time::Duration::ZERO);
        assert_eq!((row.ops_per_load, row.ops_per_commit), (Some(1), Some(1)));
    }
    // Warm-up and measured turns over three histories, three counter reads each.
    assert_eq!(reads.load(Ordering::Relaxed), 3 * 3 * (2 + 10));
    assert!(report.ratio().is_some());
    let page = store.list(None, 10).await.expect("list");
    assert!(
        page.ids.is_empty(),
        "the bench left conversations behind: {:?}",
        page.ids
    );

    let table = report.table("chatmem-memory").to_string();
    assert!(table.starts_with("chatmem-memory: one turn = ChatMemory::begin + Turn::commit_window"));
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(lines.len(), 2 + 3, "header, rule and one line per history:\n{table}");
    assert!(lines[0].contains("reads/load") && lines[0].contains("reads/commit"));
    assert!(lines.iter().all(|l| l.chars().count() == lines[0].chars().count()));
    assert!(table.contains("ratio 250 / 0 messages: mean "));
}

#[tokio::test(flavor = "current_thread")]
async fn flat_cost_rejects_a_window_too_small_for_a_turn() {
    let config = FlatCostConfig {
        window: 1,
        ..FlatCostConfig::default()
    };
    let err = bench::flat_cost(Arc::new(InMemoryStore::new()), &config)
        .await
        .expect_err("a one-message window cannot hold a turn");
    assert!(matches!(err, chatmem::Error::InvalidConfig(_)), "{err}");
}
