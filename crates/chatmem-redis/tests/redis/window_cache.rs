//! A load of a conversation the store has seen reads only what changed since (no script);
//! these check that what it returns is always what the load script returns on a store that
//! has seen nothing, when other stores (other processes) append, move the window on, clear
//! the conversation and create it again (below the seen window, or past it), delete it,
//! or wrote it before chatmem stored a creation marker; and with the cache switched off.

use crate::common::{cleanup, meta_key, raw, store, unique_prefix, url};
use chatmem::store::{Commit, Snapshot, StoredMessage};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_redis::RedisStore;
use chatmem_test::commit;

fn msgs(from: u64, n: u64, text: &str) -> Vec<StoredMessage> {
    (from..from + n)
        .map(|seq| StoredMessage::new(seq, 2, Message::user(format!("{text}{seq}"))).counted_by("heuristic"))
        .collect()
}

/// Appends `n` messages to `id` through `store`, moving the window start to `start`.
async fn append(store: &RedisStore, id: &ConversationId, n: u64, start: u64, retention: Retention) -> Snapshot {
    let snap = store.load(id).await.unwrap();
    let mut c = Commit::on(&snap).retention(retention).counted_by("heuristic");
    for i in 0..n {
        c = c.append(Message::assistant(format!("x{}", snap.next_seq + i)), 2);
    }
    store.commit(id, c.window_start(start).build().unwrap()).await.unwrap();
    store.load(id).await.unwrap()
}

