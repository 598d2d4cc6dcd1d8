//! Round trips per operation, counted on the wire by the loopback [`Proxy`], which parses
//! the client's protocol messages (see [`Protocol`](crate::proxy::Protocol)).

use std::sync::Arc;

use chatmem::store::{Commit, RecentQuery, StoredMessage};
use chatmem::{ChatMemory, Heuristic, Message, Retention, Store, Summary, WindowPolicy};

use super::{Settings, SqlDb};
use crate::proxy::Proxy;
use crate::{commit, commit_full};

fn batch(first: u64, n: u64) -> Vec<StoredMessage> {
    (first..first + n)
        .map(|seq| {
            let m = if seq % 2 == 1 {
                Message::user(format!("u{seq}"))
            } else {
                Message::assistant(format!("a{seq}"))
            };
            StoredMessage::new(seq, 4, m)
        })
        .collect()
}

/// Every store operation, and a whole turn's load and commit, is one round trip.
pub async fn load_and_commit_are_one_round_trip_each<D: SqlDb>() {
    let url = D::url();
    let upstream = D::tcp_addr(&url);
    let namespace = D::fresh_namespace("rtt");
    D::store_in(&url, &namespace).await; // migrate outside the count
    let proxy = Proxy::start(upstream, D::PROTOCOL).await;
    let store = D::connect(
        &D::url_via(&url, proxy.addr),
        Settings::namespace(&namespace).pool_size(1),
    )
    .await
    .expect("connect through the proxy");
    let id = crate::unique_id("rtt");

    if D::PREPARES_PER_CONNECTION {
        // Each statement is prepared once per connection, at its first use there: one more
        // round trip then, which the warm-up takes (on the pool's one connection).
        let warm = crate::unique_id("rtt-warm");
        store.load(&warm).await.expect("warm load");
        let _ = store
            .commit(&warm, commit(1, batch(1, 1), 1, Retention::KeepHistory))
            .await;
        store.history(&warm, 0, 1).await.expect("warm history");
        store.list(None, 1).await.expect("warm list");
        store.recent(&RecentQuery::new("", None, 1)).await.expect("warm recent");
        store.clear(&warm).await.expect("warm clear");
        store.purge_expired().await.expect("warm purge");
    }

    // Counts the round trips of one awaited operation.
    macro_rules! trips {
        ($op:expr) => {{
            let before = proxy.round_trips();
            let out = $op.await.expect(stringify!($op));
            (proxy.round_trips() - before, out)
        }};
    }

    let (n, snap) = trips!(store.load(&id));
    assert_eq!(n, 1, "load of an unknown conversation");
    assert!(!snap.exists());
    let create = commit_full(
        0,
        1,
        Some(StoredMessage::new(1, 5, Message::system("rules"))),
        batch(1, 2_000),
        1_981,
        Retention::KeepHistory,
        None,
    );
    let (n, v) = trips!(store.commit(&id, create));
    assert_eq!((n, v), (1, 1), "commit creating a conversation with 2,000 messages");
    let (n, snap) = trips!(store.load(&id));
    assert_eq!(n, 1, "load with 2,000 messages of history");
    assert_eq!(snap.messages.len(), 20);
    let update = commit_full(
        1,
        2_001,
        None,
        batch(2_001, 2),
        1_983,
        Retention::DropEvicted,
        Some(std::time::Duration::from_secs(3600)),
    );
    let (n, v) = trips!(store.commit(&id, update));
    assert_eq!((n, v), (1, 2), "commit appending a turn and dropping evicted messages");
    let stale = commit(1, batch(2_003, 2), 1_983, Retention::KeepHistory);
    let before = proxy.round_trips();
    let err = store.commit(&id, stale).await.expect_err("stale version");
    assert!(err.is_conflict());
    assert_eq!(proxy.round_trips() - before, 1, "a lost version check");
    let (n, page) = trips!(store.history(&id, 0, 100));
    assert_eq!((n, page.len()), (1, 20));
    let (n, _) = trips!(store.list(None, 10));
    assert_eq!(n, 1, "list");
    let (first, then) = if D::RECENT_BY_ID_FIRST {
        (RecentQuery::new(id.as_str(), None, 10), "")
    } else {
        (RecentQuery::new("", None, 1), id.as_str())
    };
    let (n, page) = trips!(store.recent(&first));
    assert_eq!((n, page.conversations.len()), (1, 1), "recent");
    let (n, _) = trips!(store.recent(&RecentQuery::new(
        then,
        page.conversations.first().map(|c| c.cursor()).as_ref(),
        10
    )));
    assert_eq!(n, 1, "recent from a cursor");
    let (n, _) = trips!(store.purge_expired());
    assert_eq!(n, 1, "purge_expired");

    // A whole turn through ChatMemory: load, then commit user + assistant.
    let memory = ChatMemory::builder(Arc::new(store.clone()))
        .policy(WindowPolicy::messages(20))
        .retention(Retention::KeepHistory)
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings");
    let (load_trips, mut turn) = trips!(memory.begin(&id));
    turn.extend([Message::user("q"), Message::assistant("a")]);
    let (commit_trips, _) = trips!(turn.commit());
    assert_eq!(
        (load_trips, commit_trips),
        (1, 1),
        "ChatMemory turn: load = 1, commit = 1"
    );
    eprintln!("round trips: load = {load_trips}, commit = {commit_trips}");

    // A commit that stores a summary and deletes below a bound, and the load that reads
    // the summary back: still one each.
    let (_, snap) = trips!(store.load(&id));
    let summary = Summary::new("earlier turns", snap.window_start - 1, &Heuristic);
    let with_summary = Commit::on(&snap)
        .keep_unsummarized()
        .summary(summary.clone(), snap.summary.as_ref().map_or(0, |s| s.upto))
        .append(Message::user("q2"), 2)
        .retention(Retention::DropEvicted)
        .build()
        .expect("a valid commit");
    let (n, _) = trips!(store.commit(&id, with_summary));
    assert_eq!(n, 1, "commit with a summary");
    let (n, snap) = trips!(store.load(&id));
    assert_eq!((n, snap.summary), (1, Some(summary)), "load with a summary");

    let (n, existed) = trips!(store.clear(&id));
    assert_eq!((n, existed), (1, true), "clear");
    D::drop_namespace(&url, &namespace).await;
}
