//! Listing by recency: newest first, by prefix, paged, with the times a store records.

use std::time::Duration;

use chatmem::store::{RecentPage, now_micros};
use chatmem::{ConversationId, Retention};

use super::harness::{Run, commit, commit_full, creating, turns};

fn ids(page: &RecentPage) -> Vec<&ConversationId> {
    page.conversations.iter().map(|c| &c.id).collect()
}

/// A database server's clock may differ from the test's a little (same machine, or CI's).
const SKEW_MICROS: i64 = 60_000_000;

pub(super) async fn recent(run: &Run) {
    let started = now_micros();
    let [a, b, c] = ["recent/a", "recent/b", "recent/c"].map(|n| run.id(n));
    for id in [&a, &b, &c] {
        run.commit(id, commit(0, turns(1, 2), 1, Retention::KeepHistory)).await;
        // Apart by more than a clock tick of any store.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A later commit makes `a` the newest, with a TTL of an hour.
    let hour = Duration::from_secs(3600);
    run.commit(
        &a,
        commit_full(1, 3, None, turns(3, 2), 1, Retention::KeepHistory, Some(hour)),
    )
    .await;
    let ended = now_micros();

    let page = run.recent("recent/", None, 10).await;
    assert_eq!(ids(&page), vec![&a, &c, &b], "newest first");
    assert_eq!(page.next, None);
    for listed in &page.conversations {
        assert!(
            (started - SKEW_MICROS..=ended + SKEW_MICROS).contains(&listed.updated_micros),
            "{listed:?} was written between {started} and {ended}"
        );
    }
    assert!(
        page.conversations
            .windows(2)
            .all(|w| w[0].updated_micros >= w[1].updated_micros)
    );
    let newest = &page.conversations[0];
    let expires = newest.expires_micros.expect("a's TTL");
    let after = expires - newest.updated_micros;
    assert!(
        (3_599_000_000..=3_601_000_000).contains(&after),
        "a expires an hour after its last commit, not {after} µs after"
    );
    assert!(page.conversations[1..].iter().all(|c| c.expires_micros.is_none()));

    // A page at a time, from each page's cursor; limit 0 is taken as 1.
    for limit in [0, 1, 2] {
        let mut seen = Vec::new();
        let mut before = None;
        loop {
            let page = run.recent("recent/", before.as_ref(), limit).await;
            assert!(page.conversations.len() <= limit.max(1));
            seen.extend(page.conversations.iter().map(|c| c.id.clone()));
            match page.next {
                Some(next) => before = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, vec![a.clone(), c.clone(), b.clone()], "paging {limit} at a time");
    }
    let first = page.conversations[0].cursor();
    assert_eq!(ids(&run.recent("recent/", Some(&first), 10).await), vec![&c, &b]);

    // The prefix is matched as text: `%` and `_` are not patterns, and case counts.
    let [percent, underscore, upper] = ["recent/%x", "recent/_y", "recent/A"].map(|n| run.id(n));
    for id in [&percent, &underscore, &upper] {
        run.commit(id, creating(None, turns(1, 1), None)).await;
    }
    assert_eq!(ids(&run.recent("recent/%", None, 10).await), vec![&percent]);
    assert_eq!(ids(&run.recent("recent/_", None, 10).await), vec![&underscore]);
    assert_eq!(ids(&run.recent("recent/A", None, 10).await), vec![&upper]);
    assert_eq!(ids(&run.recent("recent/a", None, 10).await), vec![&a]);
    assert!(run.recent("recent/zz", None, 10).await.conversations.is_empty());

    // A cleared conversation is not listed.
    assert!(run.clear(&c).await);
    let listed = run.recent("recent/", None, 10).await;
    assert!(!ids(&listed).contains(&&c), "{listed:?}");
    assert_eq!(listed.conversations.len(), 5);
}
