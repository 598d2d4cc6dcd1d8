//! Lexical recall on Redis beyond the conformance suite: searches over long random
//! histories (lists of many chunks, terms past the postings cap, deletions below a start,
//! commits without index entries) answer exactly as the reference index; the index key
//! expires and is cleared with the conversation and, on Cluster, shares its slot.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chatmem::recall::{MemoryIndex, SearchQuery, SearchResult};
use chatmem::store::{Commit, Snapshot, StoredMessage, now_micros};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_redis::RedisStore;

use crate::common::{self, hex, meta_key, msgs_key, store, unique_prefix, url};

/// A word of a skewed vocabulary of `size` words: the first few in most messages, most in
/// few.
fn word(rng: &mut fastrand::Rng, size: usize) -> String {
    let u = rng.f64();
    format!("w{}", ((size as f64).ln() * u).exp() as usize)
}

/// A message of 1 to 24 such words (repeats included), now and then an order number.
fn text(rng: &mut fastrand::Rng, seq: u64) -> String {
    let mut words: Vec<String> = (0..rng.usize(1..25)).map(|_| word(rng, 400)).collect();
    if rng.u8(..8) == 0 {
        words.push(format!("LC{seq:06}"));
    }
    if rng.u8(..16) == 0 {
        words.push("订单已发货".to_string());
    }
    words.join(" ")
}

/// What `found` must be: the reference's answer, the messages as `history` holds them.
fn assert_agrees(found: &SearchResult, reference: &MemoryIndex, history: &[StoredMessage], query: &SearchQuery) {
    let want = reference.search(query, |seq| history.iter().find(|m| m.seq == seq).cloned());
    let what = format!("{:?} before {} limit {}", query.terms, query.before, query.limit);
    assert_eq!((found.docs, found.total_len), (want.docs, want.total_len), "{what}");
    assert_eq!(found.df, want.df, "{what}");
    let seqs = |r: &SearchResult| r.hits.iter().map(|h| h.message.seq).collect::<Vec<_>>();
    assert_eq!(seqs(found), seqs(&want), "{what}");
    for (got, want) in found.hits.iter().zip(&want.hits) {
        assert_eq!(
            (got.len, &got.tf, &got.message),
            (want.len, &want.tf, &want.message),
            "{what}"
        );
    }
}