async fn check_against_the_script(url: &str, prefix: &str, bytes: usize) {
    let seen = RedisStore::builder(url)
        .key_prefix(prefix)
        .window_cache_bytes(bytes)
        .connect()
        .await
        .unwrap();
    let other = store(url, prefix).await;
    let id = ConversationId::new("cached").unwrap();
    // A store that has seen nothing loads with the script: the reference.
    let reference = || async { store(url, prefix).await.load(&id).await.unwrap() };

    for retention in [Retention::KeepHistory, Retention::DropEvicted] {
        assert_eq!(seen.load(&id).await.unwrap().version, 0);
        assert_eq!(
            seen.commit(&id, commit(0, msgs(1, 6, "m"), 3, retention))
                .await
                .unwrap(),
            1
        );
        assert_eq!(seen.load(&id).await.unwrap(), reference().await);

        // Another store appends and moves the window on.
        append(&other, &id, 3, 6, retention).await;
        let loaded = seen.load(&id).await.unwrap();
        assert_eq!(loaded, reference().await, "{retention:?}: appended elsewhere");
        assert_eq!(loaded.messages.first().map(|m| m.seq), Some(6));
        assert_eq!(loaded.messages.len(), 4);

        // The seen store commits on what it loaded, then loads again.
        let mine = append(&seen, &id, 2, 8, retention).await;
        assert_eq!(mine, reference().await, "{retention:?}: committed here");
        assert_eq!(seen.load(&id).await.unwrap(), mine);

        // Cleared and created again, below the seen window.
        assert!(other.clear(&id).await.unwrap());
        other
            .commit(&id, commit(0, msgs(1, 2, "n"), 1, retention))
            .await
            .unwrap();
        let loaded = seen.load(&id).await.unwrap();
        assert_eq!(loaded, reference().await, "{retention:?}: created again below");
        assert_eq!(loaded.messages.len(), 2);

        // Cleared and created again past everything seen: same seqs, other messages.
        seen.load(&id).await.unwrap();
        assert!(other.clear(&id).await.unwrap());
        other
            .commit(&id, commit(0, msgs(1, 12, "p"), 2, retention))
            .await
            .unwrap();
        let loaded = seen.load(&id).await.unwrap();
        assert_eq!(
            loaded,
            reference().await,
            "{retention:?}: created again past the seen window"
        );
        assert_eq!(loaded.messages[0].message.text().as_deref(), Some("p2"));

        // Deleted: nothing, whatever the seen store remembers.
        seen.load(&id).await.unwrap();
        assert!(other.clear(&id).await.unwrap());
        assert_eq!(seen.load(&id).await.unwrap().version, 0);
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_load_of_a_seen_window_equals_the_scripts() {
    let url = url();
    let prefix = unique_prefix("window-cache");
    check_against_the_script(&url, &prefix, chatmem_redis::DEFAULT_WINDOW_CACHE_BYTES).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn without_cached_messages_a_load_equals_the_scripts() {
    let url = url();
    let prefix = unique_prefix("window-cache-off");
    check_against_the_script(&url, &prefix, 0).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_conversation_without_a_creation_marker_is_read_whole() {
    let url = url();
    let prefix = unique_prefix("window-cache-legacy");
    let (seen, other) = (store(&url, &prefix).await, store(&url, &prefix).await);
    let id = ConversationId::new("legacy").unwrap();
    let reference = || async { store(&url, &prefix).await.load(&id).await.unwrap() };
    other
        .commit(&id, commit(0, msgs(1, 4, "m"), 1, Retention::KeepHistory))
        .await
        .unwrap();
    // As written before the marker: no `created` field.
    let mut conn = raw(&url).await;
    let _: i64 = redis::cmd("HDEL")
        .arg(meta_key(&prefix, "legacy"))
        .arg("created")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(seen.load(&id).await.unwrap(), reference().await);
    append(&seen, &id, 2, 3, Retention::KeepHistory).await;
    append(&other, &id, 2, 5, Retention::KeepHistory).await;
    let loaded = seen.load(&id).await.unwrap();
    assert_eq!(loaded, reference().await);
    assert_eq!(loaded.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [5, 6, 7, 8]);
    // Cleared and created again by a writer that stores the marker.
    assert!(other.clear(&id).await.unwrap());
    other
        .commit(&id, commit(0, msgs(1, 9, "q"), 3, Retention::KeepHistory))
        .await
        .unwrap();
    assert_eq!(seen.load(&id).await.unwrap(), reference().await);
    cleanup(&url, &prefix).await;
}

/// Random steps by three stores on one conversation, each commit built on what a random store
/// loaded and sent through another (append with the window moving on, a system message set
/// or replaced, a clear, a new conversation under the same id, a commit lost to another
/// store's). After every step one random store loads (so the others' caches go stale for a
/// while), and its load must equal a fresh store's.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn random_writers_never_see_a_stale_window() {
    let url = url();
    let prefix = unique_prefix("window-cache-random");
    let stores = [
        store(&url, &prefix).await,
        store(&url, &prefix).await,
        RedisStore::builder(&url)
            .key_prefix(&prefix)
            .window_cache_bytes(2_000)
            .connect()
            .await
            .unwrap(),
    ];
    let id = ConversationId::new("random").unwrap();
    let mut rng = fastrand::Rng::with_seed(9);
    let pick = |rng: &mut fastrand::Rng| &stores[rng.usize(..stores.len())];
    for step in 0..600 {
        let snap = pick(&mut rng).load(&id).await.unwrap();
        let writer = pick(&mut rng);
        let mut c = Commit::on(&snap).counted_by("heuristic");
        match rng.u8(..10) {
            0 => {
                writer.clear(&id).await.unwrap();
                continue;
            }
            1 => {
                // Another store commits first: this one's commit is lost.
                append(pick(&mut rng), &id, 1, snap.window_start.max(1), Retention::KeepHistory).await;
                let late = c.append(Message::user("late"), 2).build().unwrap();
                assert!(writer.commit(&id, late).await.unwrap_err().is_conflict());
                continue;
            }
            2 => c = c.system(Message::system(format!("system {}", rng.u8(..3))), 4),
            _ => {
                let n = rng.u64(1..4);
                for k in 0..n {
                    c = c.append(Message::assistant(format!("r{step}.{k}")), 2);
                }
                let start = (snap.next_seq + n)
                    .saturating_sub(rng.u64(1..12))
                    .max(snap.window_start);
                let retention = if rng.bool() {
                    Retention::KeepHistory
                } else {
                    Retention::DropEvicted
                };
                c = c.retention(retention).window_start(start);
            }
        }
        // Half the time the snapshot is let go of before the commit, as `ChatMemory` does:
        // a store that loaded it then appends to its cached window in place.
        // Otherwise it must keep what it saw.
        let seqs = |s: &Snapshot| s.messages.iter().map(|m| m.seq).collect::<Vec<_>>();
        let held = rng.bool().then(|| (seqs(&snap), snap));
        match writer.commit(&id, c.build().unwrap()).await {
            Ok(_) => {}
            Err(e) => panic!("step {step}: {e}"),
        }
        if let Some((saw, snap)) = held {
            assert_eq!(seqs(&snap), saw, "a held snapshot after step {step}");
        }
        let reader = rng.usize(..stores.len());
        let reference = store(&url, &prefix).await.load(&id).await.unwrap();
        assert_eq!(
            stores[reader].load(&id).await.unwrap(),
            reference,
            "store {reader} after step {step}"
        );
    }
    cleanup(&url, &prefix).await;
}
