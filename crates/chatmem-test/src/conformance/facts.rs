//! Facts, for a store that keeps them ([`Store::keeps_facts`]): through the store's calls
//! only, a merged proposal round-trips with its history; a superseded fact keeps its history;
//! a stale commit changes nothing; a resent one is applied once; the bounds' evictions are
//! recorded and never take a pin; a deletion takes the fact and its history and its id is
//! never given again; a forgotten user is gone; users whose ids differ by a wildcard or a
//! quote never see each other's facts; writers of one user at once lose no fact.

use std::sync::Arc;

use chatmem::facts::{
    Cause, ChangeKind, Changed, EvictionReason, FactChange, FactKey, FactLimits, FactSet, Shown, add, apply_facts,
    enforce, merge, parse_proposal, pin,
};
use chatmem::store::{FactsCommit, StoreError, StoreErrorKind, StoredFacts};
use chatmem::{ConversationId, Heuristic, Message, Store, UserId};

use super::harness::{Run, creating, sm, stored_texts};

/// A time in Unix microseconds, `n` seconds after an arbitrary recent instant.
fn at(n: i64) -> i64 {
    1_760_000_000_000_000 + n * 1_000_000
}

impl Run {
    fn user(&self, name: &str) -> UserId {
        UserId::new(format!("{}/{name}", self.prefix)).expect("valid test user id")
    }

    async fn load_facts(&self, user: &UserId) -> StoredFacts {
        self.store
            .load_facts(user)
            .await
            .unwrap_or_else(|e| panic!("load_facts {user:?}: {e}"))
    }

    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> u64 {
        self.store
            .commit_facts(user, commit)
            .await
            .unwrap_or_else(|e| panic!("commit_facts {user:?}: {e}"))
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Vec<FactChange> {
        self.store
            .fact_history(user, fact)
            .await
            .unwrap_or_else(|e| panic!("fact_history {user:?} {fact}: {e}"))
    }

    async fn forget_user(&self, user: &UserId) -> bool {
        self.store
            .forget_user(user)
            .await
            .unwrap_or_else(|e| panic!("forget_user {user:?}: {e}"))
    }

    /// Commits `changed`, made on `loaded`, and checks what loads after: the new set at the
    /// next version. Returns what loads.
    async fn commit_changed(&self, user: &UserId, loaded: &StoredFacts, changed: Changed) -> StoredFacts {
        let set = changed.set.clone();
        let commit = FactsCommit::new(loaded, changed)
            .expect("a change made by the rules")
            .expect("something changed");
        assert_eq!(self.commit_facts(user, commit).await, loaded.version + 1);
        let now = self.load_facts(user).await;
        assert_eq!(
            now,
            StoredFacts {
                set,
                version: loaded.version + 1
            }
        );
        now
    }

    /// The facts an extraction from `conversation` proposes (`facts`: text, key, sources),
    /// merged into `loaded` and bounded by `limits`, committed as
    /// [`commit_changed`](Self::commit_changed) does. Returns what loads.
    async fn commit_extracted(
        &self,
        user: &UserId,
        loaded: &StoredFacts,
        conversation: &str,
        facts: &[(&str, Option<&str>, &[u64])],
        limits: &FactLimits,
        now: i64,
    ) -> StoredFacts {
        let changed = extraction(&loaded.set, conversation, facts, limits, now);
        self.commit_changed(user, loaded, changed).await
    }
}

/// The facts model's answer for `facts` (text, key, sources), as JSON.
fn answer(facts: &[(&str, Option<&str>, &[u64])]) -> String {
    let facts: Vec<serde_json::Value> = facts
        .iter()
        .map(|(text, key, sources)| serde_json::json!({"text": text, "key": key, "sources": sources}))
        .collect();
    serde_json::json!({ "facts": facts }).to_string()
}

/// An extraction of `facts` from `conversation`'s messages 1 to 20, merged into `loaded` and
/// kept within `limits` at `now`.
fn extraction(
    loaded: &FactSet,
    conversation: &str,
    facts: &[(&str, Option<&str>, &[u64])],
    limits: &FactLimits,
    now: i64,
) -> Changed {
    let conversation = ConversationId::new(conversation).expect("a valid conversation id");
    let shown = Shown::new(conversation.clone(), 1..=20);
    let proposal = parse_proposal(&answer(facts), &shown, limits).expect("a valid proposal");
    let cause = Cause::Extraction { conversation };
    let merged = merge(loaded, &proposal, &cause, now);
    let bounded = enforce(&merged.set, limits, &Heuristic, &cause, now);
    merged.then(bounded)
}

/// `text` added by hand to `loaded`, as a commit.
fn adding(loaded: &StoredFacts, text: &str, now: i64) -> Result<Option<FactsCommit>, StoreError> {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), now)
        .map_err(|e| StoreError::new(StoreErrorKind::InvalidInput, e.to_string()))?;
    FactsCommit::new(loaded, added)
}

