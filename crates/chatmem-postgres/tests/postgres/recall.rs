//! The lexical index: searches agree with the in-memory reference on conversations whose
//! common terms have more postings than a search considers, the index tables stay
//! consistent with the messages through deletions, clears, purges and expiry, and a search
//! and an indexed commit are one round trip each.

use crate::common;

use std::time::Duration;

use chatmem::recall::{MAX_POSTINGS_PER_TERM, MemoryIndex, SearchQuery, SearchResult};
use chatmem::store::{Commit, Snapshot};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_postgres::PostgresStore;
use chatmem_test::proxy::{Protocol, Proxy};
use chatmem_test::sql_suite::SqlDb;
use deadpool_postgres::tokio_postgres::Client;

fn id(name: &str) -> ConversationId {
    chatmem_test::unique_id(name)
}

/// A commit on `base` appending `texts` (user and assistant in turn), indexed unless `plain`.
fn commit_texts(base: &Snapshot, texts: &[String], window_start: u64, retention: Retention, plain: bool) -> Commit {
    let mut builder = Commit::on(base).retention(retention).index(!plain);
    for (i, text) in texts.iter().enumerate() {
        let m = if i % 2 == 0 {
            Message::user(text.as_str())
        } else {
            Message::assistant(text.as_str())
        };
        builder = builder.append(m, 3);
    }
    builder.window_start(window_start).build().expect("a valid test commit")
}

/// Commits `commit` on `store` and adds its index to `reference`, as the in-memory store
/// does (index, then forget below the delete bound).
async fn commit_both(store: &PostgresStore, id: &ConversationId, reference: &mut MemoryIndex, commit: Commit) {
    reference.add(commit.index(), 0);
    if let Some(below) = commit.delete_below() {
        reference.delete_below(below);
    }
    store.commit(id, commit).await.expect("commit");
}

/// Checks that `store` answers `query` as `reference` does.
async fn agrees(store: &PostgresStore, id: &ConversationId, reference: &MemoryIndex, query: &SearchQuery) {
    let history = store.history(id, 0, usize::MAX).await.expect("history");
    let found = store.search(id, query).await.expect("search");
    let want = reference.search(query, |seq| history.iter().find(|m| m.seq == seq).cloned());
    let what = format!("{:?} before {} limit {}", query.terms, query.before, query.limit);
    assert_eq!((found.docs, found.total_len), (want.docs, want.total_len), "{what}");
    assert_eq!(found.df, want.df, "{what}");
    let seqs = |r: &SearchResult| r.hits.iter().map(|h| h.message.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&found), seqs(&want), "{what}");
    for (got, want) in found.hits.iter().zip(&want.hits) {
        assert_eq!(
            (got.len, &got.tf, &got.message),
            (want.len, &want.tf, &want.message),
            "{what}"
        );
    }
}

/// Words drawn so that a few are very common: `w0` is in most messages, `w30` in few.
fn word(rng: &mut fastrand::Rng) -> String {
    let u = rng.f64();
    format!("w{}", (u * u * u * 32.0) as u32)
}

/// A message of random words, repeats and lengths included, or now and then one of a few
/// templates (whose messages tie).
fn text(rng: &mut fastrand::Rng, n: u64) -> String {
    match rng.u32(..10) {
        0..=2 => format!("question {n}: where is my order LC2026{n:08}?"),
        3 => format!("answer {n}: it ships tomorrow from the Hangzhou warehouse."),
        _ => (0..rng.usize(1..14)).map(|_| word(rng)).collect::<Vec<_>>().join(" "),
    }
}

/// A random query: words, template words and numbers, and now and then a term nothing holds.
fn query_terms(rng: &mut fastrand::Rng, next_seq: u64) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for _ in 0..rng.usize(1..6) {
        let term = match rng.u32(..8) {
            0..=3 => word(rng),
            4 => ["where", "is", "my", "order", "it", "ships", "question", "answer"][rng.usize(..8)].to_owned(),
            5 => rng.u64(1..next_seq.max(2)).to_string(),
            6 => format!("lc2026{:08}", rng.u64(1..next_seq.max(2))),
            _ => "absent".to_owned(),
        };
        if !terms.contains(&term) {
            terms.push(term);
        }
    }
    terms
}

