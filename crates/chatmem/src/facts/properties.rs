//! Property tests of the facts rules, over sets built by arbitrary sequences of every
//! operation (so every set tested is one the rules can reach).

use proptest::prelude::*;

use crate::counter::{Heuristic, TokenCounter};
use crate::id::ConversationId;

use super::*;

/// Words that collide on purpose: the same word in other cases and with punctuation.
const WORDS: [&str; 9] = ["tea", "Tea", "TEA!", "berlin", "Berlin.", "nuts", "a", "b,", "订单"];
const KEYS: [&str; 4] = ["home.city", "diet", "drink.favorite", "name"];

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(&WORDS[..]), 1..4).prop_map(|w| w.join(" "))
}

fn key() -> impl Strategy<Value = Option<FactKey>> {
    proptest::option::of(proptest::sample::select(&KEYS[..]).prop_map(|k| FactKey::new(k).unwrap()))
}

fn conversation() -> ConversationId {
    ConversationId::new("c1").unwrap()
}

fn shown() -> Shown {
    Shown::new(conversation(), 0..10)
}

/// A proposal as a model would write it: facts with distinct keys.
fn answer() -> impl Strategy<Value = String> {
    proptest::collection::vec((text(), key(), proptest::collection::vec(0u64..10, 1..3)), 0..5).prop_map(|facts| {
        let mut seen = Vec::new();
        let facts: Vec<serde_json::Value> = facts
            .into_iter()
            .map(|(text, key, sources)| {
                let key = key.filter(|k| {
                    let fresh = !seen.contains(k);
                    seen.push(k.clone());
                    fresh
                });
                serde_json::json!({"text": text, "key": key, "sources": sources})
            })
            .collect();
        serde_json::json!({ "facts": facts }).to_string()
    })
}

fn proposal() -> impl Strategy<Value = Vec<ProposedFact>> {
    answer().prop_map(|json| parse_proposal(&json, &shown(), &FactLimits::default()).unwrap())
}

#[derive(Debug, Clone)]
enum Op {
    Merge(Vec<ProposedFact>),
    Add(String, Option<FactKey>),
    Edit(usize, Option<String>, Option<Option<FactKey>>),
    Pin(usize),
    Unpin(usize),
    Delete(usize),
    Enforce,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => proposal().prop_map(Op::Merge),
        2 => (text(), key()).prop_map(|(t, k)| Op::Add(t, k)),
        1 => (any::<usize>(), proptest::option::of(text()), proptest::option::of(key())).prop_map(|(i, t, k)| Op::Edit(i, t, k)),
        1 => any::<usize>().prop_map(Op::Pin),
        1 => any::<usize>().prop_map(Op::Unpin),
        1 => any::<usize>().prop_map(Op::Delete),
        1 => Just(Op::Enforce),
    ]
}

fn limits() -> impl Strategy<Value = FactLimits> {
    (1usize..8, 1usize..60).prop_map(|(facts, tokens)| {
        FactLimits::default()
            .with_max_facts(facts)
            .unwrap()
            .with_max_tokens(tokens)
            .unwrap()
    })
}

/// The fact at `i` (modulo the set's length), if any.
fn nth(set: &FactSet, i: usize) -> Option<u64> {
    (!set.is_empty()).then(|| set.facts()[i % set.len()].id)
}

