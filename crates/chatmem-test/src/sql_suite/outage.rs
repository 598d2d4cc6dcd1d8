//! Outages: nothing listening, a server that never answers, a server that goes away and
//! comes back, a commit whose reply is lost (simulated by the loopback
//! [`Proxy`]; the real server is never touched).

use std::time::{Duration, Instant};

use chatmem::store::{Commit, Snapshot, StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Heuristic, Message, Retention, Store, Summary};

use super::{Settings, SqlDb};
use crate::proxy::{Mode, Proxy, ReplyLoss};

const TIMEOUT: Duration = Duration::from_millis(800);
/// Slack for scheduling on a busy two-core machine.
const SLACK: Duration = Duration::from_millis(1500);

fn turn(first: u64) -> Vec<StoredMessage> {
    vec![
        StoredMessage::new(first, 2, Message::user("q")),
        StoredMessage::new(first + 1, 2, Message::assistant("a")),
    ]
}

fn commit(expected: u64, first: u64) -> Commit {
    crate::commit(expected, turn(first), 1, Retention::KeepHistory)
}

/// The longest a failed connect may take.
fn connect_bound<D: SqlDb>() -> Duration {
    D::CONNECT_TIMEOUTS * TIMEOUT + SLACK
}

/// A store in a fresh namespace reached through a new proxy.
async fn proxied<D: SqlDb>(tag: &str, pool_size: usize, timeout: Duration) -> (String, String, Proxy, D::Store) {
    let url = D::url();
    let upstream = D::tcp_addr(&url);
    let namespace = D::fresh_namespace(tag);
    let proxy = Proxy::start(upstream, D::PROTOCOL).await;
    let settings = Settings::namespace(&namespace).pool_size(pool_size).timeout(timeout);
    let store = D::connect(&D::url_via(&url, proxy.addr), settings)
        .await
        .expect("connect through the proxy");
    (url, namespace, proxy, store)
}

/// Connecting where nothing listens is unavailable, fast, and names the address but not
/// the password.
pub async fn nothing_listening_is_unavailable_without_the_password<D: SqlDb>() {
    let _timed = super::timed().await;
    let start = Instant::now();
    let err = D::connect(D::unreachable_url(), Settings::default().timeout(TIMEOUT))
        .await
        .expect_err("port 1 has no server");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(start.elapsed() < connect_bound::<D>(), "took {:?}", start.elapsed());
    let text = format!("{err} {err:?}");
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(text.contains("127.0.0.1:1"), "{text}");
}

/// A server that accepts connections and never says a word: connecting times out as
/// unavailable.
pub async fn a_silent_server_times_out_as_unavailable<D: SqlDb>() {
    let _timed = super::timed().await;
    let server = crate::silent::listen().await;
    let start = Instant::now();
    let err = D::connect(&D::url_at(server.addr), Settings::default().timeout(TIMEOUT))
        .await
        .expect_err("a silent server");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    let took = start.elapsed();
    // The connect timeout, not two of them back to back (a pool wait and then a connect).
    let bound = D::CONNECT_TIMEOUTS * TIMEOUT + TIMEOUT / 2;
    assert!(
        took >= TIMEOUT / 2 && took < bound,
        "took {took:?}, more than {bound:?}"
    );
}