/// Random queries, before bounds and limits, each checked against the reference.
async fn random_queries(
    store: &PostgresStore,
    id: &ConversationId,
    reference: &MemoryIndex,
    rng: &mut fastrand::Rng,
    next_seq: u64,
    n: usize,
) {
    for _ in 0..n {
        let before = match rng.u32(..4) {
            0 => u64::MAX,
            _ => rng.u64(1..=next_seq),
        };
        let limit = [1, 2, 5, 20, 20, 50, 300][rng.usize(..7)];
        let query = SearchQuery::new(query_terms(rng, next_seq), before, limit);
        agrees(store, id, reference, &query).await;
    }
}

/// Checks, in the raw tables of `schema`, that every conversation's index is what its
/// messages say: the totals on its row, postings of its indexed messages only, each term's
/// document frequency (its newest rank less its removed postings) their count, and nothing
/// left of a conversation that is gone.
async fn index_consistent(raw: &Client, schema: &str) {
    let s = format!("\"{schema}\"");
    let count = |sql: String| async move {
        raw.query_one(&sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
            .get::<_, i64>(0)
    };
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM {s}.chatmem_conversations AS c CROSS JOIN LATERAL (
                 SELECT count(m.index_len) AS docs, COALESCE(sum(m.index_len), 0)::bigint AS len
                 FROM {s}.chatmem_messages AS m WHERE m.conversation_id = c.id) AS m
             WHERE (c.indexed_docs, c.indexed_len) IS DISTINCT FROM (m.docs, m.len)"
        ))
        .await,
        0,
        "the totals on the conversation rows"
    );
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM {s}.chatmem_postings AS p
             LEFT JOIN {s}.chatmem_conversations AS c ON c.index_key = p.index_key
             LEFT JOIN {s}.chatmem_messages AS m ON m.conversation_id = c.id AND m.seq = p.seq
             WHERE m.index_len IS DISTINCT FROM p.len"
        ))
        .await,
        0,
        "every posting belongs to an indexed message of a conversation, with its length"
    );
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM (
                 SELECT index_key, term, count(*) AS n, (array_agg(rank ORDER BY seq DESC))[1] AS newest,
                        count(DISTINCT rank) AS ranks
                 FROM {s}.chatmem_postings GROUP BY index_key, term) AS p
             LEFT JOIN {s}.chatmem_removed_postings AS r USING (index_key, term)
             WHERE p.newest - COALESCE(r.removed, 0) <> p.n OR p.ranks <> p.n"
        ))
        .await,
        0,
        "each term's newest rank, less its removed postings, counts its postings"
    );
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM {s}.chatmem_removed_postings AS r
             WHERE NOT EXISTS (SELECT 1 FROM {s}.chatmem_conversations AS c WHERE c.index_key = r.index_key)"
        ))
        .await,
        0,
        "no removal counts of a conversation that is gone"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn searches_agree_with_the_reference_past_the_cap() {
    let url = common::pg_url();
    let schema = common::fresh_schema("recall");
    let store = common::store_in(&url, &schema).await;
    let raw = common::raw_client(&url).await;
    let seed = fastrand::u64(..);
    eprintln!("seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let conv = id("recall-deep");
    let mut reference = MemoryIndex::new();
    let mut snap = Snapshot::empty();
    // About 1,600 messages, the commonest words in more of them than a search considers
    // (`MAX_POSTINGS_PER_TERM`). Now and then a commit without index entries.
    while snap.next_seq <= 1_600 {
        let n = rng.u64(1..60);
        let texts: Vec<String> = (snap.next_seq..snap.next_seq + n).map(|s| text(&mut rng, s)).collect();
        let plain = rng.u32(..8) == 0;
        let commit = commit_texts(&snap, &texts, snap.window_start, Retention::KeepHistory, plain);
        commit_both(&store, &conv, &mut reference, commit).await;
        snap = store.load(&conv).await.expect("load");
    }
    index_consistent(&raw, &schema).await;
    let common = SearchQuery::new(vec!["w0".into()], u64::MAX, 1);
    let df = store.search(&conv, &common).await.expect("search").df[0];
    assert!(df > MAX_POSTINGS_PER_TERM as u64 + 50, "w0 is in {df} messages");
    random_queries(&store, &conv, &reference, &mut rng, snap.next_seq, 300).await;
    // Common words, under and over the cap.
    for limit in [1, 20, 1_000] {
        let query = SearchQuery::new(vec!["w0".into(), "w1".into()], u64::MAX, limit);
        agrees(&store, &conv, &reference, &query).await;
    }

    // Deleted below a bound: forgotten by the index, its totals and its terms.
    let texts: Vec<String> = (0..3).map(|i| text(&mut rng, snap.next_seq + i)).collect();
    let commit = commit_texts(&snap, &texts, 400, Retention::DropEvicted, false);
    assert_eq!(commit.delete_below(), Some(400));
    commit_both(&store, &conv, &mut reference, commit).await;
    snap = store.load(&conv).await.expect("load");
    index_consistent(&raw, &schema).await;
    random_queries(&store, &conv, &reference, &mut rng, snap.next_seq, 150).await;
    // And indexed again after it.
    let texts: Vec<String> = (0..30).map(|i| text(&mut rng, snap.next_seq + i)).collect();
    let commit = commit_texts(&snap, &texts, snap.window_start, Retention::KeepHistory, false);
    commit_both(&store, &conv, &mut reference, commit).await;
    snap = store.load(&conv).await.expect("load");
    index_consistent(&raw, &schema).await;
    random_queries(&store, &conv, &reference, &mut rng, snap.next_seq, 150).await;
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn messages_that_only_tie_are_found_newest_first() {
    // The shape of a long support conversation: every question holds the same common words,
    // one holds the order number asked about.
    let url = common::pg_url();
    let schema = common::fresh_schema("recall_tie");
    let store = common::store_in(&url, &schema).await;
    let conv = id("recall-tie");
    let mut reference = MemoryIndex::new();
    let texts: Vec<String> = (1..=2_000)
        .map(|n| {
            if n % 2 == 1 {
                format!("question {n}: where is my order LC2026{n:08}?")
            } else {
                format!("answer {n}: it ships tomorrow from the Hangzhou warehouse.")
            }
        })
        .collect();
    let commit = commit_texts(&Snapshot::empty(), &texts, 1_981, Retention::KeepHistory, false);
    commit_both(&store, &conv, &mut reference, commit).await;
    for terms in [
        chatmem::recall::query_terms("where is my order LC202600000123?"),
        chatmem::recall::query_terms("where is my order?"),
        chatmem::recall::query_terms("where is my order? it ships"),
        chatmem::recall::query_terms("question 77"),
    ] {
        for (before, limit) in [(1_981, 20), (1_981, 1), (500, 20), (u64::MAX, 100)] {
            agrees(
                &store,
                &conv,
                &reference,
                &SearchQuery::new(terms.clone(), before, limit),
            )
            .await;
        }
    }
    let found = store
        .search(
            &conv,
            &SearchQuery::new(
                chatmem::recall::query_terms("where is my order LC202600000123?"),
                1_981,
                20,
            ),
        )
        .await
        .expect("search");
    let seqs: Vec<u64> = found.hits.iter().map(|h| h.message.seq).collect();
    assert_eq!(
        seqs[..3],
        [123, 1_979, 1_977],
        "the order asked about, then the newest questions"
    );
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn the_index_goes_with_cleared_purged_and_expired_conversations() {
    let url = common::pg_url();
    let schema = common::fresh_schema("recall_gone");
    let store = common::store_in(&url, &schema).await;
    let raw = common::raw_client(&url).await;
    let rows = |table: &'static str| {
        let (raw, schema) = (&raw, &schema);
        async move {
            raw.query_one(&format!("SELECT count(*) FROM \"{schema}\".{table}"), &[])
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };
    let words = |w: &str| vec![format!("{w} one"), format!("{w} two"), format!("{w} three")];
    let expiring = |texts: Vec<String>| {
        texts
            .into_iter()
            .fold(
                Commit::on(&Snapshot::empty())
                    .index(true)
                    .retention(Retention::KeepHistory)
                    .ttl(Some(Duration::from_millis(100))),
                |b, t| b.append(Message::user(t), 1),
            )
            .build()
            .expect("a commit")
    };
    let (kept, cleared, purged, revived) = (id("kept"), id("cleared"), id("purged"), id("revived"));
    for (conv, word) in [(&kept, "kept"), (&cleared, "cleared")] {
        let commit = commit_texts(&Snapshot::empty(), &words(word), 1, Retention::KeepHistory, false);
        store.commit(conv, commit).await.expect("commit");
    }
    for (conv, word) in [(&purged, "purged"), (&revived, "revived")] {
        store.commit(conv, expiring(words(word))).await.expect("commit");
    }
    // Each conversation: 3 messages of 2 terms.
    assert_eq!(rows("chatmem_postings").await, 24);
    index_consistent(&raw, &schema).await;

    assert!(store.clear(&cleared).await.expect("clear"));
    assert_eq!(rows("chatmem_postings").await, 18);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // An expired conversation finds nothing, before and after it is started afresh.
    let search = |conv: &ConversationId, term: &str| {
        let query = SearchQuery::new(vec![term.to_owned()], u64::MAX, 10);
        let (store, conv) = (&store, conv.clone());
        async move { store.search(&conv, &query).await.expect("search") }
    };
    assert_eq!(search(&revived, "revived").await, SearchResult::default());
    let fresh = commit_texts(
        &Snapshot::empty(),
        &["walrus anew".to_owned()],
        1,
        Retention::KeepHistory,
        false,
    );
    store.commit(&revived, fresh).await.expect("start afresh");
    let found = search(&revived, "walrus").await;
    assert_eq!((found.docs, found.total_len, found.df.clone()), (1, 2, vec![1]));
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.hits[0].message.message.text().as_deref(), Some("walrus anew"));
    assert!(
        search(&revived, "one").await.hits.is_empty(),
        "the old generation is gone"
    );
    assert_eq!(store.purge_expired().await.expect("purge"), 1);
    assert_eq!(search(&purged, "purged").await, SearchResult::default());
    // Left: `kept` (3 messages of 2 terms) and the revived one (1 message of 2).
    assert_eq!(rows("chatmem_postings").await, 8);
    index_consistent(&raw, &schema).await;
    let found = search(&kept, "kept").await;
    assert_eq!((found.docs, found.hits.len()), (3, 3));
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn a_search_and_an_indexed_commit_are_one_round_trip_each() {
    let url = common::pg_url();
    let schema = common::fresh_schema("recall_rtt");
    common::store_in(&url, &schema).await; // migrate outside the count
    let proxy = Proxy::start(common::Pg::tcp_addr(&url), Protocol::Postgres).await;
    let store = PostgresStore::builder(&common::Pg::url_via(&url, proxy.addr))
        .schema(&schema)
        .pool_size(1)
        .connect()
        .await
        .expect("connect through the proxy");
    let conv = id("recall-rtt");
    macro_rules! trips {
        ($op:expr) => {{
            let before = proxy.round_trips();
            let out = $op.await;
            (proxy.round_trips() - before, out)
        }};
    }
    let texts: Vec<String> = (1..=2_000)
        .map(|n| format!("message {n} about order LC2026{n:08} and refund {}", n % 7))
        .collect();
    let create = commit_texts(&Snapshot::empty(), &texts, 1_981, Retention::KeepHistory, false);
    let (n, v) = trips!(store.commit(&conv, create));
    assert_eq!((n, v.expect("create")), (1, 1), "an indexed commit of 2,000 messages");
    let snap = store.load(&conv).await.expect("load");
    let update = commit_texts(
        &snap,
        &["refund order 5".to_owned(), "it is refunded".to_owned()],
        1_983,
        Retention::KeepHistory,
        false,
    );
    let (n, v) = trips!(store.commit(&conv, update.clone()));
    assert_eq!((n, v.expect("update")), (1, 2), "an indexed turn");
    let (n, v) = trips!(store.commit(&conv, update));
    assert_eq!((n, v.expect("resent")), (1, 2), "the same commit again");
    let stale = commit_texts(&snap, &["stale".to_owned()], 1_983, Retention::KeepHistory, false);
    let (n, e) = trips!(store.commit(&conv, stale));
    assert!(e.expect_err("stale").is_conflict());
    assert_eq!(n, 1, "an indexed commit that loses its version check");
    let snap = store.load(&conv).await.expect("load");
    let drop = commit_texts(
        &snap,
        &["order dropped".to_owned()],
        1_990,
        Retention::DropEvicted,
        false,
    );
    let (n, v) = trips!(store.commit(&conv, drop));
    assert_eq!(
        (n, v.expect("drop")),
        (1, 3),
        "an indexed commit deleting indexed messages"
    );

    for (terms, what) in [
        (vec!["lc202600000123", "order"], "a rare and a common term"),
        (vec!["order", "refund", "about", "message"], "common terms only"),
        (vec!["absent"], "a term nothing holds"),
        (vec![], "no terms"),
    ] {
        let query = SearchQuery::new(terms.iter().map(|t| (*t).to_owned()).collect(), u64::MAX, 20);
        let (n, found) = trips!(store.search(&conv, &query));
        let found = found.expect("search");
        assert_eq!(n, 1, "a search: {what}");
        assert_eq!(found.docs, 2_003 - 1_990 + 1, "{what}: the messages from 1,990 on");
    }
    let (n, found) = trips!(store.search(&id("never"), &SearchQuery::new(vec!["order".into()], 10, 20)));
    assert_eq!(
        (n, found.expect("search")),
        (1, SearchResult::default()),
        "an unknown conversation"
    );
    common::drop_schema(&url, &schema).await;
}

/// The hits of an indexed conversation carry the time of the commit that indexed them.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn hits_carry_their_commits_time() {
    let url = common::pg_url();
    let schema = common::fresh_schema("recall_at");
    let store = common::store_in(&url, &schema).await;
    let conv = id("recall-at");
    let first = commit_texts(
        &Snapshot::empty(),
        &["walrus one".to_owned()],
        1,
        Retention::KeepHistory,
        false,
    );
    store.commit(&conv, first).await.expect("commit");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let snap = store.load(&conv).await.expect("load");
    let second = commit_texts(&snap, &["walrus two".to_owned()], 1, Retention::KeepHistory, false);
    store.commit(&conv, second).await.expect("commit");
    let found = store
        .search(&conv, &SearchQuery::new(vec!["walrus".into()], u64::MAX, 10))
        .await
        .expect("search");
    let at: Vec<(u64, i64)> = found.hits.iter().map(|h| (h.message.seq, h.at_micros)).collect();
    assert_eq!(at.len(), 2);
    assert_eq!(at[0].0, 2, "a tie goes to the newer");
    assert!(at[0].1 >= at[1].1 + 20_000, "each commit's own time: {at:?}");
    let listed = store
        .recent(&chatmem::store::RecentQuery::new(conv.as_str(), None, 1))
        .await
        .expect("recent");
    assert_eq!(
        listed.conversations[0].updated_micros, at[0].1,
        "the time the commit recorded as the conversation's"
    );
    common::drop_schema(&url, &schema).await;
}