/// The entries of `changes` for fact `fact`, in order.
fn of(changes: &[FactChange], fact: u64) -> Vec<FactChange> {
    changes.iter().filter(|c| c.fact == fact).cloned().collect()
}

fn kinds(history: &[FactChange]) -> Vec<&'static str> {
    history.iter().map(|c| c.kind.as_str()).collect()
}

fn texts(set: &FactSet) -> Vec<&str> {
    set.facts().iter().map(|f| f.text.as_str()).collect()
}

/// An unknown user loads empty; an extraction's merge, bounded, commits and loads as it was
/// made, each fact with its history; a pin commits on it.
pub(super) async fn facts_round_trip(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/round-trip");
    assert_eq!(run.load_facts(&user).await, StoredFacts::default(), "an unknown user");
    assert!(run.fact_history(&user, 1).await.is_empty());
    let loaded = StoredFacts::default();
    let limits = FactLimits::default();
    let changed = extraction(
        &loaded.set,
        "facts-c1",
        &[
            (
                "Default delivery address: 12 Main St.",
                Some("address.default"),
                &[12, 13],
            ),
            ("Says \"hi\" 100% of the time; it's 用户 🍵 * {x} a:b", None, &[14]),
            ("Allergic to nuts", Some("health.allergy"), &[3]),
        ],
        &limits,
        at(1),
    );
    let history = changed.changes.clone();
    let now = run.commit_changed(&user, &loaded, changed).await;
    assert_eq!(now.set.len(), 3);
    assert_eq!(now.set.next_id(), 4);
    let address = now
        .set
        .by_key(&FactKey::new("address.default").unwrap())
        .expect("the address");
    assert_eq!(address.sources.len(), 2, "sources kept");
    for fact in now.set.facts() {
        assert_eq!(run.fact_history(&user, fact.id).await, of(&history, fact.id));
    }
    assert!(run.fact_history(&user, 4).await.is_empty(), "a fact not yet made");

    // Said again: confirmed, with the new source.
    let again = extraction(
        &now.set,
        "facts-c2",
        &[("allergic to nuts.", Some("health.allergy"), &[7])],
        &limits,
        at(2),
    );
    let confirmed = again.changes.clone();
    let now = run.commit_changed(&user, &now, again).await;
    let allergy = now.set.get(3).expect("fact 3");
    assert_eq!((allergy.confirmed_micros, allergy.sources.len()), (at(2), 2));
    let expected: Vec<FactChange> = of(&history, 3).into_iter().chain(of(&confirmed, 3)).collect();
    assert_eq!(run.fact_history(&user, 3).await, expected);

    let pinned = pin(&now.set, 1, &limits, &Heuristic, at(3)).expect("pin");
    let now = run.commit_changed(&user, &now, pinned).await;
    assert!(now.set.get(1).expect("fact 1").pinned);
    assert_eq!(kinds(&run.fact_history(&user, 1).await), ["added", "pinned"]);
}

