//! RedisStore against a real Redis Cluster (`CHATMEM_TEST_REDIS_CLUSTER_URL`, e.g.
//! `redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002`; `tests/cluster/start.sh`
//! starts such a cluster locally): the shared conformance suite, the key placement, 64
//! tasks and 16 processes at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::{cluster_url, hex, meta_key, store, unique_prefix};
use chatmem::store::StoredMessage;
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_redis::RedisStore;
use chatmem_test::commit_full;
use redis::aio::MultiplexedConnection;

/// `host:port` of each seed node in the cluster URL.
fn seed_nodes(url: &str) -> Vec<String> {
    let hosts = url.strip_prefix("redis+cluster://").expect("a redis+cluster:// URL");
    let hosts = hosts.rsplit_once('@').map_or(hosts, |(_, h)| h);
    hosts
        .trim_end_matches('/')
        .split(',')
        .map(|h| h.trim().to_owned())
        .collect()
}

/// A plain connection to one node (`host:port`).
pub(crate) async fn node(addr: &str) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{addr}"))
        .expect("valid node address")
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("connecting to cluster node {addr}: {e}"))
}

/// Every primary of the cluster as `host:port` -> its slot ranges.
pub(crate) async fn primaries(url: &str) -> BTreeMap<String, Vec<(u16, u16)>> {
    let mut conn = node(&seed_nodes(url)[0]).await;
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut conn).await.unwrap();
    let mut out: BTreeMap<String, Vec<(u16, u16)>> = BTreeMap::new();
    for range in slots {
        let redis::Value::Array(items) = range else {
            panic!("bad CLUSTER SLOTS reply")
        };
        let start: u16 = redis::from_redis_value(items[0].clone()).unwrap();
        let end: u16 = redis::from_redis_value(items[1].clone()).unwrap();
        let redis::Value::Array(primary) = &items[2] else {
            panic!("bad CLUSTER SLOTS reply")
        };
        let host: String = redis::from_redis_value(primary[0].clone()).unwrap();
        let port: u16 = redis::from_redis_value(primary[1].clone()).unwrap();
        out.entry(format!("{host}:{port}")).or_default().push((start, end));
    }
    out
}

