//! Recall: a store that searches indexes a commit's messages in that commit, answers a search
//! exactly as the in-memory reference index does, treats terms as plain strings, keeps every
//! conversation's index to itself, and forgets what it forgets of the messages.

use std::time::Duration;

use chatmem::recall::{MemoryIndex, SearchQuery, SearchResult, query_terms};
use chatmem::store::{Commit, Snapshot, StoreErrorKind};
use chatmem::{ConversationId, Message, Recall, Retention};

use super::harness::Run;

/// A commit appending `texts` (user and assistant in turn) on `base`, indexed, the window from
/// `window_start`.
fn indexed(base: &Snapshot, texts: &[&str], window_start: u64, retention: Retention) -> Commit {
    let mut builder = Commit::on(base).retention(retention).index(true);
    for (i, text) in texts.iter().enumerate() {
        let m = if i % 2 == 0 {
            Message::user(*text)
        } else {
            Message::assistant(*text)
        };
        builder = builder.append(m, 3);
    }
    builder.window_start(window_start).build().expect("a valid test commit")
}

async fn search(run: &Run, id: &ConversationId, terms: &[&str], before: u64, limit: usize) -> SearchResult {
    let query = SearchQuery::new(terms.iter().map(|t| (*t).to_string()).collect(), before, limit);
    run.store
        .search(id, &query)
        .await
        .unwrap_or_else(|e| panic!("search {id:?} for {terms:?}: {e}"))
}

/// The hits' seqs.
fn seqs(found: &SearchResult) -> Vec<u64> {
    found.hits.iter().map(|h| h.message.seq).collect()
}

/// Checks `found` against what the reference index answers for the same query, the messages
/// looked up in `history`.
fn agrees(
    found: &SearchResult,
    reference: &MemoryIndex,
    history: &[chatmem::store::StoredMessage],
    query: &SearchQuery,
) {
    let want = reference.search(query, |seq| history.iter().find(|m| m.seq == seq).cloned());
    assert_eq!(
        (found.docs, found.total_len),
        (want.docs, want.total_len),
        "statistics for {:?}",
        query.terms
    );
    assert_eq!(found.df, want.df, "document frequencies for {:?}", query.terms);
    assert_eq!(
        seqs(found),
        seqs(&want),
        "hits for {:?} before {}",
        query.terms,
        query.before
    );
    for (got, want) in found.hits.iter().zip(&want.hits) {
        assert_eq!((got.len, &got.tf), (want.len, &want.tf), "seq {}", got.message.seq);
        assert_eq!(
            got.message, want.message,
            "seq {}: the hit is the stored message",
            got.message.seq
        );
    }
}

const CORPUS: [&str; 12] = [
    "我的订单是 LC202610060018，还没发货。",
    "已为您催促仓库尽快发货。",
    "Can order LC202610060018 be refunded?",
    "Yes, a refund for an order takes three days.",
    "refund refund refund, said the parrot",
    "The parrot is not an order.",
    "NEAR OR AND NOT operators are words here",
    "a_b a-b \"quoted\" o'clock 100% *starred* ^caret",
    "订单 订单 订单",
    "nothing to see",
    "order order",
    "last words about the weather",
];

pub(super) async fn recall_index(run: &Run) {
    if !run.store.searches() {
        return;
    }
    let id = run.id("recall/index");
    let now = chatmem::store::now_micros();
    let first = indexed(&Snapshot::empty(), &CORPUS[..6], 1, Retention::KeepHistory);
    let mut reference = MemoryIndex::new();
    reference.add(first.index(), 0);
    run.commit(&id, first).await;
    // Searchable the moment the commit returns, before any other call.
    let found = search(run, &id, &["lc202610060018"], u64::MAX, 10).await;
    assert_eq!(
        seqs(&found),
        [3, 1],
        "both order messages, the newer first on a tie or better"
    );
    for hit in &found.hits {
        assert!(
            (now - 600_000_000..now + 600_000_000).contains(&hit.at_micros),
            "seq {}: the commit's time, in Unix microseconds (got {})",
            hit.message.seq,
            hit.at_micros
        );
    }
    let snap = run.load(&id).await;
    let second = indexed(&snap, &CORPUS[6..], 7, Retention::KeepHistory);
    reference.add(second.index(), 0);
    run.commit(&id, second).await;
    // A commit without index entries adds none.
    let snap = run.load(&id).await;
    let plain = Commit::on(&snap)
        .retention(Retention::KeepHistory)
        .append(Message::user("order refund parrot unindexed"), 3)
        .build()
        .expect("a commit");
    run.commit(&id, plain).await;
    let history = run.history(&id, 0, 100).await;
    assert_eq!(history.len(), 13);

    let queries: Vec<Vec<String>> = vec![
        query_terms("LC202610060018 能退吗？"),
        query_terms("can the order be refunded"),
        query_terms("订单"),
        query_terms("refund parrot order"),
        query_terms("NEAR OR"),
        query_terms("a_b o'clock 100"),
        vec!["unindexed".into()],
        vec!["absent".into(), "order".into()],
        vec![],
    ];
    for terms in &queries {
        for (before, limit) in [(u64::MAX, 100), (u64::MAX, 2), (7, 100), (4, 1), (1, 10)] {
            let query = SearchQuery::new(terms.clone(), before, limit);
            let found = run
                .store
                .search(&id, &query)
                .await
                .unwrap_or_else(|e| panic!("search {terms:?}: {e}"));
            assert!(found.hits.iter().all(|h| h.message.seq < before), "only seq < {before}");
            assert!(found.hits.len() <= limit);
            agrees(&found, &reference, &history, &query);
        }
    }
    assert_eq!(search(run, &id, &["unindexed"], u64::MAX, 10).await.hits.len(), 0);
    assert_eq!(search(run, &id, &["order"], u64::MAX, 10).await.docs, 12);

    // The same commit sent again is stored once: so is its index.
    let snap = run.load(&id).await;
    let again = indexed(&snap, &["resent order"], 14, Retention::KeepHistory);
    let version = run.commit(&id, again.clone()).await;
    assert_eq!(
        run.store
            .commit(&id, again)
            .await
            .expect("a resend is answered as applied"),
        version
    );
    let found = search(run, &id, &["resent"], u64::MAX, 10).await;
    assert_eq!((found.docs, seqs(&found)), (13, vec![14]));
    // A commit that loses its version check indexes nothing.
    let stale = indexed(&snap, &["stale zeppelin"], 14, Retention::KeepHistory);
    let e = run
        .store
        .commit(&id, stale)
        .await
        .expect_err("a stale commit conflicts");
    assert_eq!(e.kind(), StoreErrorKind::Conflict);
    assert!(search(run, &id, &["zeppelin"], u64::MAX, 10).await.hits.is_empty());
}