/// A fact with a key said anew supersedes the old one, which keeps its history after it left.
pub(super) async fn facts_supersede_keeps_history(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/supersede");
    let limits = FactLimits::default();
    let one = run
        .commit_extracted(
            &user,
            &StoredFacts::default(),
            "facts-c1",
            &[("Lives in Berlin", Some("home.city"), &[1])],
            &limits,
            at(1),
        )
        .await;
    let two = run
        .commit_extracted(
            &user,
            &one,
            "facts-c2",
            &[("Lives in Hamburg", Some("home.city"), &[5])],
            &limits,
            at(2),
        )
        .await;
    assert_eq!(texts(&two.set), ["Lives in Hamburg"]);
    assert_eq!(two.set.facts()[0].id, 2);

    let old = run.fact_history(&user, 1).await;
    assert_eq!(kinds(&old), ["added", "superseded"]);
    assert_eq!(
        old[1].kind,
        ChangeKind::Superseded {
            by: 2,
            text: "Lives in Berlin".into()
        }
    );
    assert_eq!(old[1].at_micros, at(2));
    let new = run.fact_history(&user, 2).await;
    assert_eq!(new.len(), 1);
    assert_eq!(
        new[0].kind,
        ChangeKind::Added {
            text: "Lives in Hamburg".into(),
            key: Some(FactKey::new("home.city").unwrap()),
            supersedes: Some(1),
        }
    );
    assert_eq!(
        new[0].cause,
        Cause::Extraction {
            conversation: ConversationId::new("facts-c2").unwrap()
        }
    );
}

/// A commit made on facts that changed since conflicts and changes nothing, set or history.
pub(super) async fn facts_version_check(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/versions");
    let one = run
        .commit_changed(
            &user,
            &StoredFacts::default(),
            add(
                &FactSet::default(),
                "Prefers email",
                None,
                &FactLimits::default(),
                at(1),
            )
            .expect("add")
            .0,
        )
        .await;
    let a = adding(&one, "Works nights", at(2)).unwrap().unwrap();
    let b = adding(&one, "Has a cat", at(2)).unwrap().unwrap();
    assert_eq!(run.commit_facts(&user, a).await, 2);
    let after_a = run.load_facts(&user).await;
    let history_2 = run.fact_history(&user, 2).await;
    let e = run.store.commit_facts(&user, b).await.expect_err("a stale commit");
    assert_eq!(e.kind(), StoreErrorKind::Conflict, "{e}");
    assert_eq!(
        run.load_facts(&user).await,
        after_a,
        "a conflicting commit writes nothing"
    );
    assert_eq!(run.fact_history(&user, 2).await, history_2, "nor any history");
    assert!(run.fact_history(&user, 3).await.is_empty());

    // A first commit for a user who has facts already: a conflict too.
    let creating = adding(&StoredFacts::default(), "Has a dog", at(3)).unwrap().unwrap();
    let e = run.store.commit_facts(&user, creating).await.expect_err("stale");
    assert!(e.is_conflict(), "{e}");
    // And one expecting a version never reached.
    let ahead = StoredFacts {
        set: after_a.set.clone(),
        version: after_a.version + 5,
    };
    let e = run
        .store
        .commit_facts(&user, adding(&ahead, "Has a dog", at(3)).unwrap().unwrap())
        .await
        .expect_err("ahead");
    assert!(e.is_conflict(), "{e}");
    assert_eq!(run.load_facts(&user).await, after_a);
}

/// The same facts commit sent twice (its reply lost) is applied once and answered with the
/// version it made; once overtaken, it is an ordinary conflict.
pub(super) async fn facts_resent_commit(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/resent");
    let create = adding(&StoredFacts::default(), "Prefers email", at(1))
        .unwrap()
        .unwrap();
    assert_eq!(run.commit_facts(&user, create.clone()).await, 1);
    assert_eq!(
        run.commit_facts(&user, create.clone()).await,
        1,
        "a resent first commit answers its version"
    );
    let one = run.load_facts(&user).await;
    assert_eq!(texts(&one.set), ["Prefers email"]);
    let update = adding(&one, "Works nights", at(2)).unwrap().unwrap();
    assert_eq!(run.commit_facts(&user, update.clone()).await, 2);
    assert_eq!(
        run.commit_facts(&user, update).await,
        2,
        "a resent commit answers its version"
    );
    let two = run.load_facts(&user).await;
    assert_eq!(
        (texts(&two.set), two.version),
        (vec!["Prefers email", "Works nights"], 2)
    );
    assert_eq!(
        kinds(&run.fact_history(&user, 2).await),
        ["added"],
        "its history written once"
    );
    let e = run.store.commit_facts(&user, create).await.expect_err("overtaken");
    assert!(e.is_conflict(), "{e}");
    // Another commit expecting the old version conflicts, whatever its token.
    let other = adding(&one, "Has a cat", at(3)).unwrap().unwrap();
    assert!(
        run.store
            .commit_facts(&user, other)
            .await
            .expect_err("stale")
            .is_conflict()
    );
    assert_eq!(run.load_facts(&user).await, two);
}

