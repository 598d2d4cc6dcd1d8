//! A load of a conversation the store has seen reads from the window start it saw (no
//! script); these check that what it returns is always what the load script returns, when
//! another store moved the window on, cleared the conversation and created it again, or
//! deleted it.

mod common;

use chatmem::{Commit, ConversationId, Message, Retention, Store, StoredMessage};
use chatmem_test::commit;
use common::{cleanup, store, unique_prefix, url};

fn msgs(from: u64, n: u64) -> Vec<StoredMessage> {
    (from..from + n)
        .map(|seq| StoredMessage::new(seq, 2, Message::user(format!("m{seq}"))).counted_by("heuristic"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_from_a_seen_window_start_equals_the_scripts() {
    let Some(url) = url() else { return };
    let prefix = unique_prefix("window-hints");
    let (seen, other) = (store(&url, &prefix).await, store(&url, &prefix).await);
    let id = ConversationId::new("hinted").unwrap();
    // A store that has seen nothing loads with the script: the reference.
    let reference = || async { store(&url, &prefix).await.load(&id).await.unwrap() };

    for retention in [Retention::KeepHistory, Retention::DropEvicted] {
        assert_eq!(seen.load(&id).await.unwrap().version, 0);
        assert_eq!(seen.commit(&id, commit(0, msgs(1, 6), 3, retention)).await.unwrap(), 1);
        assert_eq!(seen.load(&id).await.unwrap(), reference().await);

        // Another store moves the window on: the seen start is now below it.
        let snap = other.load(&id).await.unwrap();
        let moved = Commit::on(&snap).retention(retention).append(Message::user("m7"), 2);
        let moved = moved.counted_by("heuristic").window_start(6).build().unwrap();
        other.commit(&id, moved).await.unwrap();
        let loaded = seen.load(&id).await.unwrap();
        assert_eq!(
            loaded,
            reference().await,
            "{retention:?}: messages that left the window are dropped"
        );
        assert_eq!(loaded.messages.first().map(|m| m.seq), Some(6));

        // Cleared and created again: the new window starts below the seen one.
        assert!(other.clear(&id).await.unwrap());
        other.commit(&id, commit(0, msgs(1, 2), 1, retention)).await.unwrap();
        let loaded = seen.load(&id).await.unwrap();
        assert_eq!(loaded, reference().await, "{retention:?}: a conversation made again");
        assert_eq!(loaded.messages.len(), 2);

        // Deleted: nothing, whatever the seen store remembers.
        seen.load(&id).await.unwrap();
        assert!(other.clear(&id).await.unwrap());
        assert_eq!(seen.load(&id).await.unwrap().version, 0);
    }
    cleanup(&url, &prefix).await;
}