pub(super) async fn recall_terms_are_plain_strings(run: &Run) {
    if !run.store.searches() {
        return;
    }
    let id = run.id("recall/plain");
    run.commit(&id, indexed(&Snapshot::empty(), &CORPUS, 1, Retention::KeepHistory))
        .await;
    // What a query language, LIKE or a glob would make of these must not happen: each term is
    // compared as the exact string it is.
    for hostile in [
        "\"",
        "*",
        "-",
        "^",
        "%",
        "_",
        "'",
        "\\",
        "NEAR",
        "OR",
        "AND",
        "NOT",
        "a%",
        "a_",
        "a*",
        "\"order\"",
        "order*",
        "-order",
        "^order",
        "near(order)",
        "order OR refund",
        "a_c",
        "a?b",
        "[a]",
        "{tag}",
        "$1",
        "?1",
        ":x",
        "' OR 1=1 --",
        "",
    ] {
        let found = search(run, &id, &[hostile], u64::MAX, 10).await;
        assert!(found.hits.is_empty(), "{hostile:?} matched {:?}", seqs(&found));
        assert_eq!(found.df, [0], "{hostile:?}");
    }
    // Lower-case words are terms like any other, operators of query languages included.
    assert_eq!(seqs(&search(run, &id, &["near"], u64::MAX, 10).await), [7]);
    assert_eq!(seqs(&search(run, &id, &["a_b"], u64::MAX, 10).await), [8]);
    assert_eq!(seqs(&search(run, &id, &["o'clock"], u64::MAX, 10).await), [8]);
    let long = "x".repeat(chatmem::recall::MAX_TERM_BYTES);
    assert!(search(run, &id, &[long.as_str()], u64::MAX, 10).await.hits.is_empty());
}