/// Past the bounds, the least recently confirmed unpinned fact leaves, recorded as evicted in
/// the history it keeps; a pinned fact never leaves, however old.
pub(super) async fn facts_caps(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/caps");
    let limits = FactLimits::default().with_max_facts(3).expect("a limit");
    let now = run
        .commit_extracted(
            &user,
            &StoredFacts::default(),
            "facts-c1",
            &[("Oldest and pinned", None, &[1]), ("Second", None, &[2])],
            &limits,
            at(1),
        )
        .await;
    let pinned = pin(&now.set, 1, &limits, &Heuristic, at(1)).expect("pin");
    let now = run.commit_changed(&user, &now, pinned).await;
    let more = extraction(
        &now.set,
        "facts-c1",
        &[("Third", None, &[3]), ("Fourth", None, &[4]), ("Fifth", None, &[5])],
        &limits,
        at(2),
    );
    let evicted: Vec<u64> = more
        .changes
        .iter()
        .filter(|c| matches!(c.kind, ChangeKind::Evicted { .. }))
        .map(|c| c.fact)
        .collect();
    assert_eq!(evicted, [2, 3], "the least recently confirmed unpinned facts leave");
    let now = run.commit_changed(&user, &now, more).await;
    assert_eq!(texts(&now.set), ["Oldest and pinned", "Fourth", "Fifth"]);
    let second = run.fact_history(&user, 2).await;
    assert_eq!(kinds(&second), ["added", "evicted"]);
    assert_eq!(
        second[1].kind,
        ChangeKind::Evicted {
            reason: EvictionReason::TooManyFacts,
            text: "Second".into()
        }
    );
    assert_eq!(kinds(&run.fact_history(&user, 3).await), ["added", "evicted"]);
    assert_eq!(
        kinds(&run.fact_history(&user, 1).await),
        ["added", "pinned"],
        "the pin stayed"
    );
}

/// A deletion takes the facts and all their history, past versions included when asked; the
/// other facts keep theirs, and a deleted id is never given again.
pub(super) async fn facts_delete(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/delete");
    let limits = FactLimits::default();
    let now = run
        .commit_extracted(
            &user,
            &StoredFacts::default(),
            "facts-c1",
            &[("Lives in Berlin", Some("home.city"), &[1]), ("Has a cat", None, &[2])],
            &limits,
            at(1),
        )
        .await;
    let now = run
        .commit_extracted(
            &user,
            &now,
            "facts-c1",
            &[("Lives in Hamburg", Some("home.city"), &[3])],
            &limits,
            at(2),
        )
        .await;
    assert_eq!(texts(&now.set), ["Has a cat", "Lives in Hamburg"]);
    let cat = run.fact_history(&user, 2).await;

    // The current fact and the past one it superseded.
    let commit = FactsCommit::deleting(&now, &[3, 1]).unwrap().unwrap();
    assert_eq!(run.commit_facts(&user, commit).await, now.version + 1);
    let after = run.load_facts(&user).await;
    assert_eq!(texts(&after.set), ["Has a cat"]);
    assert_eq!(after.set.next_id(), 4, "ids are never given again");
    assert!(
        run.fact_history(&user, 1).await.is_empty(),
        "a past fact's history gone"
    );
    assert!(
        run.fact_history(&user, 3).await.is_empty(),
        "a current fact's history gone"
    );
    assert_eq!(run.fact_history(&user, 2).await, cat, "the others' history kept");

    // A new fact gets a new id, with a history of its own only.
    let now = run
        .commit_extracted(
            &user,
            &after,
            "facts-c1",
            &[("Lives in Hamburg", Some("home.city"), &[3])],
            &limits,
            at(3),
        )
        .await;
    assert_eq!(
        now.set.by_key(&FactKey::new("home.city").unwrap()).map(|f| f.id),
        Some(4)
    );
    assert_eq!(kinds(&run.fact_history(&user, 4).await), ["added"]);
    assert!(run.fact_history(&user, 3).await.is_empty());
}

