//! The conformance steps for summaries: the summary as a store keeps it, and summaries made
//! through `ChatMemory`.

use std::sync::Arc;

use chatmem::store::{Commit, CommitBuilder, Snapshot};
use chatmem::{ChatMemory, ChatModel, Heuristic, Message, Retention, Summarizer, Summary, WindowPolicy};

use super::harness::{Run, commit, seqs, turns};
use crate::summary_models::{Failing, Scribe};

/// A commit on `snap` that keeps what no summary covers yet, stores `summary` (a summary
/// and the `upto` of the one it extends), if any, and appends `message` (3 tokens).
fn appending(snap: &Snapshot, message: Message, summary: Option<(&Summary, u64)>) -> CommitBuilder {
    let builder = Commit::on(snap).keep_unsummarized();
    let builder = match summary {
        Some((summary, extends)) => builder.summary(summary.clone(), extends),
        None => builder,
    };
    builder.append(message, 3)
}

/// The summary is stored with the conversation, kept by commits without one, replaced by a
/// newer one, and an evicted message is deleted only once a summary covers it.
pub(super) async fn summary_round_trip(run: &Run) {
    let id = run.id("summary");
    let first = Commit::on(&Snapshot::empty()).keep_unsummarized();
    let first = turns(1, 6)
        .into_iter()
        .fold(first, |b, m| b.append(m.message, m.tokens))
        .window_start(1)
        .build()
        .expect("valid");
    run.commit(&id, first).await;
    let snap = run.load(&id).await;
    assert_eq!(snap.summary, None, "a conversation starts without a summary");

    // Summary up to 2, window from 5: 1-2 are deleted, 3-4 wait for a summary.
    let s1 = Summary::new("用户的订单 LC202610060018 未发货。\n\"quoted\" {json}", 2, &Heuristic);
    let c = appending(&snap, Message::user("u7"), Some((&s1, 0)))
        .window_start(5)
        .build()
        .expect("valid");
    assert_eq!(c.delete_below(), Some(3));
    run.commit(&id, c).await;
    let snap = run.load(&id).await;
    assert_eq!(snap.summary.as_ref(), Some(&s1), "the summary round-trips exactly");
    assert_eq!(seqs(&snap.messages), vec![5, 6, 7]);
    assert_eq!(
        seqs(&run.history(&id, 0, 100).await),
        vec![3, 4, 5, 6, 7],
        "uncovered 3-4 kept"
    );

    // A commit without a summary keeps it.
    let c = appending(&snap, Message::assistant("a8"), None).build().expect("valid");
    run.commit(&id, c).await;
    let snap = run.load(&id).await;
    assert_eq!(snap.summary.as_ref(), Some(&s1), "kept by a commit without one");

    // A newer summary replaces it and lets 3-4 go.
    let s2 = Summary::new("订单 LC202610060018; refund asked.", 4, &Heuristic);
    let c = appending(&snap, Message::user("u9"), Some((&s2, 2)))
        .build()
        .expect("valid");
    run.commit(&id, c).await;
    let snap = run.load(&id).await;
    assert_eq!(snap.summary.as_ref(), Some(&s2));
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![5, 6, 7, 8, 9]);

    // A resent commit with a summary is applied once; clearing forgets the summary.
    let s3 = Summary::new("s3", 5, &Heuristic);
    let c = appending(&snap, Message::assistant("a10"), Some((&s3, 4)))
        .build()
        .expect("valid");
    let v = run.commit(&id, c.clone()).await;
    assert_eq!(run.commit(&id, c).await, v, "resent");
    assert_eq!(run.load(&id).await.summary, Some(s3));
    assert!(run.clear(&id).await);
    run.commit(&id, commit(0, turns(1, 2), 1, Retention::DropEvicted)).await;
    assert_eq!(run.load(&id).await.summary, None, "a cleared conversation starts anew");
}

/// Through `ChatMemory` with a summarizer: what leaves a 3-message window reaches the model
/// in the summary; a failing summarizer never fails a turn and loses nothing, and a later
/// turn catches up.
pub(super) async fn summaries_through_memory(run: &Run) {
    let scribe = Arc::new(Scribe::default());
    let summarizing = |model: Arc<dyn ChatModel>| {
        ChatMemory::builder(run.store.clone())
            .policy(WindowPolicy::messages(3))
            .counter(Arc::new(Heuristic))
            .summarizer(Summarizer::from_arc(model))
            .build()
            .expect("valid memory settings")
    };
    let id = run.id("summarized");
    let mem = summarizing(scribe.clone());
    mem.add(
        &id,
        [
            Message::system("after-sale"),
            Message::user("order LC202610060018"),
            Message::assistant("noted"),
        ],
    )
    .await
    .expect("turn 1");
    assert_eq!(scribe.calls(), 0, "nothing left the window: no summary call");
    mem.add(&id, [Message::user("not shipped"), Message::assistant("checking")])
        .await
        .expect("turn 2");
    assert_eq!(scribe.calls(), 1);
    let seen = mem.get(&id).await.expect("get");
    assert_eq!(seen.len(), 3, "one system message, then the window");
    let system = seen[0].text().unwrap_or_default().into_owned();
    assert!(
        system.starts_with("after-sale\n\n") && system.contains("user: order LC202610060018"),
        "{system}"
    );
    assert!(seen[1..].iter().all(|m| !m.is_system()));
    assert_eq!(
        seqs(&run.history(&id, 0, 100).await),
        vec![3, 4],
        "covered messages are deleted"
    );

    // The summarizer fails: the turn is committed, the evicted messages stay.
    let down = summarizing(Arc::new(Failing));
    down.add(&id, [Message::user("refund?"), Message::assistant("yes")])
        .await
        .expect("turn 3 despite the summary failure");
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![3, 4, 5, 6], "nothing lost");
    assert_eq!(
        run.load(&id).await.summary.map(|s| s.upto),
        Some(2),
        "the summary did not move"
    );
    // A later turn catches up: the summary covers 3 and 4 too.
    mem.add(&id, [Message::user("when?"), Message::assistant("today")])
        .await
        .expect("turn 4");
    let snap = run.load(&id).await;
    let summary = snap.summary.expect("a summary");
    assert!(summary.upto >= 6, "caught up to {}", summary.upto);
    assert!(
        summary.text.contains("user: not shipped") && summary.text.contains("user: refund?"),
        "{}",
        summary.text
    );
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![7, 8]);

    // Another conversation never sees it.
    let other = run.id("summarized-other");
    mem.add(&other, [Message::user("hello")]).await.expect("other");
    assert!(
        mem.get(&other)
            .await
            .expect("get")
            .iter()
            .all(|m| !m.text().unwrap_or_default().contains("LC2026"))
    );
}