/// Operations fail fast while the server is down or stalled, and work again after.
pub async fn operations_fail_fast_during_an_outage_and_recover_after<D: SqlDb>() {
    let _timed = super::timed().await;
    let (url, namespace, proxy, store) = proxied::<D>("outage", 2, TIMEOUT).await;
    let id = crate::unique_id("outage");
    assert_eq!(store.commit(&id, commit(0, 1)).await.expect("commit"), 1);

    // The server goes away: open connections are cut, new ones refused.
    proxy.set(Mode::Down);
    for _ in 0..3 {
        let start = Instant::now();
        let err = store.load(&id).await.expect_err("down");
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
        assert!(start.elapsed() < connect_bound::<D>(), "took {:?}", start.elapsed());
        let err = store.commit(&id, commit(1, 3)).await.expect_err("down");
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    }
    proxy.set(Mode::Up);
    let snap = recover(&store, &id).await;
    assert_eq!(snap.version, 1, "nothing was written during the outage");

    // The server stops answering mid-connection: the call times out, and so does the one
    // resend of the commit (its new connection gets no answer within the connect timeout).
    // First the load's connection must be idle in the pool: MySQL's pool takes a returned
    // connection back in a background task, and a commit that comes before it opens a new
    // connection, which the stall leaves unopened (an error whose outcome is known: nothing
    // was sent, not the case under test).
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Mode::Stalled);
    let start = Instant::now();
    let err = store.commit(&id, commit(1, 3)).await.expect_err("stalled");
    let took = start.elapsed();
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("unknown"), "the outcome is unknown: {err}");
    assert!(took >= TIMEOUT / 2 && took < 2 * TIMEOUT + SLACK, "took {took:?}");
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
    assert_eq!(texts(&store, &id).await, expected_texts(2));
    assert_eq!(store.commit(&id, commit(2, 5)).await.expect("commit after recovery"), 3);
    D::drop_namespace(&url, &namespace).await;
}

