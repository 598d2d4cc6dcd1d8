//! Outages: nothing listening, a server that never answers, a server that goes away and
//! comes back (simulated by a loopback proxy; the real server is never touched).

mod common;

use std::time::{Duration, Instant};

use chatmem::{Message, Retention, Store, StoreErrorKind, StoredMessage};
use chatmem_postgres::PostgresStore;
use common::Mode;

const TIMEOUT: Duration = Duration::from_millis(800);
/// Slack for scheduling on a busy two-core machine.
const SLACK: Duration = Duration::from_millis(1500);

#[tokio::test(flavor = "multi_thread")]
async fn nothing_listening_is_unavailable_without_the_password() {
    let start = Instant::now();
    let err = PostgresStore::builder("postgres://postgres:hunter2@127.0.0.1:1/test")
        .timeout(TIMEOUT)
        .connect()
        .await
        .expect_err("port 1 has no server");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(start.elapsed() < TIMEOUT + SLACK, "took {:?}", start.elapsed());
    let text = format!("{err} {err:?}");
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(text.contains("127.0.0.1:1"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_server_times_out_as_unavailable() {
    // Accepts connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let start = Instant::now();
    let err = PostgresStore::builder(&format!("postgres://postgres@{addr}/test"))
        .timeout(TIMEOUT)
        .connect()
        .await
        .expect_err("a silent server");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    let took = start.elapsed();
    assert!(took >= TIMEOUT / 2 && took < TIMEOUT + SLACK, "took {took:?}");
    holder.abort();
}

fn turn(first: u64) -> Vec<StoredMessage> {
    vec![
        StoredMessage::new(first, 2, Message::user("q")),
        StoredMessage::new(first + 1, 2, Message::assistant("a")),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn operations_fail_fast_during_an_outage_and_recover_after() {
    let Some(url) = common::pg_url() else { return };
    let Some(upstream) = common::tcp_addr(&url) else {
        {
            // Written to stderr directly: libtest captures eprintln! output of passing tests.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipping: CHATMEM_TEST_PG_URL is not a TCP address; the outage proxy needs one"
            );
        }
        return;
    };
    let schema = common::fresh_schema("outage");
    let proxy = common::Proxy::start(upstream).await;
    let store = PostgresStore::builder(&common::url_via(&url, proxy.addr))
        .schema(&schema)
        .pool_size(2)
        .timeout(TIMEOUT)
        .connect()
        .await
        .expect("connect through the proxy");
    let id = chatmem_test::unique_id("outage");
    let commit = |expected, first| chatmem_test::commit(expected, turn(first), 1, Retention::KeepHistory);
    assert_eq!(store.commit(&id, commit(0, 1)).await.expect("commit"), 1);

    // The server goes away: open connections are cut, new ones refused.
    proxy.set(Mode::Down);
    for _ in 0..3 {
        let start = Instant::now();
        let err = store.load(&id).await.expect_err("down");
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
        assert!(start.elapsed() < TIMEOUT + SLACK, "took {:?}", start.elapsed());
        let err = store.commit(&id, commit(1, 3)).await.expect_err("down");
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    }
    proxy.set(Mode::Up);
    let snap = recover(&store, &id).await;
    assert_eq!(snap.version, 1, "nothing was written during the outage");

    // The server stops answering mid-connection: the call times out.
    proxy.set(Mode::Stalled);
    let start = Instant::now();
    let err = store.commit(&id, commit(1, 3)).await.expect_err("stalled");
    let took = start.elapsed();
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(took >= TIMEOUT / 2 && took < TIMEOUT + SLACK, "took {took:?}");
    // Cut the stalled connections before resuming, so the bytes the proxy held are not
    // delivered late (behind the next load's back).
    proxy.set(Mode::Down);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set(Mode::Up);
    let snap = recover(&store, &id).await;
    // A timed-out commit has an unknown outcome: the proxy may still deliver the bytes it
    // held once it resumes. Either way it applied whole or not at all.
    match snap.version {
        1 => assert_eq!(store.commit(&id, commit(1, 3)).await.expect("commit after recovery"), 2),
        2 => {}
        v => panic!("unexpected version {v}"),
    }
    let texts: Vec<_> = store
        .history(&id, 0, 10)
        .await
        .expect("history")
        .iter()
        .map(|m| (m.seq, m.message.text().unwrap_or_default().into_owned()))
        .collect();
    let expected: Vec<_> = [(1, "q"), (2, "a"), (3, "q"), (4, "a")]
        .iter()
        .map(|&(s, t)| (s, t.to_owned()))
        .collect();
    assert_eq!(texts, expected);
    assert_eq!(store.commit(&id, commit(2, 5)).await.expect("commit after recovery"), 3);
    common::drop_schema(&url, &schema).await;
}

/// Loads until the store answers again (a pooled connection cut during the outage may
/// fail once more), within a few seconds.
async fn recover(store: &PostgresStore, id: &chatmem::ConversationId) -> chatmem::Snapshot {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match store.load(id).await {
            Ok(snap) => return snap,
            Err(e) if e.kind() == StoreErrorKind::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the store did not recover: {e}"),
        }
    }
}
