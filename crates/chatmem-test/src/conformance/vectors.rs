//! Recall's vectors: a store that keeps them writes one only on the message it was made of,
//! replaces it, compares only vectors of one model and dimension, ranks them by the core's
//! rule, pages through what lacks one, keeps every conversation's to itself (hostile ids
//! included) and forgets them with their messages.

use chatmem::recall::{MessageVector, SearchQuery, Vector, rank_by_similarity};
use chatmem::store::Commit;
use chatmem::{ConversationId, Message, Retention};

use super::harness::Run;

/// A vector of `model` pointing mostly along axis `axis` of `dim`.
fn along(model: &str, dim: usize, axis: usize, lean: f32) -> Vector {
    let values = (0..dim).map(|i| if i == axis { 1.0 } else { lean }).collect();
    Vector::new(model, values).expect("a valid test vector")
}

async fn commit_texts(run: &Run, id: &ConversationId, texts: &[&str], index: bool) -> Vec<(u64, Message)> {
    let base = run.load(id).await;
    let mut builder = Commit::on(&base).retention(Retention::KeepHistory).index(index);
    let mut out = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let m = if i % 2 == 0 {
            Message::user(*text)
        } else {
            Message::assistant(*text)
        };
        out.push((base.next_seq + i as u64, m.clone()));
        builder = builder.append(m, 2);
    }
    let next = base.next_seq + texts.len() as u64;
    run.commit(
        id,
        builder
            .window_start(next.saturating_sub(1))
            .build()
            .expect("a valid commit"),
    )
    .await;
    out
}

async fn put(run: &Run, id: &ConversationId, vectors: &[MessageVector]) -> usize {
    run.store
        .put_vectors(id, vectors)
        .await
        .unwrap_or_else(|e| panic!("put_vectors {id:?}: {e}"))
}

async fn by_vector(run: &Run, id: &ConversationId, v: &Vector, before: u64, limit: usize) -> Vec<(u64, f64)> {
    let query = SearchQuery::new(Vec::new(), before, limit).with_vector(v.clone());
    let found = run
        .store
        .search(id, &query)
        .await
        .unwrap_or_else(|e| panic!("search {id:?}: {e}"));
    found
        .vector_hits
        .iter()
        .map(|h| (h.message.seq, h.similarity))
        .collect()
}

