//! Paging through a conversation's history and through the conversation ids.

use chatmem::{ConversationId, Retention};

use super::harness::{Run, commit, seqs, strs, texts, turns};

pub(super) async fn history_paging(run: &Run) {
    let id = run.id("paging");
    run.commit(&id, commit(0, turns(1, 10), 8, Retention::KeepHistory))
        .await;
    assert_eq!(seqs(&run.history(&id, 0, 3).await), vec![1, 2, 3]);
    assert_eq!(seqs(&run.history(&id, 3, 3).await), vec![4, 5, 6]);
    assert_eq!(seqs(&run.history(&id, 9, 5).await), vec![10]);
    assert!(run.history(&id, 10, 5).await.is_empty());
    assert!(run.history(&id, 1000, 5).await.is_empty());
    assert!(run.history(&id, 0, 0).await.is_empty(), "limit 0 returns none");
    assert_eq!(run.history(&id, 0, 100).await, turns(1, 10));
    // ChatMemory::history pages 1,000 at a time: cross a page boundary.
    let id = run.id("paging-big");
    run.commit(&id, commit(0, turns(1, 1001), 990, Retention::KeepHistory))
        .await;
    let all = run
        .memory(20, Retention::KeepHistory)
        .history(&id)
        .await
        .expect("history");
    assert_eq!(all.len(), 1001);
    assert_eq!(texts(&all[1000..]), strs(&["u1001"]));
    assert_eq!(seqs(&run.history(&id, 999, 10).await), vec![1000, 1001]);
}

pub(super) async fn list_paging(run: &Run) {
    let ids: Vec<ConversationId> = (0..25).map(|i| run.id(&format!("list/{i:02}"))).collect();
    for id in ids.iter().rev() {
        run.commit(id, commit(0, turns(1, 1), 1, Retention::DropEvicted)).await;
    }
    for limit in [1, 7, 25, 100] {
        assert_eq!(run.list_range("list/", limit).await, ids, "paging {limit} at a time");
    }
    // limit 0 is treated as 1.
    let page = run.store.list(Some(&run.id("list/")), 0).await.expect("list");
    assert_eq!(page.ids, vec![ids[0].clone()], "limit 0 lists one id");
    assert_eq!(page.next, Some(ids[0].clone()));
    // From the start: ascending, bounded.
    let page = run.store.list(None, 3).await.expect("list");
    assert!(!page.ids.is_empty() && page.ids.len() <= 3);
    assert!(page.ids.windows(2).all(|w| w[0] < w[1]));
    // The cursor is exclusive.
    let page = run.store.list(Some(&ids[10]), 2).await.expect("list");
    assert_eq!(page.ids, ids[11..13].to_vec());
    assert_eq!(page.next, Some(ids[12].clone()));
    // Through ChatMemory, and after a clear.
    let mem = run.memory(20, Retention::DropEvicted);
    let page = mem.list(Some(&ids[23]), 5).await.expect("list");
    assert_eq!(page.ids.first(), Some(&ids[24]));
    assert!(mem.clear(&ids[0]).await.expect("clear"));
    assert_eq!(run.list_range("list/", 10).await, ids[1..].to_vec());
}
