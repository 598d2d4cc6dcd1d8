//! Users' facts on a SQL server store, beyond the conformance steps: one round trip per call
//! on the wire (counted by the loopback [`Proxy`]), a facts commit whose reply is lost applied
//! once, and writers at one version of whom exactly one wins. Each store's own tests check
//! how it reports damaged rows (that needs its own SQL).

use std::sync::Arc;

use chatmem::facts::{Changed, FactLimits, FactSet, add};
use chatmem::store::{FactsCommit, StoredFacts};
use chatmem::{Store, UserId};

use super::{Settings, SqlDb};
use crate::proxy::{Proxy, ReplyLoss};

fn user(name: &str) -> UserId {
    UserId::new(crate::unique_id(name).as_str()).expect("a conversation id is a user id")
}

/// The commit adding `text` by hand to `loaded`.
fn adding(loaded: &StoredFacts, text: &str) -> FactsCommit {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1_000).expect("add");
    FactsCommit::new(loaded, added).expect("valid").expect("a change")
}

fn texts(facts: &StoredFacts) -> Vec<&str> {
    facts.set.facts().iter().map(|f| f.text.as_str()).collect()
}

/// A store in a fresh namespace (migrated outside the count), through a new loopback proxy,
/// with one pooled connection whose facts statements are prepared when the store prepares per
/// connection; the store's URL and namespace with it.
async fn proxied<D: SqlDb>(tag: &str) -> (String, String, Proxy, D::Store) {
    let url = D::url();
    let namespace = D::fresh_namespace(tag);
    D::store_in(&url, &namespace).await;
    let proxy = Proxy::start(D::tcp_addr(&url), D::PROTOCOL).await;
    let store = D::connect(
        &D::url_via(&url, proxy.addr),
        Settings::namespace(&namespace).pool_size(1),
    )
    .await
    .expect("connect through the proxy");
    if D::PREPARES_PER_CONNECTION {
        // Each statement is prepared once per connection, at its first use there: one more
        // round trip then, which the warm-up takes (on the pool's one connection).
        let warm = user("facts-warm");
        store.load_facts(&warm).await.expect("warm load");
        let commit = adding(&StoredFacts::default(), "Warm");
        store.commit_facts(&warm, commit).await.expect("warm commit");
        store.fact_history(&warm, 1).await.expect("warm history");
        store.forget_user(&warm).await.expect("warm forget");
    }
    (url, namespace, proxy, store)
}

/// Each facts call is one round trip: a load (of an unknown user, of 200 facts), a commit
/// (of 200 facts at once, of one more, a lost version check), a fact's history, forgetting.
pub async fn facts_calls_are_one_round_trip_each<D: SqlDb>() {
    let (url, namespace, proxy, store) = proxied::<D>("facts_rtt").await;
    let user = user("facts-rtt");
    macro_rules! trips {
        ($op:expr) => {{
            let before = proxy.round_trips();
            let out = $op.await;
            (proxy.round_trips() - before, out)
        }};
    }
    let (n, loaded) = trips!(store.load_facts(&user));
    assert_eq!(
        (n, loaded.expect("load")),
        (1, StoredFacts::default()),
        "an unknown user"
    );
    let mut set = FactSet::default();
    let mut changes = Vec::new();
    for i in 0..200 {
        let (added, _) = add(&set, &format!("Fact number {i}"), None, &FactLimits::default(), i).expect("add");
        set = added.set;
        changes.extend(added.changes);
    }
    let create = FactsCommit::new(&StoredFacts::default(), Changed { set, changes })
        .expect("valid")
        .expect("a change");
    let (n, v) = trips!(store.commit_facts(&user, create));
    assert_eq!((n, v.expect("create")), (1, 1), "a commit of 200 facts");
    let (n, loaded) = trips!(store.load_facts(&user));
    let loaded = loaded.expect("load");
    assert_eq!(
        (n, loaded.set.len(), loaded.version),
        (1, 200, 1),
        "a load of 200 facts"
    );
    let (n, v) = trips!(store.commit_facts(&user, adding(&loaded, "One more")));
    assert_eq!((n, v.expect("update")), (1, 2), "a commit on them");
    let (n, e) = trips!(store.commit_facts(&user, adding(&loaded, "Stale")));
    assert!(e.expect_err("stale").is_conflict());
    assert_eq!(n, 1, "a lost version check");
    let (n, history) = trips!(store.fact_history(&user, 201));
    assert_eq!((n, history.expect("history").len()), (1, 1));
    let (n, forgot) = trips!(store.forget_user(&user));
    assert_eq!((n, forgot.expect("forget")), (1, true));
    D::drop_namespace(&url, &namespace).await;
}

/// A facts commit the server applied but whose reply the client never saw is resent once
/// and recognised as applied (by its token): written once, when it creates the user's facts
/// and when it changes them.
pub async fn a_facts_commit_whose_reply_is_lost_is_applied_once<D: SqlDb>() {
    let (url, namespace, proxy, store) = proxied::<D>("facts_lost").await;
    let user = user("facts-lost");
    let mut loaded = StoredFacts::default();
    for (text, version) in [("Prefers email", 1), ("Works nights", 2)] {
        proxy.lose_next_reply(ReplyLoss::Close);
        let before = proxy.statements();
        let v = store
            .commit_facts(&user, adding(&loaded, text))
            .await
            .unwrap_or_else(|e| panic!("a facts commit that landed is reported as failed: {e}"));
        assert!(proxy.reply_lost(), "the proxy did not see the reply");
        assert_eq!(proxy.statements() - before, 2, "sent, then resent once");
        assert_eq!(v, version);
        loaded = store.load_facts(&user).await.expect("load");
        assert_eq!(loaded.version, version);
    }
    assert_eq!(texts(&loaded), ["Prefers email", "Works nights"]);
    for fact in [1, 2] {
        let history = store.fact_history(&user, fact).await.expect("history");
        assert_eq!(history.len(), 1, "fact {fact}'s history written once");
    }
    // A stale commit still conflicts.
    let stale = StoredFacts {
        version: 1,
        ..loaded.clone()
    };
    let e = store
        .commit_facts(&user, adding(&stale, "Stale"))
        .await
        .expect_err("stale");
    assert!(e.is_conflict(), "{e}");
    assert_eq!(store.load_facts(&user).await.expect("load"), loaded);
    D::drop_namespace(&url, &namespace).await;
}

/// [`check_one_facts_writer_wins`](crate::check_one_facts_writer_wins) on a store in a
/// fresh namespace.
pub async fn of_facts_writers_at_one_version_exactly_one_wins<D: SqlDb>() {
    let url = D::url();
    let namespace = D::fresh_namespace("facts_race");
    crate::check_one_facts_writer_wins(Arc::new(D::store_in(&url, &namespace).await)).await;
    D::drop_namespace(&url, &namespace).await;
}