/// Deletes every key under `prefix` on every primary (test clean-up only: SCAN).
pub(crate) async fn cleanup(url: &str, prefix: &str) {
    for addr in primaries(url).await.into_keys() {
        common::delete_keys(&mut node(&addr).await, prefix).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_conformance() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-conformance");
    let store = store(&url, &prefix).await;
    chatmem_test::run_conformance(Arc::new(store)).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn one_conversation_one_slot_many_conversations_many_nodes() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-slots");
    let store = store(&url, &prefix).await;
    let nodes = primaries(&url).await;
    assert!(nodes.len() >= 2, "the test cluster needs several primaries: {nodes:?}");
    let owner = |slot: u16| {
        nodes
            .iter()
            .find(|(_, ranges)| ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|(addr, _)| addr.clone())
            .expect("every slot is served")
    };
    let any = node(&seed_nodes(&url)[0]).await;
    let mut used = BTreeSet::new();
    let ids: Vec<ConversationId> = (0..24)
        .map(|i| ConversationId::new(format!("slot-{i}-{{x}}:*%'\"")).unwrap())
        .collect();
    for id in &ids {
        let commit = commit_full(
            0,
            1,
            None,
            vec![StoredMessage::new(1, 3, Message::user("hi"))],
            1,
            Retention::KeepHistory,
            Some(Duration::from_secs(600)),
        );
        assert_eq!(store.commit(id, commit).await.unwrap(), 1);
        let tag = hex(id.as_str());
        let meta = format!("{prefix}:{{{tag}}}:meta");
        let msgs = format!("{prefix}:{{{tag}}}:msgs");
        let slot = |key: String| {
            let mut any = any.clone();
            async move {
                redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(key)
                    .query_async::<u16>(&mut any)
                    .await
                    .unwrap()
            }
        };
        let (meta_slot, msgs_slot) = (slot(meta.clone()).await, slot(msgs.clone()).await);
        assert_eq!(meta_slot, msgs_slot, "{id:?}: both keys in one slot");
        let addr = owner(meta_slot);
        // The keys really are on that node (a plain connection, no redirection).
        let mut on_node = node(&addr).await;
        let exists: u64 = redis::cmd("EXISTS")
            .arg(&meta)
            .arg(&msgs)
            .query_async(&mut on_node)
            .await
            .unwrap();
        assert_eq!(exists, 2, "{id:?}: both keys stored on {addr}");
        used.insert(addr);
    }
    assert!(
        used.len() >= 2,
        "24 conversations should spread over several primaries, all went to {used:?}"
    );
    // The index lists them all (it lives in its own slot), in byte order.
    let page = store.list(None, 100).await.unwrap();
    let mut want: Vec<ConversationId> = ids.clone();
    want.sort_by(|a, b| a.as_str().as_bytes().cmp(b.as_str().as_bytes()));
    assert_eq!(page.ids, want);
    for id in &ids {
        let snap = store.load(id).await.unwrap();
        assert_eq!((snap.version, snap.messages.len()), (1, 1));
        assert!(store.clear(id).await.unwrap());
    }
    assert!(store.list(None, 100).await.unwrap().ids.is_empty());
    cleanup(&url, &prefix).await;
}

/// A Cluster connection for poking at keys directly (it follows redirections).
pub(crate) async fn raw_cluster(url: &str) -> redis::cluster_async::ClusterConnection {
    let nodes: Vec<String> = seed_nodes(url).iter().map(|n| format!("redis://{n}")).collect();
    redis::cluster::ClusterClient::new(nodes)
        .expect("valid node addresses")
        .get_async_connection()
        .await
        .expect("raw connection to the test Redis Cluster")
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_index_is_kept_without_cross_slot_scripts() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-index");
    let store = store(&url, &prefix).await;
    let raw = raw_cluster(&url).await;
    let index = format!("{prefix}:ids");
    let score = |id: &'static str| {
        let mut raw = raw.clone();
        let index = index.clone();
        async move {
            redis::cmd("ZSCORE")
                .arg(index)
                .arg(id)
                .query_async::<Option<f64>>(&mut raw)
                .await
                .unwrap()
        }
    };
    let first = |ttl: Option<Duration>| {
        commit_full(
            0,
            1,
            None,
            vec![StoredMessage::new(1, 1, Message::user("x"))],
            1,
            Retention::KeepHistory,
            ttl,
        )
    };

    // A creating commit that fails still registered the id first; list drops it once the
    // conversation is gone. It fails here because a meta key written behind the store's
    // back (and never indexed) holds another version.
    let bad = ConversationId::new("bad").unwrap();
    let bad_meta = meta_key(&prefix, "bad");
    let () = redis::cmd("HSET")
        .arg(&bad_meta)
        .arg("version")
        .arg(7)
        .query_async(&mut raw.clone())
        .await
        .unwrap();
    assert_eq!(score("bad").await, None);
    let e = store.commit(&bad, first(None)).await.unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert_eq!(score("bad").await, Some(0.0), "registered before the commit");
    let () = redis::cmd("DEL")
        .arg(&bad_meta)
        .query_async(&mut raw.clone())
        .await
        .unwrap();

    let good = ConversationId::new("good").unwrap();
    assert_eq!(store.commit(&good, first(None)).await.unwrap(), 1);
    assert_eq!(score("good").await, Some(0.0));
    let page = store.list(None, 10).await.unwrap();
    assert_eq!(page.ids, vec![good.clone()]);
    assert_eq!(score("bad").await, None, "list removed the stale entry");

    // An expired conversation reads as absent and leaves the index on the next sweep.
    let short = ConversationId::new("short").unwrap();
    let c = first(Some(Duration::from_millis(50)));
    assert_eq!(store.commit(&short, c).await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(store.load(&short).await.unwrap().version, 0);
    assert_eq!(store.purge_expired().await.unwrap(), 1);
    assert_eq!(score("short").await, None);

    // Clear removes the keys and the index entry.
    assert!(store.clear(&good).await.unwrap());
    assert_eq!(score("good").await, None);
    assert!(!store.clear(&good).await.unwrap());
    assert!(store.list(None, 10).await.unwrap().ids.is_empty());
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_recency_is_backfilled_on_connect() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-recency-backfill");
    let mut raw = raw_cluster(&url).await;
    common::recency_is_backfilled_on_connect(&url, &mut raw, &prefix).await;
    let store = store(&url, &prefix).await;
    common::recent_scans_past_other_prefixes(&store).await;
    common::backfill_walks_batches(&url, &mut raw, &prefix).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_a_conversation_without_meta_does_not_exist() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-orphan");
    let store = store(&url, &prefix).await;
    let mut raw = raw_cluster(&url).await;
    common::a_conversation_without_meta_does_not_exist(&store, &mut raw, &prefix).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_creations_racing_index_sweeps_stay_listed() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-race");
    let store = Arc::new(store(&url, &prefix).await);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Sweeps the index over and over, meeting ids registered but not yet created.
    let sweeper = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                store.purge_expired().await.unwrap();
                store.list(None, 1000).await.unwrap();
            }
        })
    };
    let writers: Vec<_> = (0..16)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..10 {
                    let id = ConversationId::new(format!("race-{w:02}-{i:02}")).unwrap();
                    let commit = chatmem_test::commit(
                        0,
                        vec![StoredMessage::new(1, 1, Message::user("x"))],
                        1,
                        Retention::KeepHistory,
                    );
                    assert_eq!(store.commit(&id, commit).await.unwrap(), 1);
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    sweeper.await.unwrap();
    let page = store.list(None, 1000).await.unwrap();
    assert_eq!(page.ids.len(), 160, "every created conversation is listed");
    cleanup(&url, &prefix).await;
}

// The children of both run `cluster::cluster_stress_child`.
#[tokio::test(flavor = "multi_thread")]
async fn cluster_stress_child() {
    common::stress_child().await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_sixteen_processes_one_conversation() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-stress");
    let child = "cluster::cluster_stress_child";
    common::stress_parent(&url, &prefix, child, false, cleanup(&url, &prefix)).await;
}

/// The same with summaries on: no turn lost, the summary never moves backwards.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_sixteen_summarizing_processes_one_conversation() {
    let url = cluster_url();
    let prefix = unique_prefix("cluster-stress-summary");
    let child = "cluster::cluster_stress_child";
    common::stress_parent(&url, &prefix, child, true, cleanup(&url, &prefix)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_urls_fail_cleanly_without_a_cluster() {
    // Needs no server: nothing listens on port 1.
    let e = RedisStore::builder("redis+cluster://user:secret@127.0.0.1:1")
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), chatmem::store::StoreErrorKind::Unavailable, "{e}");
    assert!(!e.to_string().contains("secret"), "{e}");
    for bad in [
        "redis+cluster://",
        "redis+cluster://h:1,,h:2",
        "redis+cluster://u:secret@h:1/3",
    ] {
        let e = RedisStore::connect(bad).await.unwrap_err();
        assert_eq!(e.kind(), chatmem::store::StoreErrorKind::InvalidInput, "{bad}: {e}");
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}