/// Grows one conversation of `store` to about 3,000 messages in commits of 1 to 40 (some
/// without index entries, some deleting below a start that jumps ahead), checking searches
/// against the reference index as it goes.
pub(crate) async fn random_history_searches_as_the_reference(store: &RedisStore, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let id = ConversationId::new(format!("recall-random-{seed}")).unwrap();
    let mut reference = MemoryIndex::new();
    let mut snap = Snapshot::empty();
    let started = now_micros();
    let mut checks = 0;
    for round in 0..150 {
        let indexed = rng.u8(..6) != 0;
        // Deletions early on (each deletes all but the window), a long history after.
        let dropping = round < 60 && rng.u8(..6) == 0;
        let mut builder = Commit::on(&snap).index(indexed).retention(if dropping {
            Retention::DropEvicted
        } else {
            Retention::KeepHistory
        });
        let n = rng.u64(1..=40);
        for k in 0..n {
            let seq = snap.next_seq + k;
            let m = if seq % 2 == 1 {
                Message::user(text(&mut rng, seq))
            } else {
                Message::assistant(text(&mut rng, seq))
            };
            builder = builder.append(m, 5);
        }
        let end = snap.next_seq + n;
        // The window keeps the last 20 or so; now and then it jumps ahead, and under
        // DropEvicted what leaves it is deleted (index entries included).
        let start = if dropping {
            rng.u64(snap.window_start..=end.saturating_sub(5).max(snap.window_start))
        } else {
            end.saturating_sub(20).max(snap.window_start)
        };
        let commit = builder.window_start(start).build().unwrap();
        reference.add(commit.index(), 0);
        if let Some(below) = commit.delete_below() {
            reference.delete_below(below);
        }
        store.commit(&id, commit).await.unwrap();
        snap = store.load(&id).await.unwrap();
        if round % 10 != 9 {
            continue;
        }
        let history = store.history(&id, 0, usize::MAX).await.unwrap();
        for _ in 0..25 {
            // Short queries and long ones (the script reads those differently).
            let n = if rng.u8(..4) == 0 {
                rng.usize(9..25)
            } else {
                rng.usize(1..7)
            };
            let mut terms: Vec<String> = (0..n).map(|_| word(&mut rng, 400)).collect();
            match rng.u8(..6) {
                0 => terms.push(format!("LC{:06}", rng.u64(1..snap.next_seq))),
                1 => terms.push(terms[0].clone()),
                2 => terms.push("absent".into()),
                3 => terms.push("已发".into()),
                _ => {}
            }
            let before = match rng.u8(..4) {
                0 => u64::MAX,
                1 => rng.u64(0..=snap.next_seq + 2),
                _ => snap.window_start,
            };
            let limit = [0, 1, 5, 20, 20, 100][rng.usize(..6)];
            let query = SearchQuery::new(terms, before, limit);
            let found = store.search(&id, &query).await.unwrap();
            assert_agrees(&found, &reference, &history, &query);
            for hit in &found.hits {
                assert!(
                    (started - 1_000_000..now_micros() + 1_000_000).contains(&hit.at_micros),
                    "seq {}: its commit's time, got {}",
                    hit.message.seq,
                    hit.at_micros
                );
            }
            checks += 1;
        }
    }
    assert!(reference.len() > 1_000, "a long history: {}", reference.len());
    assert!(checks >= 300);
    assert!(store.clear(&id).await.unwrap());
    let found = store
        .search(&id, &SearchQuery::new(vec!["w1".into()], u64::MAX, 5))
        .await
        .unwrap();
    assert_eq!((found.docs, found.total_len, found.hits.len()), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn random_histories_search_as_the_reference() {
    let url = url();
    let prefix = unique_prefix("recall-random");
    let store = store(&url, &prefix).await;
    for seed in 1..=2 {
        random_history_searches_as_the_reference(&store, seed).await;
    }
    common::cleanup(&url, &prefix).await;
}

/// Every key under `prefix` that `conn` holds (test inspection only: SCAN).
async fn keys(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .expect("SCAN");
        out.extend(batch);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

/// An indexed commit of `texts` on `snap` with `ttl`.
fn indexed(snap: &Snapshot, texts: &[&str], ttl: Option<Duration>) -> Commit {
    let mut builder = Commit::on(snap).index(true).retention(Retention::KeepHistory).ttl(ttl);
    for t in texts {
        builder = builder.append(Message::user(*t), 2);
    }
    builder.build().unwrap()
}

async fn seqs_for(store: &RedisStore, id: &ConversationId, term: &str) -> (u64, Vec<u64>) {
    let found = store
        .search(id, &SearchQuery::new(vec![term.into()], u64::MAX, 10))
        .await
        .unwrap();
    (found.docs, found.hits.iter().map(|h| h.message.seq).collect())
}

/// The key of conversation `id`'s lexical index under `prefix`.
fn idx_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:{{{}}}:idx", hex(id))
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn the_index_expires_and_is_cleared_with_the_conversation() {
    let url = url();
    let prefix = unique_prefix("recall-expiry");
    let store = store(&url, &prefix).await;
    let mut conn = common::raw(&url).await;
    let id = ConversationId::new("walrus{1}:*").unwrap();
    let (meta, msgs, idx) = (
        meta_key(&prefix, id.as_str()),
        msgs_key(&prefix, id.as_str()),
        idx_key(&prefix, id.as_str()),
    );
    let tag = hex(id.as_str());
    let conversation_keys =
        |all: BTreeSet<String>| -> BTreeSet<String> { all.into_iter().filter(|k| k.contains(&tag)).collect() };

    // Written with a short TTL (enough messages for the commit to write posting lists at
    // once; smaller commits leave their entries pending), then kept alive by a commit
    // without index entries: the index lives as long as the conversation, whatever TTL it
    // was written under.
    let fillers: Vec<String> = (0..38).map(|i| format!("filler{i}")).collect();
    let mut texts = vec!["walrus tusk", "walrus twice"];
    texts.extend(fillers.iter().map(String::as_str));
    let c = indexed(&Snapshot::empty(), &texts, Some(Duration::from_millis(400)));
    store.commit(&id, c).await.unwrap();
    let expected: BTreeSet<String> = [meta.clone(), msgs.clone(), idx.clone()].into();
    assert_eq!(
        conversation_keys(keys(&mut conn, &prefix).await),
        expected,
        "three keys, one tag"
    );
    let fields: Vec<String> = redis::cmd("HKEYS").arg(&idx).query_async(&mut conn).await.unwrap();
    let walrus = format!("t:{}", hex("walrus"));
    for field in ["i", walrus.as_str(), "d:1", "d:2", "d:40"] {
        assert!(fields.iter().any(|f| f == field), "{field} in {fields:?}");
    }
    let marked: Option<String> = redis::cmd("HGET")
        .arg(&meta)
        .arg("indexed")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(marked.as_deref(), Some("1"), "the meta hash marks the index as its own");
    let (meta_ttl, idx_ttl) = (pttl(&mut conn, &meta).await, pttl(&mut conn, &idx).await);
    assert!(idx_ttl > 0 && (meta_ttl - idx_ttl).abs() < 50, "{meta_ttl} {idx_ttl}");
    let snap = store.load(&id).await.unwrap();
    let plain = Commit::on(&snap)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_secs(60)))
        .append(Message::assistant("no index here"), 2)
        .build()
        .unwrap();
    store.commit(&id, plain).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(seqs_for(&store, &id, "walrus").await, (40, vec![2, 1]));
    for key in [&meta, &msgs, &idx] {
        assert!(pttl(&mut conn, key).await > 50_000, "{key}");
    }

    // Expired: all three keys are gone together, and the conversation created again starts
    // with an empty index.
    let snap = store.load(&id).await.unwrap();
    let short = Commit::on(&snap)
        .index(true)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_millis(200)))
        .append(Message::user("walrus three"), 2)
        .build()
        .unwrap();
    store.commit(&id, short).await.unwrap();
    assert_eq!(seqs_for(&store, &id, "walrus").await, (41, vec![42, 2, 1]));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(seqs_for(&store, &id, "walrus").await, (0, vec![]));
    assert!(
        conversation_keys(keys(&mut conn, &prefix).await).is_empty(),
        "nothing left"
    );
    store
        .commit(&id, indexed(&Snapshot::empty(), &["walrus anew"], None))
        .await
        .unwrap();
    assert_eq!(seqs_for(&store, &id, "walrus").await, (1, vec![1]));
    assert_eq!(seqs_for(&store, &id, "tusk").await, (1, vec![]));
    // No TTL now; and a TTL set, then dropped again, is dropped from all three keys.
    assert_eq!(pttl(&mut conn, &idx).await, -1);
    let snap = store.load(&id).await.unwrap();
    store
        .commit(&id, indexed(&snap, &["ttl again"], Some(Duration::from_secs(60))))
        .await
        .unwrap();
    assert!(pttl(&mut conn, &idx).await > 50_000);
    let snap = store.load(&id).await.unwrap();
    let plain = Commit::on(&snap)
        .retention(Retention::KeepHistory)
        .append(Message::assistant("no ttl"), 2)
        .build()
        .unwrap();
    store.commit(&id, plain).await.unwrap();
    for key in [&meta, &msgs, &idx] {
        assert_eq!(pttl(&mut conn, key).await, -1, "{key}");
    }

    // Cleared: gone, no key left.
    assert!(store.clear(&id).await.unwrap());
    assert!(conversation_keys(keys(&mut conn, &prefix).await).is_empty());
    common::cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_conversation_without_recall_has_no_index() {
    let url = url();
    let prefix = unique_prefix("recall-none");
    let store = store(&url, &prefix).await;
    let mut conn = common::raw(&url).await;
    let id = ConversationId::new("plain").unwrap();
    let mut snap = Snapshot::empty();
    for round in 0..3 {
        let c = Commit::on(&snap)
            .retention(Retention::DropEvicted)
            .ttl(Some(Duration::from_secs(60)))
            .append(Message::user(format!("order {round}")), 2)
            .window_start(snap.next_seq)
            .build()
            .unwrap();
        store.commit(&id, c).await.unwrap();
        snap = store.load(&id).await.unwrap();
    }
    let tag = hex("plain");
    let mine: BTreeSet<String> = keys(&mut conn, &prefix)
        .await
        .into_iter()
        .filter(|k| k.contains(&tag))
        .collect();
    assert_eq!(mine, [meta_key(&prefix, "plain"), msgs_key(&prefix, "plain")].into());
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(meta_key(&prefix, "plain"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(fields.iter().all(|f| f != "indexed" && !f.contains(':')), "{fields:?}");
    assert_eq!(seqs_for(&store, &id, "order").await, (0, vec![]));
    common::cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn an_index_key_left_behind_is_not_the_conversations() {
    // An index key the meta hash does not mark as its conversation's (left by a
    // conversation cleared by a chatmem without recall, or written by hand) is dropped
    // before the conversation's first entry, and never searched.
    let url = url();
    let prefix = unique_prefix("recall-stale");
    let store = store(&url, &prefix).await;
    let mut conn = common::raw(&url).await;
    let id = ConversationId::new("stale").unwrap();
    let idx = idx_key(&prefix, "stale");
    let plain = Commit::on(&Snapshot::empty())
        .retention(Retention::KeepHistory)
        .append(Message::user("ghost story"), 2)
        .build()
        .unwrap();
    store.commit(&id, plain).await.unwrap();
    // A list of one posting (seq 1, count 1, length 2) under a 12-byte header.
    let ghost = {
        let mut state = vec![0u8; 12];
        state[5] = 1;
        state.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2]);
        state
    };
    // Five messages of 50 terms, and a list for "ghost".
    let mut head = vec![0u8; 21];
    (head[6], head[13]) = (5, 50);
    let () = redis::cmd("HSET")
        .arg(&idx)
        .arg("i")
        .arg(head)
        .arg(format!("t:{}", hex("ghost")))
        .arg(ghost)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(seqs_for(&store, &id, "ghost").await, (0, vec![]), "not searched");
    let snap = store.load(&id).await.unwrap();
    store
        .commit(&id, indexed(&snap, &["ghost hunter"], None))
        .await
        .unwrap();
    let found = store
        .search(&id, &SearchQuery::new(vec!["ghost".into()], u64::MAX, 10))
        .await
        .unwrap();
    assert_eq!(
        (found.docs, found.total_len, found.df.clone(), found.hits.len()),
        (1, 2, vec![1], 1)
    );
    assert_eq!(found.hits[0].message.seq, 2);
    common::cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_random_histories_search_as_the_reference() {
    let url = common::cluster_url();
    let prefix = unique_prefix("cluster-recall-random");
    let store = store(&url, &prefix).await;
    random_history_searches_as_the_reference(&store, 3).await;
    crate::cluster::cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_the_index_shares_the_conversation_slot() {
    let url = common::cluster_url();
    let prefix = unique_prefix("cluster-recall-slots");
    let store = Arc::new(store(&url, &prefix).await);
    let nodes = crate::cluster::primaries(&url).await;
    let ids: Vec<ConversationId> = (0..12)
        .map(|i| ConversationId::new(format!("slot-{i}-{{x}}:*\"")).unwrap())
        .collect();
    for (i, id) in ids.iter().enumerate() {
        let own = format!("marker{i} order {{tag}} a:b *star*");
        let c = indexed(
            &Snapshot::empty(),
            &[own.as_str(), "order shipped"],
            Some(Duration::from_secs(600)),
        );
        store.commit(id, c).await.unwrap();
    }
    // A search is one script on the conversation's node: it finds that conversation's own
    // messages only.
    for (i, id) in ids.iter().enumerate() {
        let (docs, seqs) = seqs_for(&store, id, &format!("marker{i}")).await;
        assert_eq!((docs, seqs), (2, vec![1]), "{id:?}");
        let (_, seqs) = seqs_for(&store, id, "order").await;
        assert_eq!(seqs, [2, 1], "{id:?}");
    }
    // Every key of every conversation is its meta hash, its messages or its index, all in
    // the conversation's slot and stored on the node owning it.
    let mut all = BTreeSet::new();
    for addr in nodes.keys() {
        let mut conn = crate::cluster::node(addr).await;
        for key in keys(&mut conn, &prefix).await {
            all.insert((key, addr.clone()));
        }
    }
    let any = crate::cluster::node(nodes.keys().next().unwrap()).await;
    let mut used = BTreeSet::new();
    for id in &ids {
        let (meta, msgs, idx) = (
            meta_key(&prefix, id.as_str()),
            msgs_key(&prefix, id.as_str()),
            idx_key(&prefix, id.as_str()),
        );
        let tag = format!("{{{}}}", hex(id.as_str()));
        let mine: Vec<&(String, String)> = all.iter().filter(|(k, _)| k.contains(&tag)).collect();
        assert_eq!(mine.len(), 3, "{id:?}: {mine:?}");
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
        let meta_slot = slot(meta.clone()).await;
        assert_eq!(meta_slot, slot(msgs.clone()).await);
        assert_eq!(meta_slot, slot(idx.clone()).await);
        for key in [&meta, &msgs, &idx] {
            assert!(mine.iter().any(|(k, _)| k == key), "{key} in {mine:?}");
        }
        assert!(mine.iter().all(|(_, node)| *node == mine[0].1), "{id:?}: one node");
        // The index's entries are there (a plain connection to that node: no redirection).
        let mut owner = crate::cluster::node(&mine[0].1).await;
        for field in ["i", "d:1", "d:2"] {
            let there: i64 = redis::cmd("HEXISTS")
                .arg(&idx)
                .arg(field)
                .query_async(&mut owner)
                .await
                .unwrap();
            assert_eq!(there, 1, "{id:?}: {field}");
        }
        used.insert(mine[0].1.clone());
    }
    assert!(used.len() >= 2, "conversations spread over several nodes: {used:?}");
    for id in &ids {
        assert!(store.clear(id).await.unwrap());
    }
    crate::cluster::cleanup(&url, &prefix).await;
}