/// Loads until the store answers again (a pooled connection cut during the outage may
/// fail once more), within a few seconds.
async fn recover<S: Store>(store: &S, id: &ConversationId) -> Snapshot {
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

/// The stored (seq, text) pairs of a conversation, oldest first.
async fn texts<S: Store>(store: &S, id: &ConversationId) -> Vec<(u64, String)> {
    store
        .history(id, 0, 100)
        .await
        .expect("history")
        .iter()
        .map(|m| (m.seq, m.message.text().unwrap_or_default().into_owned()))
        .collect()
}

fn expected_texts(turns: u64) -> Vec<(u64, String)> {
    (1..=turns * 2)
        .map(|seq| (seq, if seq % 2 == 1 { "q" } else { "a" }.to_owned()))
        .collect()
}

/// A commit the server applied but whose reply the client never saw is resent once and
/// recognised as applied: stored once, whether the connection closed or went silent.
pub async fn a_commit_whose_reply_is_lost_is_applied_once<D: SqlDb>() {
    let _timed = super::timed().await;
    // One pooled connection, idle after the migration: the commits below run on it.
    let (url, namespace, proxy, store) = proxied::<D>("lost_reply", 1, TIMEOUT).await;
    let id = crate::unique_id("lost-reply");
    if D::PREPARES_PER_CONNECTION {
        // Prepare the commit on the pooled connection, so that the lost reply is the execute's.
        let _ = store.commit(&crate::unique_id("warm"), commit(1, 1)).await;
    }

    // The server commits, then the connection closes before the reply reaches the client:
    // first when the commit creates the conversation, then when it updates it.
    for (expected, first) in [(0, 1), (1, 3)] {
        proxy.lose_next_reply(ReplyLoss::Close);
        let before = proxy.statements();
        let version = store
            .commit(&id, commit(expected, first))
            .await
            .unwrap_or_else(|e| panic!("a commit that landed is reported as failed: {e}"));
        assert!(proxy.reply_lost(), "the proxy did not see the reply");
        assert_eq!(proxy.statements() - before, 2, "sent, then resent once");
        assert_eq!(version, expected + 1);
        assert_eq!(texts(&store, &id).await, expected_texts(version), "stored once");
    }

    // The reply never comes: the client times out, then resends.
    proxy.lose_next_reply(ReplyLoss::Silence);
    let start = Instant::now();
    let version = store
        .commit(&id, commit(2, 5))
        .await
        .unwrap_or_else(|e| panic!("a commit that landed is reported as failed: {e}"));
    let took = start.elapsed();
    assert!(proxy.reply_lost(), "the proxy did not see the reply");
    assert_eq!(version, 3);
    assert!(took >= TIMEOUT / 2 && took < 2 * TIMEOUT + SLACK, "took {took:?}");
    assert_eq!(texts(&store, &id).await, expected_texts(3), "stored once");

    // The store goes on as usual, and a stale commit still conflicts.
    assert_eq!(store.commit(&id, commit(3, 7)).await.expect("next commit"), 4);
    let err = store.commit(&id, commit(3, 7)).await.expect_err("stale");
    assert!(err.is_conflict(), "{err}");
    assert_eq!(texts(&store, &id).await, expected_texts(4));

    // A commit carrying a summary and a delete bound below its window start, its reply
    // lost: recognised as applied, with its summary, the uncovered messages 5-6 kept.
    let snap = store.load(&id).await.expect("load");
    let summary = Summary::new("q, a, q, a", 4, &Heuristic);
    let with_summary = turn(9)
        .into_iter()
        .fold(
            Commit::on(&snap)
                .keep_unsummarized()
                .summary(summary.clone(), snap.summary.as_ref().map_or(0, |s| s.upto)),
            |b, m| b.append(m.message, m.tokens),
        )
        .window_start(7)
        .retention(Retention::DropEvicted)
        .build()
        .expect("a valid commit");
    assert_eq!(with_summary.delete_below(), Some(5));
    proxy.lose_next_reply(ReplyLoss::Close);
    let version = store
        .commit(&id, with_summary)
        .await
        .unwrap_or_else(|e| panic!("a commit that landed is reported as failed: {e}"));
    assert!(proxy.reply_lost(), "the proxy did not see the reply");
    assert_eq!(version, 5);
    let snap = store.load(&id).await.expect("load");
    assert_eq!((snap.version, snap.summary), (5, Some(summary)));
    let kept: Vec<u64> = store
        .history(&id, 0, 100)
        .await
        .expect("history")
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(kept, [5, 6, 7, 8, 9, 10]);
    D::drop_namespace(&url, &namespace).await;
}

/// The first send of a commit can still be running on the server when the client gives up
/// on its answer (here: waiting for a row lock), and land while the resend waits for the
/// same row. The resend must find its own token and report the commit applied, not a
/// conflict.
pub async fn a_resend_that_waited_for_the_row_finds_the_first_send_landed<D: SqlDb>() {
    let _timed = super::timed().await;
    const LONG: Duration = Duration::from_secs(2);
    let (url, namespace, proxy, store) = proxied::<D>("resend_wait", 1, LONG).await;
    let id = crate::unique_id("resend-wait");
    assert_eq!(store.commit(&id, commit(0, 1)).await.expect("create"), 1);
    let next = commit(1, 3);

    // Stands for the first send still running: a transaction that holds the row and writes
    // exactly what `next` writes, its token included, and commits only when told.
    let held = D::hold_row(&url, &namespace, &id, &next).await;

    // The first send's own answer (the server giving up on the lock) is lost too, so that
    // the client, not the server, gives up on it.
    proxy.lose_next_reply(ReplyLoss::Silence);
    let before = proxy.statements();
    let committing = {
        let (store, id, next) = (store.clone(), id.clone(), next.clone());
        tokio::spawn(async move { store.commit(&id, next).await })
    };
    // The first send waits for the row until the timeout; then the resend goes out.
    let deadline = Instant::now() + 2 * LONG + SLACK;
    while proxy.statements() < before + 2 {
        assert!(Instant::now() < deadline, "the commit was never resent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The resend now waits for the row; the first send lands.
    tokio::time::sleep(D::resend_lands_after(LONG)).await;
    held.land().await;

    let version = committing
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("the landed commit is reported as failed: {e}"));
    assert_eq!(version, 2);
    let (statements, what) = D::RESEND_STATEMENTS;
    assert_eq!(proxy.statements() - before, statements, "{what}");
    assert_eq!(texts(&store, &id).await, expected_texts(2), "stored once");
    D::drop_namespace(&url, &namespace).await;
}