/// `set` after `op` at `now` (a refused op leaves it as it was), with the changes.
fn apply(set: &FactSet, op: &Op, limits: &FactLimits, now: i64) -> Changed {
    let cause = Cause::Extraction {
        conversation: conversation(),
    };
    let refused = || Changed {
        set: set.clone(),
        changes: Vec::new(),
    };
    match op {
        Op::Merge(p) => merge(set, p, &cause, now),
        Op::Add(text, key) => add(set, text, key.clone(), limits, now).map_or_else(|_| refused(), |(c, _)| c),
        Op::Edit(i, text, key) => nth(set, *i)
            .and_then(|id| {
                let e = FactEdit {
                    text: text.clone(),
                    key: key.clone(),
                };
                edit(set, id, e, limits, &Heuristic, now).ok()
            })
            .unwrap_or_else(refused),
        Op::Pin(i) => nth(set, *i)
            .and_then(|id| pin(set, id, limits, &Heuristic, now).ok())
            .unwrap_or_else(refused),
        Op::Unpin(i) => nth(set, *i)
            .and_then(|id| unpin(set, id, now).ok())
            .unwrap_or_else(refused),
        Op::Delete(i) => nth(set, *i)
            .and_then(|id| delete(set, id).ok())
            .map_or_else(refused, |(set, _)| Changed {
                set,
                changes: Vec::new(),
            }),
        Op::Enforce => enforce(set, limits, &Heuristic, &cause, now),
    }
}

/// A set reached by `ops`.
fn reached(ops: &[Op], limits: &FactLimits) -> FactSet {
    ops.iter()
        .enumerate()
        .fold(FactSet::default(), |set, (i, op)| apply(&set, op, limits, i as i64).set)
}

fn a_set() -> impl Strategy<Value = (FactSet, FactLimits)> {
    (proptest::collection::vec(op(), 0..24), limits()).prop_map(|(ops, limits)| (reached(&ops, &limits), limits))
}

