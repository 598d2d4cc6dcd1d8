//! Outages without touching the machine's Redis: refused and silent ports, a loopback
//! proxy that goes down and comes back or cuts a connection mid-commit (a conversation's or a
//! user's facts'), and a killed client connection.
//!
//! A test binary of its own: the tests bound how long calls take, and the tests of
//! `tests/redis/main.rs` running beside them (conformance runs, sixteen-process stress)
//! would stretch those times past the bounds.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chatmem::facts::{FactLimits, add};
use chatmem::store::{Commit, FactsCommit, StoreErrorKind, StoredFacts, StoredMessage};
use chatmem::{ConversationId, Message, Retention, Store, UserId};
use chatmem_redis::RedisStore;
use common::{cleanup, raw, unique_prefix, url};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

const TIMEOUT: Duration = Duration::from_millis(700);

/// `url` with its host and port replaced by `addr` and, if given, its user info by `auth`.
fn retarget(url: &str, addr: SocketAddr, auth: Option<&str>) -> String {
    let (scheme, rest) = url.split_once("://").expect("a redis:// URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let userinfo = match (auth, authority.rsplit_once('@')) {
        (Some(auth), _) => format!("{auth}@"),
        (None, Some((user, _))) => format!("{user}@"),
        (None, None) => String::new(),
    };
    format!("{scheme}://{userinfo}{addr}{tail}")
}

/// The test server's TCP address, or `None` for a unix socket.
fn upstream(url: &str) -> Option<SocketAddr> {
    let client = redis::Client::open(url).ok()?;
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            let host = if host == "localhost" {
                "127.0.0.1"
            } else {
                host.as_str()
            };
            format!("{host}:{port}").parse().ok()
        }
        _ => None,
    }
}

fn turn(seq: u64) -> Vec<StoredMessage> {
    vec![
        StoredMessage::new(seq, 2, Message::user(format!("u{seq}"))),
        StoredMessage::new(seq + 1, 2, Message::assistant(format!("a{seq}"))),
    ]
}

fn commit(expected: u64, seq: u64) -> Commit {
    chatmem_test::commit(expected, turn(seq), 1, Retention::KeepHistory)
}