pub(super) async fn recall_caps_common_terms(run: &Run) {
    if !run.store.searches() {
        return;
    }
    use chatmem::recall::MAX_POSTINGS_PER_TERM;
    let id = run.id("recall/common");
    let n = MAX_POSTINGS_PER_TERM as u64 + 100;
    let texts: Vec<String> = (1..=n)
        .map(|seq| match seq {
            5 => "common rare".to_string(),
            s if s % 7 == 0 => format!("common common filler{s}"),
            s => format!("common filler{s}"),
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let first = indexed(&Snapshot::empty(), &refs, 1, Retention::KeepHistory);
    let mut reference = MemoryIndex::new();
    reference.add(first.index(), 0);
    run.commit(&id, first).await;
    let history = run.history(&id, 0, n as usize + 1).await;
    for (terms, before, limit) in [
        (vec!["common"], u64::MAX, 10),
        (vec!["common"], n - 50, 600),
        (vec!["common", "rare"], u64::MAX, 10),
        (vec!["rare", "common", "filler3"], 300, 5),
    ] {
        let query = SearchQuery::new(terms.iter().map(|t| (*t).to_string()).collect(), before, limit);
        let found = run
            .store
            .search(&id, &query)
            .await
            .unwrap_or_else(|e| panic!("search {terms:?}: {e}"));
        agrees(&found, &reference, &history, &query);
    }
    // The old message with the rare term is found, its common term past the cap not counted.
    let found = search(run, &id, &["common", "rare"], u64::MAX, 1).await;
    assert_eq!((seqs(&found), found.hits[0].tf.clone()), (vec![5], vec![0, 1]));
    assert_eq!(found.df, [n, 1], "document frequencies are exact");
}

pub(super) async fn recall_isolation(run: &Run) {
    if !run.store.searches() {
        return;
    }
    let names = [
        "recall/iso/a",
        "recall/iso/a%",
        "recall/iso/a_",
        "recall/iso/a*",
        "recall/iso/ab",
        "recall/iso/\"a\"",
        "recall/iso/'a'",
        "recall/iso/a NEAR b",
        "recall/iso/a OR b",
        "recall/iso/-a",
        "recall/iso/^a",
        "recall/iso/{a}",
        "recall/iso/a\\",
        "recall/iso/会话",
    ];
    let ids: Vec<ConversationId> = names.iter().map(|n| run.id(n)).collect();
    for (i, id) in ids.iter().enumerate() {
        let own = format!("marker{i} walrus words order refund");
        run.commit(
            id,
            indexed(
                &Snapshot::empty(),
                &[own.as_str(), "walrus reply"],
                1,
                Retention::KeepHistory,
            ),
        )
        .await;
    }
    for (i, id) in ids.iter().enumerate() {
        let found = search(run, id, &["walrus", "order", &format!("marker{i}")], u64::MAX, 100).await;
        assert_eq!(seqs(&found), [1, 2], "{id:?}");
        assert_eq!(found.docs, 2, "{id:?} counts only its own messages");
        let text = found.hits[0].message.message.text().unwrap_or_default().into_owned();
        assert!(
            text.starts_with(&format!("marker{i} ")),
            "{id:?} found another's message: {text}"
        );
        for j in (0..ids.len()).filter(|&j| j != i) {
            let other = format!("marker{j}");
            assert!(
                search(run, id, &[other.as_str()], u64::MAX, 10).await.hits.is_empty(),
                "{id:?} sees {other}"
            );
        }
    }
    // An unknown conversation finds nothing.
    let none = search(run, &run.id("recall/iso/never"), &["walrus"], u64::MAX, 10).await;
    assert_eq!((none.docs, none.hits.len()), (0, 0));
}

pub(super) async fn recall_forgets_with_its_messages(run: &Run) {
    if !run.store.searches() {
        return;
    }
    // Cleared: gone, and a new conversation of the same id starts with an empty index.
    let id = run.id("recall/cleared");
    run.commit(
        &id,
        indexed(
            &Snapshot::empty(),
            &["walrus one", "walrus two"],
            1,
            Retention::KeepHistory,
        ),
    )
    .await;
    assert!(run.clear(&id).await);
    let found = search(run, &id, &["walrus"], u64::MAX, 10).await;
    assert_eq!((found.docs, found.hits.len()), (0, 0));
    run.commit(
        &id,
        indexed(&Snapshot::empty(), &["walrus three"], 1, Retention::KeepHistory),
    )
    .await;
    let found = search(run, &id, &["walrus"], u64::MAX, 10).await;
    assert_eq!((found.docs, seqs(&found)), (1, vec![1]));

    // Deleted below the window start: gone from the index too.
    let id = run.id("recall/dropped");
    run.commit(
        &id,
        indexed(
            &Snapshot::empty(),
            &["otter one", "otter two", "otter three"],
            1,
            Retention::KeepHistory,
        ),
    )
    .await;
    let snap = run.load(&id).await;
    run.commit(&id, indexed(&snap, &["otter four"], 3, Retention::DropEvicted))
        .await;
    let found = search(run, &id, &["otter"], u64::MAX, 10).await;
    assert_eq!((found.docs, seqs(&found)), (2, vec![4, 3]));

    // Expired: gone.
    let id = run.id("recall/expired");
    let commit = Commit::on(&Snapshot::empty())
        .index(true)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_millis(300)))
        .append(Message::user("narwhal"), 1)
        .build()
        .expect("a commit");
    run.commit(&id, commit).await;
    assert_eq!(seqs(&search(run, &id, &["narwhal"], u64::MAX, 10).await), [1]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let found = search(run, &id, &["narwhal"], u64::MAX, 10).await;
    assert_eq!(
        (found.docs, found.hits.len()),
        (0, 0),
        "an expired conversation finds nothing"
    );
}

pub(super) async fn recall_through_memory(run: &Run) {
    if !run.store.searches() {
        return;
    }
    let memory = super::harness::recalling(run, 2, Recall::new(3).expect("k"));
    let id = run.id("recall/seed");
    memory
        .add(
            &id,
            [
                Message::user("我的订单是 LC202610060018，还没发货。"),
                Message::assistant("已为您催促。"),
            ],
        )
        .await
        .expect("add");
    memory
        .add(&id, [Message::user("好的谢谢"), Message::assistant("不客气")])
        .await
        .expect("add");
    for question in ["LC202610060018 能退吗？", "订单能退吗？"] {
        let mut turn = memory.begin(&id).await.expect("begin");
        turn.push(Message::user(question));
        let recalled = turn.recall().await.expect("recall");
        let injected: Vec<u64> = recalled.injected().map(|c| c.seq).collect();
        assert_eq!(injected, [1], "{question}: {recalled:?}");
    }
}
