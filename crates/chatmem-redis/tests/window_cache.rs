//! A load of a conversation the store has seen reads only what changed since (no script);
//! these check that what it returns is always what the load script returns on a store that
//! has seen nothing, when other stores (other processes) append, move the window on, clear
//! the conversation and create it again (below the seen window, or past it), delete it,
//! or wrote it before chatmem stored a creation marker; and with the cache switched off.

mod common;

use chatmem::{Commit, ConversationId, Message, Retention, Snapshot, Store, StoredMessage};
use chatmem_redis::RedisStore;
use chatmem_test::commit;
use common::{cleanup, meta_key, raw, store, unique_prefix, url};

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
async fn a_load_of_a_seen_window_equals_the_scripts() {
    let Some(url) = url() else { return };
    let prefix = unique_prefix("window-cache");
    check_against_the_script(&url, &prefix, chatmem_redis::DEFAULT_WINDOW_CACHE_BYTES).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_cached_messages_a_load_equals_the_scripts() {
    let Some(url) = url() else { return };
    let prefix = unique_prefix("window-cache-off");
    check_against_the_script(&url, &prefix, 0).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_without_a_creation_marker_is_read_whole() {
    let Some(url) = url() else { return };
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