async fn connect_with_timeout(url: &str) -> (Result<RedisStore, chatmem::store::StoreError>, Duration) {
    let started = Instant::now();
    let result = RedisStore::builder(url).timeout(TIMEOUT).connect().await;
    (result, started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_port_is_unavailable_and_hides_the_password() {
    let (result, took) = connect_with_timeout("redis://someone:hunter2@127.0.0.1:1/0").await;
    let e = result.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(took < TIMEOUT + Duration::from_millis(500), "took {took:?}");
    let text = format!("{e} {e:?}");
    assert!(!text.contains("hunter2"), "password leaked: {text}");
    assert!(text.contains("someone:***@127.0.0.1:1"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_port_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (result, took) = connect_with_timeout(&format!("redis://{addr}")).await;
    assert_eq!(result.unwrap_err().kind(), StoreErrorKind::Unavailable);
    assert!(took < TIMEOUT + Duration::from_millis(500), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_server_times_out() {
    // Accepts connections (the kernel does, from the backlog) but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (result, took) = connect_with_timeout(&format!("redis://{addr}")).await;
    assert_eq!(result.unwrap_err().kind(), StoreErrorKind::Unavailable);
    assert!(
        took >= TIMEOUT && took < TIMEOUT + Duration::from_millis(500),
        "took {took:?}"
    );
    drop(listener);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_url_is_invalid_input() {
    let e = RedisStore::connect("http://nope").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
}

/// A loopback TCP proxy in front of the test Redis that can go down, come back, cut a
/// connection right after forwarding a request (before the reply gets back), and hold back
/// the replies of a connection for a while after forwarding a request (then deliver them
/// all, in order, as a slow network would).
#[derive(Clone)]
struct Proxy {
    addr: SocketAddr,
    down: Arc<AtomicBool>,
    cut_next_request: Arc<AtomicBool>,
    hold_next_reply: Arc<Mutex<Option<Duration>>>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Proxy {
            addr: listener.local_addr().unwrap(),
            down: Arc::new(AtomicBool::new(false)),
            cut_next_request: Arc::new(AtomicBool::new(false)),
            hold_next_reply: Arc::new(Mutex::new(None)),
            connections: Arc::new(Mutex::new(Vec::new())),
        };
        let p = proxy.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if p.down.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let handle = tokio::spawn(p.clone().pipe(client, server));
                p.connections.lock().unwrap().push(handle.abort_handle());
            }
        });
        proxy
    }

    async fn pipe(self, client: TcpStream, server: TcpStream) {
        let (mut client_rx, mut client_tx) = client.into_split();
        let (mut server_rx, mut server_tx) = server.into_split();
        let muted = Arc::new(AtomicBool::new(false));
        let muted2 = muted.clone();
        // Replies read from Redis before this instant wait for it (then go out in order).
        let held_until: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let held_until2 = held_until.clone();
        let replies = async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match server_rx.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let until = *held_until2.lock().unwrap();
                if let Some(until) = until {
                    tokio::time::sleep_until(until.into()).await;
                }
                if muted2.load(Ordering::SeqCst) || client_tx.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        };
        let requests = async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match client_rx.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let cut = self.cut_next_request.swap(false, Ordering::SeqCst);
                if cut {
                    muted.store(true, Ordering::SeqCst);
                }
                // Set before the request goes out, so that its reply cannot slip through.
                if let Some(hold) = self.hold_next_reply.lock().unwrap().take() {
                    *held_until.lock().unwrap() = Some(Instant::now() + hold);
                }
                if server_tx.write_all(&buf[..n]).await.is_err() {
                    return;
                }
                if cut {
                    // Let Redis run the request, then drop both sides without the reply.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return;
                }
            }
        };
        // Whichever direction ends first ends the connection (both sockets drop).
        tokio::select! {
            () = replies => {}
            () = requests => {}
        }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            for c in self.connections.lock().unwrap().drain(..) {
                c.abort();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn outage_through_a_proxy_then_recovery() {
    let url = url();
    let Some(upstream) = upstream(&url) else {
        panic!("the proxy test needs a TCP Redis URL");
    };
    let proxy = Proxy::start(upstream).await;
    let prefix = unique_prefix("outage");
    let store = RedisStore::builder(&retarget(&url, proxy.addr, None))
        .key_prefix(&prefix)
        .timeout(TIMEOUT)
        .connect()
        .await
        .unwrap();
    let id = ConversationId::new("outage").unwrap();
    assert_eq!(store.commit(&id, commit(0, 1)).await.unwrap(), 1);

    proxy.set_down(true);
    for _ in 0..3 {
        let started = Instant::now();
        let e = store.load(&id).await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
        assert!(
            started.elapsed() < TIMEOUT + Duration::from_millis(500),
            "took {:?}",
            started.elapsed()
        );
    }
    let e = store.commit(&id, commit(1, 3)).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable);

    proxy.set_down(false);
    // The connection is re-established by the next call.
    assert_eq!(store.load(&id).await.unwrap().version, 1);
    assert_eq!(store.commit(&id, commit(1, 3)).await.unwrap(), 2);

    // The connection dies after Redis ran the commit but before the reply arrived: the
    // store resends it on a new connection, and the commit token makes the resend
    // answer with the version the first send produced instead of a conflict.
    proxy.cut_next_request.store(true, Ordering::SeqCst);
    assert_eq!(store.commit(&id, commit(2, 5)).await.unwrap(), 3);
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.version, 3);
    assert_eq!(
        snap.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    cleanup(&url, &prefix).await;
}

/// The proxy for a timeout test and a store behind it, or `None` (having said why) when
/// the test server is not a TCP Redis.
async fn proxied_store(url: &str, what: &str) -> (Proxy, RedisStore, String) {
    let Some(upstream) = upstream(url) else {
        panic!("the {what} test needs a TCP Redis URL");
    };
    let proxy = Proxy::start(upstream).await;
    let prefix = unique_prefix(what);
    let store = RedisStore::builder(&retarget(url, proxy.addr, None))
        .key_prefix(&prefix)
        .timeout(TIMEOUT)
        .connect()
        .await
        .unwrap();
    (proxy, store, prefix)
}

/// The seqs of the messages stored for `id`, read past the proxy.
async fn stored_seqs(url: &str, prefix: &str, id: &ConversationId) -> Vec<u64> {
    let direct = common::store(url, prefix).await;
    let history = direct.history(id, 0, 1000).await.unwrap();
    history.iter().map(|m| m.seq).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_commit_whose_reply_times_out_is_sent_once_more() {
    let url = url();
    let (proxy, store, prefix) = proxied_store(&url, "commit-timeout").await;
    let id = ConversationId::new("slow").unwrap();
    assert_eq!(store.commit(&id, commit(0, 1)).await.unwrap(), 1);

    // Redis runs the commit at once, but its reply arrives only after the response
    // timeout: the store sends the same commit once more, whose answer (the version the
    // first send produced, recognised by the commit token) comes in its second window.
    *proxy.hold_next_reply.lock().unwrap() = Some(TIMEOUT + Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(store.commit(&id, commit(1, 3)).await.unwrap(), 2);
    let took = started.elapsed();
    assert!(took >= TIMEOUT, "the first reply was held back, yet it took {took:?}");
    assert_eq!(
        stored_seqs(&url, &prefix, &id).await,
        [1, 2, 3, 4],
        "stored exactly once"
    );
    assert_eq!(store.load(&id).await.unwrap().version, 2);

    // Held past both windows: the commit fails as Unavailable, saying that its outcome is
    // unknown, within two response timeouts. Here it did land, once.
    *proxy.hold_next_reply.lock().unwrap() = Some(TIMEOUT * 3);
    let started = Instant::now();
    let e = store.commit(&id, commit(2, 5)).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains("outcome is unknown"), "{e}");
    assert!(
        took >= TIMEOUT * 2 && took < TIMEOUT * 2 + Duration::from_millis(500),
        "took {took:?}"
    );
    assert_eq!(stored_seqs(&url, &prefix, &id).await, [1, 2, 3, 4, 5, 6]);
    // Once the held replies are through, the connection is usable again.
    tokio::time::sleep(TIMEOUT * 3 - took + Duration::from_millis(200)).await;
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.version, 3);
    assert_eq!(snap.messages.len(), 6);
    cleanup(&url, &prefix).await;
}

/// `text` added by hand to `loaded`, as a facts commit.
fn adding_fact(loaded: &StoredFacts, text: &str) -> FactsCommit {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1_000).expect("add");
    FactsCommit::new(loaded, added).expect("valid").expect("a change")
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_facts_commit_whose_reply_is_lost_is_applied_once() {
    let url = url();
    let (proxy, store, prefix) = proxied_store(&url, "facts-lost").await;
    let user = UserId::new("facts-lost").unwrap();
    let mut loaded = StoredFacts::default();
    // Creating the user, then changing its facts: each time Redis runs the script but its
    // reply is lost, once by a cut connection (resent on a new one), once held past the
    // response timeout (sent once more); the token makes the resend answer with the version
    // the first send made.
    for (text, version) in [("Prefers email", 1), ("Works nights", 2), ("Has a cat", 3)] {
        let held = version == 3;
        if held {
            *proxy.hold_next_reply.lock().unwrap() = Some(TIMEOUT + Duration::from_millis(300));
        } else {
            proxy.cut_next_request.store(true, Ordering::SeqCst);
        }
        let started = Instant::now();
        let v = store
            .commit_facts(&user, adding_fact(&loaded, text))
            .await
            .unwrap_or_else(|e| panic!("a facts commit that landed is reported as failed: {e}"));
        assert_eq!(v, version, "{text}");
        if held {
            assert!(started.elapsed() >= TIMEOUT, "the reply was held back");
        } else {
            assert!(
                !proxy.cut_next_request.load(Ordering::SeqCst),
                "the proxy cut the connection"
            );
        }
        loaded = store.load_facts(&user).await.expect("load");
        assert_eq!(loaded.version, version);
    }
    let texts: Vec<&str> = loaded.set.facts().iter().map(|f| f.text.as_str()).collect();
    assert_eq!(texts, ["Prefers email", "Works nights", "Has a cat"]);
    for fact in 1..=3 {
        let history = store.fact_history(&user, fact).await.expect("history");
        assert_eq!(history.len(), 1, "fact {fact}'s history written once");
    }
    // Past both windows: the outcome is unknown, and here it did land, once.
    *proxy.hold_next_reply.lock().unwrap() = Some(TIMEOUT * 3);
    let started = Instant::now();
    let e = store
        .commit_facts(&user, adding_fact(&loaded, "Likes tea"))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains("outcome is unknown"), "{e}");
    tokio::time::sleep(TIMEOUT * 3 - took + Duration::from_millis(200)).await;
    let now = store.load_facts(&user).await.expect("load");
    assert_eq!((now.version, now.set.len()), (4, 4));
    assert_eq!(store.fact_history(&user, 4).await.expect("history").len(), 1);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_read_whose_reply_times_out_fails_after_one_timeout() {
    let url = url();
    let (proxy, store, prefix) = proxied_store(&url, "read-timeout").await;
    let id = ConversationId::new("slow").unwrap();
    assert_eq!(store.commit(&id, commit(0, 1)).await.unwrap(), 1);

    *proxy.hold_next_reply.lock().unwrap() = Some(TIMEOUT + Duration::from_millis(300));
    let started = Instant::now();
    let e = store.load(&id).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(!e.to_string().contains("unknown"), "{e}");
    assert!(
        took >= TIMEOUT && took < TIMEOUT + Duration::from_millis(500),
        "a read is not sent again: took {took:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(store.load(&id).await.unwrap().version, 1);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn killed_connection_next_call_works() {
    let url = url();
    let Some(upstream) = upstream(&url) else {
        panic!("the client-kill test needs a TCP Redis URL");
    };
    // A throwaway ACL user lets the test kill exactly this store's connection.
    let user = format!("chatmem-test-{:08x}", fastrand::u32(..));
    let mut admin = raw(&url).await;
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .exec_async(&mut admin)
        .await
        .unwrap();
    let prefix = unique_prefix("kill");
    let store = RedisStore::builder(&retarget(&url, upstream, Some(&format!("{user}:pw"))))
        .key_prefix(&prefix)
        .timeout(TIMEOUT)
        .connect()
        .await
        .unwrap();
    let id = ConversationId::new("kill").unwrap();
    assert_eq!(store.commit(&id, commit(0, 1)).await.unwrap(), 1);
    for round in 0..2 {
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("USER")
            .arg(&user)
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(killed >= 1, "the store's connection was not found");
        if round == 0 {
            assert_eq!(store.load(&id).await.unwrap().version, 1, "load after the kill");
        } else {
            assert_eq!(
                store.commit(&id, commit(1, 3)).await.unwrap(),
                2,
                "commit after the kill"
            );
        }
    }
    assert_eq!(store.history(&id, 0, 10).await.unwrap().len(), 4);
    redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .exec_async(&mut admin)
        .await
        .unwrap();
    cleanup(&url, &prefix).await;
}