/// Whether `set` keeps every rule a [`FactSet`] has (rebuilt from its parts).
fn valid(set: &FactSet) -> bool {
    FactSet::new(set.facts().to_vec(), set.next_id()).as_ref() == Ok(set)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn merge_is_deterministic_and_never_deletes((set, _) in a_set(), p in proposal(), now in 0i64..1_000) {
        let cause = Cause::Extraction { conversation: conversation() };
        let merged = merge(&set, &p, &cause, now);
        prop_assert_eq!(&merge(&set.clone(), &p.clone(), &cause, now), &merged);
        prop_assert!(valid(&merged.set));
        for fact in set.facts() {
            let superseded = merged.changes.iter().any(|c| {
                c.fact == fact.id && matches!(c.kind, ChangeKind::Superseded { .. })
            });
            prop_assert!(merged.set.get(fact.id).is_some() || superseded, "fact {} vanished", fact.id);
        }
        for change in &merged.changes {
            prop_assert!(
                matches!(change.kind, ChangeKind::Added { .. } | ChangeKind::Confirmed { .. } | ChangeKind::Superseded { .. }),
                "{:?}", change
            );
            prop_assert_eq!(change.at_micros, now);
            prop_assert_eq!(&change.cause, &cause);
        }
        // A proposed fact with a key is what its key says now (keys are distinct in an answer),
        // unless its key's fact was said later in the same conversation, which then stays.
        for proposed in &p {
            if let Some(key) = proposed.key() {
                let current = merged.set.by_key(key).unwrap();
                let newest = proposed.sources().iter().map(|s| s.seq).max();
                let said_later = current.sources.iter().any(|s| {
                    Some(s.seq) > newest && proposed.sources().iter().any(|o| o.conversation == s.conversation)
                });
                prop_assert!(same_text(&current.text, proposed.text()) || said_later, "{:?} for {:?}", current, proposed);
            }
        }
        // Pins survive a merge: the new fact of a superseded pinned one is pinned.
        let pinned = |s: &FactSet| s.facts().iter().filter(|f| f.pinned).count();
        prop_assert_eq!(pinned(&merged.set), pinned(&set));
    }

    #[test]
    fn every_reachable_set_keeps_its_rules(ops in proptest::collection::vec(op(), 0..32), limits in limits()) {
        let mut set = FactSet::default();
        for (i, op) in ops.iter().enumerate() {
            let before = set.clone();
            let changed = apply(&set, op, &limits, i as i64);
            prop_assert!(valid(&changed.set), "{:?}", op);
            // At most one current fact per key.
            let mut keys: Vec<&FactKey> = changed.set.facts().iter().filter_map(|f| f.key.as_ref()).collect();
            let n = keys.len();
            keys.sort();
            keys.dedup();
            prop_assert_eq!(keys.len(), n);
            // Ids only grow and are never reused.
            prop_assert!(changed.set.next_id() >= before.next_id());
            for fact in changed.set.facts() {
                prop_assert!(before.get(fact.id).is_some() || fact.id >= before.next_id());
            }
            // Only a deletion by hand removes a fact without a history entry saying so.
            if !matches!(op, Op::Delete(_)) {
                for fact in before.facts() {
                    let left = changed.changes.iter().any(|c| {
                        c.fact == fact.id
                            && matches!(c.kind, ChangeKind::Superseded { .. } | ChangeKind::Evicted { .. })
                    });
                    prop_assert!(changed.set.get(fact.id).is_some() || left, "{:?} lost fact {}", op, fact.id);
                }
            }
            set = changed.set;
        }
    }

    #[test]
    fn enforce_keeps_the_bounds_when_the_pins_fit_and_never_evicts_a_pin(
        (set, _) in a_set(),
        limits in limits(),
        now in 0i64..1_000,
    ) {
        let cause = Cause::ByHand;
        let kept = enforce(&set, &limits, &Heuristic, &cause, now);
        prop_assert!(valid(&kept.set));
        let pinned: Vec<&Fact> = set.facts().iter().filter(|f| f.pinned).collect();
        for fact in &pinned {
            prop_assert_eq!(kept.set.get(fact.id), Some(*fact));
        }
        let pinned_tokens: usize = pinned.iter().map(|f| fact_tokens(f, &Heuristic)).sum();
        if pinned.len() <= limits.max_facts() && pinned_tokens <= limits.max_tokens() {
            prop_assert!(kept.set.len() <= limits.max_facts());
            prop_assert!(set_tokens(&kept.set, &Heuristic) <= limits.max_tokens());
        }
        // Only evictions, each of a fact that was there, unpinned, and none kept was due first.
        let due = |f: &Fact| (f.confirmed_micros, f.id);
        for change in &kept.changes {
            prop_assert!(matches!(change.kind, ChangeKind::Evicted { .. }), "{:?}", change);
            let gone = set.get(change.fact).unwrap();
            prop_assert!(!gone.pinned && kept.set.get(gone.id).is_none());
            for stayed in kept.set.facts().iter().filter(|f| !f.pinned) {
                prop_assert!(due(gone) < due(stayed));
            }
        }
        prop_assert_eq!(kept.set.len() + kept.changes.len(), set.len());
        // Within the bounds, enforcing again changes nothing.
        let again = enforce(&kept.set, &limits, &Heuristic, &cause, now);
        prop_assert!(again.changes.is_empty());
    }

    #[test]
    fn render_depends_only_on_the_facts(
        (set, _) in a_set(),
        budget in 0usize..200,
        seed in any::<u64>(),
    ) {
        let rendered = render(&set, budget, &Heuristic);
        // The same facts, given in another order: the same bytes.
        let mut shuffled = set.facts().to_vec();
        fastrand::Rng::with_seed(seed).shuffle(&mut shuffled);
        let rebuilt = FactSet::new(shuffled, set.next_id()).unwrap();
        prop_assert_eq!(&render(&rebuilt, budget, &Heuristic), &rendered);
        if let Some(r) = &rendered {
            prop_assert!(r.tokens <= budget);
            prop_assert_eq!(r.tokens, Heuristic.count_message(&r.message));
            let text = r.message.text().unwrap().into_owned();
            let lines: Vec<&str> = text.lines().collect();
            prop_assert_eq!(lines[0], FACTS_HEADING);
            prop_assert_eq!(lines.len(), r.included.len() + 1);
            for (line, id) in lines[1..].iter().zip(&r.included) {
                prop_assert_eq!(*line, super::line(set.get(*id).unwrap()));
            }
        } else {
            // Nothing fits: not even the heading and any one fact.
            let heading = Heuristic.count_message(&crate::message::Message::user(FACTS_HEADING));
            prop_assert!(set.facts().iter().all(|f| heading + fact_tokens(f, &Heuristic) > budget));
        }
    }

    #[test]
    fn render_changes_when_a_fact_does_and_not_when_it_is_confirmed(
        (set, limits) in a_set(),
        which in any::<usize>(),
        now in 1_000i64..2_000,
    ) {
        let Some(id) = nth(&set, which) else { return Ok(()); };
        let before = render(&set, 10_000, &Heuristic).unwrap();
        let fact = set.get(id).unwrap().clone();
        // Said again: times and sources move, the prompt does not.
        let shown = Shown::new(conversation(), [3]);
        let json = serde_json::json!({"facts": [{"text": fact.text, "key": fact.key, "sources": [3]}]}).to_string();
        let p = parse_proposal(&json, &shown, &FactLimits::default()).unwrap();
        let confirmed = merge(&set, &p, &Cause::ByHand, now);
        let confirmed_only = matches!(confirmed.changes[..], [FactChange { kind: ChangeKind::Confirmed { .. }, .. }]);
        prop_assert!(confirmed_only, "{:?}", confirmed.changes);
        prop_assert_eq!(&render(&confirmed.set, 10_000, &Heuristic).unwrap(), &before);
        // Its text changed: the prompt changes.
        let e = FactEdit { text: Some(format!("{} changed", fact.text)), key: None };
        let unbounded = limits.with_max_tokens(100_000).unwrap();
        let edited = edit(&set, id, e, &unbounded, &Heuristic, now).unwrap();
        prop_assert_ne!(&render(&edited.set, 10_000, &Heuristic).unwrap().message, &before.message);
    }

    #[test]
    fn parse_never_panics_and_is_all_or_nothing(junk in any::<String>(), json in answer(), cut in any::<usize>()) {
        let limits = FactLimits::default();
        let _ = parse_proposal(&junk, &shown(), &limits);
        // A well-formed answer: every fact, in order.
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        let facts = parse_proposal(&json, &shown(), &limits).unwrap();
        let given = value["facts"].as_array().unwrap();
        prop_assert_eq!(facts.len(), given.len());
        for (fact, given) in facts.iter().zip(given) {
            prop_assert_eq!(fact.text(), given["text"].as_str().unwrap());
        }
        // Cut anywhere but its end: an error, never some of the facts.
        let mut at = cut % json.len();
        while !json.is_char_boundary(at) {
            at -= 1;
        }
        prop_assert!(parse_proposal(&json[..at], &shown(), &limits).is_err());
        // One fact naming a message it was not shown: nothing.
        if !given.is_empty() {
            let mut bad = value.clone();
            let i = cut % given.len();
            bad["facts"][i]["sources"] = serde_json::json!([10]);
            let e = parse_proposal(&bad.to_string(), &shown(), &limits).unwrap_err();
            prop_assert_eq!(e, InvalidProposal::SourceNotShown { at: i, index: 0, seq: 10 });
        }
    }

    #[test]
    fn parse_never_panics_on_near_misses(facts in proptest::collection::vec(
        (any::<String>(), proptest::option::of(any::<String>()), proptest::collection::vec(any::<u64>(), 0..3)),
        0..4,
    )) {
        let facts: Vec<serde_json::Value> = facts
            .into_iter()
            .map(|(text, key, sources)| serde_json::json!({"text": text, "key": key, "sources": sources}))
            .collect();
        let json = serde_json::json!({ "facts": facts }).to_string();
        match parse_proposal(&json, &shown(), &FactLimits::default()) {
            Ok(parsed) => prop_assert_eq!(parsed.len(), facts.len()),
            Err(e) => prop_assert!(!e.to_string().chars().any(char::is_control), "{:?}", e),
        }
    }
}