pub(super) async fn recall_vectors(run: &Run) {
    if !run.store.keeps_vectors() {
        return;
    }
    let id = run.id("vectors/main");
    let said = commit_texts(run, &id, &["north", "east", "south", "west", "up", "down"], true).await;
    let plain = commit_texts(run, &id, &["not indexed"], false).await;
    let dim = 4;
    let v = |seq: usize, axis: usize| MessageVector::new(said[seq].0, &said[seq].1, along("m", dim, axis, 0.1));

    // Kept only where the vector fits the indexed message at its seq.
    let other_text = MessageVector::new(said[0].0, &Message::user("someone else"), along("m", dim, 0, 0.0));
    let unknown_seq = MessageVector::new(999, &said[0].1, along("m", dim, 0, 0.0));
    let unindexed = MessageVector::new(plain[0].0, &plain[0].1, along("m", dim, 0, 0.0));
    assert_eq!(
        put(run, &id, &[other_text, unknown_seq, unindexed]).await,
        0,
        "nothing fits"
    );
    assert_eq!(put(run, &id, &[v(0, 0), v(1, 1), v(2, 2), v(3, 3), v(4, 0)]).await, 5);
    // Another model's vector on the last message, and a vector of another dimension.
    let foreign = MessageVector::new(said[5].0, &said[5].1, along("other", dim, 0, 0.0));
    assert_eq!(put(run, &id, &[foreign]).await, 1);

    // Ranked as the core ranks: similarity, ties by seq descending; the other model never.
    let q = along("m", dim, 0, 0.0);
    let got = by_vector(run, &id, &q, u64::MAX, 10).await;
    let want = rank_by_similarity(
        [0, 1, 2, 3, 4].map(|i| (said[i].0, q.dot(along("m", dim, [0, 1, 2, 3, 0][i], 0.1).values()))),
        10,
    );
    assert_eq!(
        got.iter().map(|h| h.0).collect::<Vec<_>>(),
        want.iter().map(|h| h.0).collect::<Vec<_>>()
    );
    for ((_, g), (_, w)) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-6, "similarity {g} vs {w}");
    }
    assert_eq!(got[0].0, said[4].0, "a tie goes to the newer message");
    assert!(
        by_vector(run, &id, &along("m", 3, 0, 0.0), u64::MAX, 10)
            .await
            .is_empty(),
        "another dimension"
    );
    assert_eq!(
        by_vector(run, &id, &along("other", dim, 0, 0.0), u64::MAX, 10)
            .await
            .len(),
        1
    );
    // `before` and `limit`.
    let early = by_vector(run, &id, &q, said[2].0, 10).await;
    assert_eq!(early.iter().map(|h| h.0).collect::<Vec<_>>(), [said[0].0, said[1].0]);
    assert_eq!(by_vector(run, &id, &q, u64::MAX, 2).await.len(), 2);

    // A new vector replaces the old.
    assert_eq!(put(run, &id, &[v(1, 0)]).await, 1);
    let got = by_vector(run, &id, &along("m", dim, 1, 0.0), u64::MAX, 1).await;
    assert_ne!(got[0].0, said[1].0, "the replaced vector no longer points that way");

    // What lacks a vector of a model and dimension, oldest first, after a cursor.
    let missing = |model: &'static str, d: usize, after: u64| {
        let (store, id) = (run.store.clone(), id.clone());
        async move {
            store
                .unembedded(&id, model, d, after, 10)
                .await
                .expect("unembedded")
                .iter()
                .map(|m| m.message.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        missing("m", dim, 0).await,
        [said[5].0],
        "only the other model's, and no unindexed one"
    );
    assert_eq!(missing("other", dim, 0).await, [0, 1, 2, 3, 4].map(|i| said[i].0));
    assert_eq!(missing("other", dim, said[2].0).await, [3, 4].map(|i| said[i].0));
    assert_eq!(missing("m", 8, 0).await.len(), 6, "another dimension lacks them all");

    // Hostile ids: each conversation keeps its own; a query under one never finds another's.
    let hostile = ["%", "_", "*", "\"", "'", "NEAR", "OR", "-", "^", "a%b_c*"];
    for (i, name) in hostile.iter().enumerate() {
        let hid = run.id(&format!("vectors/{name}"));
        let s = commit_texts(run, &hid, &[&format!("hostile {i}")], true).await;
        let mv = MessageVector::new(s[0].0, &s[0].1, along("m", dim, 0, 0.0));
        assert_eq!(put(run, &hid, &[mv]).await, 1, "{name:?}");
    }
    for name in hostile {
        let hid = run.id(&format!("vectors/{name}"));
        let hits = by_vector(run, &hid, &q, u64::MAX, 100).await;
        assert_eq!(hits.len(), 1, "{name:?} sees only its own");
    }
    assert_eq!(
        by_vector(run, &id, &q, u64::MAX, 100).await.len(),
        5,
        "the first sees only its own"
    );

    // Gone with their messages: cleared, and the conversation started again lacks them.
    assert!(run.clear(&id).await);
    assert!(by_vector(run, &id, &q, u64::MAX, 10).await.is_empty());
    let again = commit_texts(run, &id, &["north"], true).await;
    assert_eq!(again[0].0, said[0].0, "numbered afresh");
    assert!(
        by_vector(run, &id, &q, u64::MAX, 10).await.is_empty(),
        "a new conversation, no vectors"
    );
    assert_eq!(missing("m", dim, 0).await, [again[0].0]);
    let fresh = run.id("vectors/none");
    assert!(by_vector(run, &fresh, &q, u64::MAX, 10).await.is_empty());
    assert_eq!(put(run, &fresh, &[v(0, 0)]).await, 0, "no conversation, nothing kept");
}