/// Forgetting a user deletes their facts and history (they load as unknown) and nothing
/// else: not another user's, not a conversation named as the user is.
pub(super) async fn facts_forget_user(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let user = run.user("facts/forget");
    let other = run.user("facts/forget-not");
    for u in [&user, &other] {
        let changed = add(
            &FactSet::default(),
            "Prefers email",
            None,
            &FactLimits::default(),
            at(1),
        )
        .expect("add")
        .0;
        run.commit_changed(u, &StoredFacts::default(), changed).await;
    }
    let conversation = ConversationId::new(user.as_str()).expect("a user id is a conversation id");
    run.commit(&conversation, creating(None, vec![sm(1, 2, Message::user("hi"))], None))
        .await;
    let others = (run.load_facts(&other).await, run.fact_history(&other, 1).await);

    assert!(run.forget_user(&user).await, "there was something to forget");
    assert_eq!(run.load_facts(&user).await, StoredFacts::default());
    assert!(run.fact_history(&user, 1).await.is_empty());
    assert!(!run.forget_user(&user).await, "nothing left");
    assert!(!run.forget_user(&run.user("facts/never")).await, "an unknown user");
    assert_eq!(
        (run.load_facts(&other).await, run.fact_history(&other, 1).await),
        others
    );
    assert_eq!(
        stored_texts(&run.history(&conversation, 0, 10).await),
        ["hi"],
        "conversations are not facts"
    );
    // A forgotten user starts again from version 0.
    let fresh = adding(&StoredFacts::default(), "Works nights", at(2)).unwrap().unwrap();
    assert_eq!(run.commit_facts(&user, fresh).await, 1);
}

/// Users whose ids differ only by a wildcard, a quote, a separator or a space (or are a
/// prefix of each other) each see their own facts and history only, and forgetting one
/// forgets no other.
pub(super) async fn facts_hostile_user_ids(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    let names = [
        "u",
        "u%",
        "u_",
        "u*",
        "u?",
        "u\"",
        "u'",
        "u/",
        "u:",
        "u{}",
        "u{x}",
        "u ",
        " u",
        "u\\",
        "u[1]",
        "U",
        "u%_*",
        "u'; DROP TABLE facts; --",
        "u:1:2",
        "用户",
    ];
    let users: Vec<UserId> = names.iter().map(|n| run.user(&format!("facts/hostile/{n}"))).collect();
    // User i holds 1 to 3 facts, each naming the user.
    let count = |i: usize| i % 3 + 1;
    let whose = |user: &UserId| format!(" of [{}]", user.as_str());
    for (i, user) in users.iter().enumerate() {
        let mut loaded = StoredFacts::default();
        for k in 0..count(i) {
            let commit = adding(&loaded, &format!("fact {k}{}", whose(user)), at(1))
                .unwrap()
                .unwrap();
            run.commit_facts(user, commit).await;
            loaded = run.load_facts(user).await;
        }
    }
    let check = |user: &UserId, facts: &StoredFacts, i: usize| {
        assert_eq!(facts.set.len(), count(i), "{user:?} sees its own facts only");
        assert_eq!(facts.version, count(i) as u64, "{user:?}'s own version");
        for fact in facts.set.facts() {
            assert!(fact.text.ends_with(&whose(user)), "{user:?}: {}", fact.text);
        }
    };
    for (i, user) in users.iter().enumerate() {
        check(user, &run.load_facts(user).await, i);
        let history = run.fact_history(user, 1).await;
        assert_eq!(history.len(), 1, "{user:?}'s history of fact 1 is its own");
        assert!(
            matches!(&history[0].kind, ChangeKind::Added { text, .. } if text.ends_with(&whose(user))),
            "{user:?}: {:?}",
            history[0]
        );
    }
    // Forgetting the wildcard-laden ones forgets no other.
    for gone in [1, 2, 3, 17] {
        assert!(run.forget_user(&users[gone]).await, "{:?}", users[gone]);
    }
    for (i, user) in users.iter().enumerate() {
        let facts = run.load_facts(user).await;
        if [1, 2, 3, 17].contains(&i) {
            assert_eq!(facts, StoredFacts::default(), "{user:?} forgotten");
        } else {
            check(user, &facts, i);
        }
    }
}

