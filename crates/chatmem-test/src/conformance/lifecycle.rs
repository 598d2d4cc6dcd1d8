//! How a conversation ends: cleared, or expired by its TTL, and started afresh after.

use std::sync::Arc;
use std::time::Duration;

use chatmem::store::Snapshot;
use chatmem::{ChatMemory, Heuristic, Message, Retention};

use super::harness::{Run, commit, creating, seqs, sm, stored_texts, strs, turns};

pub(super) async fn clear(run: &Run) {
    let id = run.id("clear");
    let mem = run.memory(20, Retention::KeepHistory);
    mem.add(&id, [Message::system("s"), Message::user("u"), Message::assistant("a")])
        .await
        .expect("add");
    assert!(
        mem.clear(&id).await.expect("clear"),
        "clear reports an existing conversation"
    );
    assert_eq!(run.load(&id).await, Snapshot::empty());
    assert!(run.history(&id, 0, 100).await.is_empty());
    assert!(mem.get(&id).await.expect("get").is_empty());
    assert!(!mem.clear(&id).await.expect("clear"), "a second clear reports false");
    assert!(!run.list_range("clear", 10).await.contains(&id));
    // The id starts afresh.
    mem.add(&id, [Message::user("again")]).await.expect("add");
    let snap = run.load(&id).await;
    assert_eq!((snap.version, seqs(&snap.messages)), (1, vec![1]));
    assert!(snap.system.is_none(), "the old system message is gone");
    assert_eq!(stored_texts(&run.history(&id, 0, 100).await), strs(&["again"]));
}

pub(super) async fn ttl(run: &Run) {
    let second = Some(Duration::from_secs(1));
    // `expiring` expires; `kept` has its expiry refreshed to "never" by a later commit.
    let expiring = run.id("ttl/expiring");
    let kept = run.id("ttl/kept");
    for id in [&expiring, &kept] {
        run.commit(id, creating(None, turns(1, 2), second)).await;
    }
    run.commit(&kept, commit(1, turns(3, 1), 1, Retention::KeepHistory))
        .await;
    // Through ChatMemory's ttl.
    let via_memory = run.id("ttl/memory");
    let mem = ChatMemory::builder(run.store.clone())
        .ttl(Duration::from_secs(1))
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid memory settings");
    mem.add(&via_memory, [Message::user("short-lived")]).await.expect("add");

    assert_eq!(run.load(&expiring).await.version, 1, "readable before expiry");
    assert_eq!(run.history(&expiring, 0, 10).await.len(), 2);
    assert_eq!(mem.get(&via_memory).await.expect("get").len(), 1);
    assert_eq!(
        run.list_range("ttl/", 10).await,
        vec![expiring.clone(), kept.clone(), via_memory.clone()]
    );

    tokio::time::sleep(Duration::from_millis(1600)).await;

    assert_eq!(
        run.load(&expiring).await,
        Snapshot::empty(),
        "an expired conversation loads empty"
    );
    assert!(
        run.history(&expiring, 0, 10).await.is_empty(),
        "no history after expiry"
    );
    assert!(mem.get(&via_memory).await.expect("get").is_empty());
    assert_eq!(
        run.list_range("ttl/", 10).await,
        vec![kept.clone()],
        "expired ids are not listed"
    );
    let recent = run.recent("ttl/", None, 10).await;
    assert_eq!(
        recent.conversations.iter().map(|c| &c.id).collect::<Vec<_>>(),
        vec![&kept],
        "expired conversations are not listed by recency either"
    );
    assert_eq!(
        recent.conversations[0].expires_micros, None,
        "ttl None cleared the expiry"
    );
    assert_eq!(run.load(&kept).await.version, 2, "ttl None cleared the expiry");
    run.store.purge_expired().await.expect("purge_expired");
    assert_eq!(run.load(&kept).await.version, 2, "purge keeps live conversations");

    // The expired id starts afresh (expected version 0), without the old messages.
    let fresh = vec![sm(1, 1, Message::user("new life"))];
    assert_eq!(
        run.commit(&expiring, commit(0, fresh.clone(), 1, Retention::KeepHistory))
            .await,
        1
    );
    assert_eq!(run.load(&expiring).await.messages, fresh);
    assert_eq!(run.history(&expiring, 0, 10).await, fresh);
    assert!(!run.clear(&via_memory).await, "an expired conversation does not exist");
}
