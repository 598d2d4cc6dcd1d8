//! The load test's smoke: `chatmem serve` as a process on every store CI has (memory and an
//! SQLite file; PostgreSQL, MySQL, Redis and Redis Cluster in a test that needs their test
//! URLs), loaded for 5 seconds by a few connections at once; no request may fail and every
//! acknowledged message must be in its history exactly once, its turn whole. No speed is
//! asserted: the figures come from the `load` bench.
//!
//! A binary of its own, not a module of `tests/cli`: for 5 seconds it keeps both cores busy
//! with servers and their load, and no request may fail within the server's store timeout and
//! the client's request timeout, so it must not share its process, and so its run, with the
//! other tests' servers and clients.

use std::time::Duration;

use chatmem_loadtest::{LoadConfig, ServerProcess};

/// Loads a server per store, all at once (5 seconds in all); every report must be clean.
async fn smoke(stores: &[String]) {
    let config = LoadConfig {
        duration: Duration::from_secs(5),
        connections: 8,
        conversations: 50,
        read_share: 0.5,
    };
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

#[tokio::test(flavor = "multi_thread")]
async fn load_smoke_loses_nothing_in_memory_and_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    smoke(&[
        "memory:".to_owned(),
        format!("sqlite:{}", dir.path().join("load.db").display()),
    ])
    .await;
}

/// The server stores in one test, so that their runs overlap as the two above do: 5 seconds in
/// all, not 5 a store.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL, CHATMEM_TEST_MYSQL_URL, CHATMEM_TEST_REDIS_URL and CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn load_smoke_loses_nothing_on_every_server_store() {
    smoke(&[
        chatmem_test::required_env("CHATMEM_TEST_PG_URL", "start PostgreSQL"),
        chatmem_test::required_env("CHATMEM_TEST_MYSQL_URL", "start MySQL or MariaDB"),
        chatmem_test::required_env("CHATMEM_TEST_REDIS_URL", "start Redis"),
        chatmem_test::required_env(
            "CHATMEM_TEST_REDIS_CLUSTER_URL",
            "start a Redis Cluster (bash crates/chatmem-redis/tests/cluster/start.sh)",
        ),
    ])
    .await;
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