/// Writers of one user applying proposals at once ([`apply_facts`]) each land: every change is
/// made again on the facts it lost to, so none is written over.
pub(super) async fn facts_concurrent_writers(run: &Run) {
    if !run.store.keeps_facts() {
        return;
    }
    const WRITERS: usize = 8;
    let user = run.user("facts/concurrent");
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (store, user): (Arc<dyn Store>, UserId) = (run.store.clone(), user.clone());
            tokio::spawn(async move {
                // Each of the other writers can make this one lose at most once (every loss
                // is a commit of another made since this one loaded), so 8 attempts suffice.
                apply_facts(&*store, &user, |loaded| {
                    adding(loaded, &format!("Writer {w} was here"), at(w as i64))
                })
                .await
                .unwrap_or_else(|e| panic!("writer {w}: {e}"))
            })
        })
        .collect();
    let mut attempts = 0;
    for task in tasks {
        let applied = task.await.expect("a writer");
        assert!(applied.committed);
        attempts += applied.attempts;
    }
    let now = run.load_facts(&user).await;
    assert_eq!(
        now.version, WRITERS as u64,
        "one commit per writer ({attempts} attempts)"
    );
    let mut said: Vec<&str> = texts(&now.set);
    said.sort_unstable();
    let expected: Vec<String> = (0..WRITERS).map(|w| format!("Writer {w} was here")).collect();
    assert_eq!(said, expected, "no writer's fact lost");
    for fact in now.set.facts() {
        assert_eq!(kinds(&run.fact_history(&user, fact.id).await), ["added"]);
    }
}

/// Eight writers commit on one version at once, creating `store`'s facts of a new user
/// (version 0) and then changing them (version 1): exactly one wins each time, the others
/// see a conflict, and only the winner's fact and history entry are kept. Unlike
/// [`facts_concurrent_writers`], no writer tries again, so the store's version check alone
/// decides.
pub(crate) async fn one_facts_writer_wins_a_version(store: Arc<dyn Store>) {
    let run = Run {
        store,
        prefix: format!("race-{}", crate::run_token()),
    };
    for expected in [0, 1] {
        let user = run.user(&format!("facts/race-{expected}"));
        let mut loaded = StoredFacts::default();
        if expected == 1 {
            let first = adding(&loaded, "First", at(1)).expect("add").expect("a change");
            run.commit_facts(&user, first).await;
            loaded = run.load_facts(&user).await;
        }
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let commit = adding(&loaded, &format!("Writer {w}"), at(2))
                    .expect("add")
                    .expect("a change");
                let (store, user) = (run.store.clone(), user.clone());
                tokio::spawn(async move { store.commit_facts(&user, commit).await })
            })
            .collect();
        let mut won = Vec::new();
        for (w, task) in tasks.into_iter().enumerate() {
            match task.await.expect("a writer") {
                Ok(version) => won.push((w, version)),
                Err(e) => assert!(e.is_conflict(), "writer {w}: {e}"),
            }
        }
        assert_eq!(won.len(), 1, "expecting {expected}: {won:?}");
        let (w, version) = won[0];
        assert_eq!(version, expected + 1);
        let now = run.load_facts(&user).await;
        assert_eq!(now.version, expected + 1);
        assert_eq!(texts(&now.set).last().copied(), Some(format!("Writer {w}").as_str()));
        let history = run.fact_history(&user, expected + 1).await;
        assert_eq!(history.len(), 1, "only the winner's entry");
    }
}
