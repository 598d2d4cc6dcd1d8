//! The load test's smoke: `chatmem serve` as a process on every store CI has (memory, an
//! SQLite file, and PostgreSQL, MySQL, Redis and Redis Cluster when their test URLs are set), loaded
//! for 5 seconds by a few connections at once; no request may fail and every acknowledged
//! message must be in its history exactly once, its turn whole. No speed is asserted: the
//! figures come from the `load` bench.

use std::time::Duration;

use chatmem_loadtest::{LoadConfig, ServerProcess};

#[tokio::test(flavor = "multi_thread")]
async fn load_smoke_loses_nothing_on_every_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut stores = vec![
        "memory:".to_owned(),
        format!("sqlite:{}", dir.path().join("load.db").display()),
    ];
    for var in [
        "CHATMEM_TEST_PG_URL",
        "CHATMEM_TEST_MYSQL_URL",
        "CHATMEM_TEST_REDIS_URL",
        "CHATMEM_TEST_REDIS_CLUSTER_URL",
    ] {
        match std::env::var(var) {
            Ok(url) if !url.trim().is_empty() => stores.push(url),
            _ => eprintln!("skipping that store: {var} not set"),
        }
    }
    let config = LoadConfig {
        duration: Duration::from_secs(5),
        connections: 8,
        conversations: 50,
        read_share: 0.5,
    };
    // The stores run at once, each against its own server: 5 seconds in all.
    let runs = stores.iter().map(|store| {
        let config = config.clone();
        async move {
            let label = chatmem::store::redact_url(store).to_string();
            let server = ServerProcess::spawn(env!("CARGO_BIN_EXE_chatmem").as_ref(), store)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let report = chatmem_loadtest::run(server.base_url(), &label, &config)
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            server.stop().unwrap_or_else(|e| panic!("{label}: {e}"));
            report
        }
    });
    for report in futures_util::future::join_all(runs).await {
        let table = report.table();
        eprintln!("{table}");
        assert_eq!(report.errors(), 0, "{table}");
        assert!(report.verification.is_clean(), "{table}");
        assert!(report.reads.requests > 0 && report.commits.requests > 0, "{table}");
        assert_eq!(
            report.verification.acknowledged_messages,
            2 * (report.commits.requests + config.conversations as u64),
            "every acknowledged turn (and the seeding turn) is in the ledger: {table}"
        );
        assert_eq!(
            report.verification.stored_messages, report.verification.acknowledged_messages,
            "{table}"
        );
        assert_eq!(report.verification.conversations, config.conversations as u64);
    }
}

/// The verification is not a formality: a server that drops evicted messages (a 4-message
/// window, history not kept) is caught losing them.
#[tokio::test(flavor = "multi_thread")]
async fn load_verification_catches_a_server_that_drops_messages() {
    let server = ServerProcess::spawn_with(
        env!("CARGO_BIN_EXE_chatmem").as_ref(),
        &[
            "--store",
            "memory:",
            "--retention",
            "drop-evicted",
            "--max-messages",
            "4",
        ],
    )
    .expect("server");
    let config = LoadConfig {
        duration: Duration::from_secs(1),
        connections: 4,
        conversations: 5,
        read_share: 0.2,
    };
    let report = chatmem_loadtest::run(server.base_url(), "memory: dropping history", &config)
        .await
        .expect("run");
    server.stop().expect("stop");
    let table = report.table();
    assert_eq!(report.errors(), 0, "{table}");
    assert!(report.verification.lost > 0, "{table}");
    assert!(!report.verification.is_clean() && !report.is_clean(), "{table}");
}
