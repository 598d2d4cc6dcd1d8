//! Property tests of the window contract over random conversations with tool loops.

use chatmem::store::StoredMessage;
use chatmem::window::{repair, select};
use chatmem::{Budget, TurnBoundary, WindowPolicy};
use chatmem::{ChatMemory, ConversationId, Heuristic, InMemoryStore, Message, Retention, Role, TokenCounter, ToolCall};
use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::Arc;

/// One generated turn: a user message, tool rounds, then an answer (or, with `damage`,
/// an orphan result or an unanswered call).
#[derive(Debug, Clone)]
struct Turn {
    rounds: Vec<(usize, bool)>, // (calls in the round, drop one result?)
    orphan: bool,
    answer: bool,
    system: Option<u8>,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        prop::collection::vec((1usize..=3, prop::bool::weighted(0.15)), 0..3),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.9),
        prop::option::weighted(0.1, 0u8..3),
    )
        .prop_map(|(rounds, orphan, answer, system)| Turn {
            rounds,
            orphan,
            answer,
            system,
        })
}

/// Messages (system ones included) and whether the generator damaged anything.
fn build(turns: &[Turn], damage: bool) -> (Vec<Message>, bool) {
    let mut out = Vec::new();
    let mut damaged = false;
    let mut call = 0;
    for (t, turn) in turns.iter().enumerate() {
        if let Some(s) = turn.system {
            out.push(Message::system(format!("rules v{s}")));
        }
        out.push(Message::user(format!("u{t} {}", "x".repeat(t % 7 * 5))));
        if damage && turn.orphan {
            out.push(Message::tool_result("nobody-called-this", "orphan"));
            damaged = true;
        }
        for &(calls, drop_one) in &turn.rounds {
            let ids: Vec<String> = (0..calls)
                .map(|_| {
                    call += 1;
                    format!("c{call}")
                })
                .collect();
            out.push(Message::assistant_tool_calls(
                ids.iter().map(|id| ToolCall::new(id, "f", "{}")).collect(),
            ));
            for (k, id) in ids.iter().enumerate().rev() {
                if damage && drop_one && k == 0 {
                    damaged = true;
                    continue;
                }
                out.push(Message::tool_result(id, format!("r{id}")));
            }
        }
        if turn.answer {
            out.push(Message::assistant(format!("a{t}")));
        }
    }
    (out, damaged)
}

fn stored(messages: &[Message]) -> Vec<StoredMessage> {
    messages
        .iter()
        .filter(|m| !m.is_system())
        .enumerate()
        .map(|(i, m)| StoredMessage::new(i as u64 + 1, 1 + (i as u32 * 7) % 23, m.clone()))
        .collect()
}

/// Checks a run against the contract directly, without the library's helpers. `opening` is
/// the message that opens the messages the run was chosen from (the conversation's first, or
/// the stored window start): under the user boundary an assistant message may start the run
/// there.
fn run_ok(
    run: &[&StoredMessage],
    opening: Option<&StoredMessage>,
    system_tokens: Option<u32>,
    policy: &WindowPolicy,
) -> bool {
    // The system message is kept even when it alone overflows the budget: an empty run is fine.
    let fits = run.is_empty()
        || match policy.budget() {
            Budget::Messages(max) => run.len() + usize::from(system_tokens.is_some()) <= max,
            Budget::Tokens(max) => {
                3 + system_tokens.unwrap_or(0) as usize + run.iter().map(|m| m.tokens as usize).sum::<usize>() <= max
            }
        };
    let boundary = match (run.first(), policy.boundary()) {
        (None, _) => true,
        (Some(m), TurnBoundary::User) => {
            m.message.role() == Role::User
                || (opening.is_some_and(|o| o.seq == m.seq) && m.message.role() == Role::Assistant)
        }
        (Some(m), TurnBoundary::PairSafe) => m.message.role() != Role::Tool,
    };
    fits && boundary && paired(run)
}

/// No result without its call earlier in the run; no unanswered call before a later user message.
fn paired(run: &[&StoredMessage]) -> bool {
    let mut calls: HashSet<&str> = HashSet::new();
    for (i, m) in run.iter().enumerate() {
        if let Some(id) = m.message.tool_call_id()
            && !calls.contains(id)
        {
            return false;
        }

        for c in m.message.tool_calls() {
            calls.insert(&c.id);
            let later_user = run[i + 1..].iter().any(|n| n.message.role() == Role::User);
            let answered = run[i + 1..].iter().any(|n| n.message.tool_call_id() == Some(&c.id));
            if later_user && !answered {
                return false;
            }
        }
    }
    true
}

fn policy() -> impl Strategy<Value = WindowPolicy> {
    (
        prop_oneof![
            (1usize..25).prop_map(Budget::Messages),
            (1usize..300).prop_map(Budget::Tokens)
        ],
        prop_oneof![Just(TurnBoundary::User), Just(TurnBoundary::PairSafe)],
    )
        .prop_map(|(b, t)| WindowPolicy::new(b).unwrap().with_boundary(t))
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The selected run satisfies every rule and no longer run of the repaired messages does.
    #[test]
    fn selection_is_the_longest_valid_run(
        turns in prop::collection::vec(turn(), 0..12),
        damage in any::<bool>(),
        sys in prop::option::of(1u32..60),
        policy in policy(),
        pending in any::<bool>(),
        greeting in prop::bool::weighted(0.2),
    ) {
        let (mut msgs, damaged) = build(&turns, damage);
        if greeting {
            msgs.insert(0, Message::assistant("hello, how can I help?"));
        }
        if pending {
            msgs.push(Message::assistant_tool_calls(vec![ToolCall::new("pending", "f", "{}")]));
        }
        let all = stored(&msgs);
        let keep = repair(&all);
        if !damaged {
            prop_assert!(keep.iter().all(|k| *k), "undamaged data must survive repair");
        }
        let kept: Vec<&StoredMessage> = all.iter().zip(&keep).filter(|(_, k)| **k).map(|(m, _)| m).collect();
        let sel = select(&all, sys, &policy, &Heuristic);
        let run: Vec<&StoredMessage> = sel.indices.iter().map(|&i| &all[i]).collect();
        prop_assert!(run_ok(&run, all.first(), sys, &policy), "selected run breaks the contract: {:?}", sel);
        // The run is a suffix of the repaired messages...
        prop_assert_eq!(&kept[kept.len() - run.len()..], &run[..]);
        // ...and the longest valid one.
        for p in 0..kept.len() - run.len() {
            prop_assert!(!run_ok(&kept[p..], all.first(), sys, &policy), "a longer run from {} is valid", p);
        }
        // Everything before `start` is outside the window.
        prop_assert!(sel.indices.iter().all(|&i| i >= sel.start));
        // A call awaiting its results at the very end is legitimate and stays.
        if pending && !run.is_empty() {
            prop_assert!(run.last().is_some_and(|m| m.message.tool_calls().first().is_some_and(|c| c.id == "pending")));
        }
    }

    /// Through ChatMemory: one system message, first, the latest one; and adding in several
    /// batches gives the same window as adding at once (count windows).
    #[test]
    fn batches_equal_one_add(
        turns in prop::collection::vec(turn(), 1..10),
        max in 1usize..16,
        pair_safe in any::<bool>(),
        cuts in prop::collection::vec(0usize..100, 0..6),
        greeting in prop::bool::weighted(0.2),
    ) {
        // Damage inside a turn cannot be told from a turn still in progress until the next
        // message arrives, so batches equal one add for whole, undamaged data only.
        let (mut msgs, _) = build(&turns, false);
        if greeting {
            msgs.insert(0, Message::assistant("hello, how can I help?"));
        }
        let boundary = if pair_safe { TurnBoundary::PairSafe } else { TurnBoundary::User };
        let policy = WindowPolicy::messages(max).with_boundary(boundary);
        let make = || ChatMemory::builder(InMemoryStore::new()).policy(policy.clone()).counter(Arc::new(Heuristic)).build().expect("valid memory settings");
        let id = ConversationId::new("p").unwrap();
        let (once, batched) = block_on(async {
            let a = make();
            a.add(&id, msgs.clone()).await.unwrap();
            let b = make();
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (msgs.len() + 1)).collect();
            points.push(0);
            points.push(msgs.len());
            points.sort_unstable();
            for w in points.windows(2) {
                b.add(&id, msgs[w[0]..w[1]].to_vec()).await.unwrap();
            }
            (a.get(&id).await.unwrap(), b.get(&id).await.unwrap())
        });
        prop_assert_eq!(&once, &batched);
        prop_assert!(once.len() <= max);
        let systems: Vec<usize> = once.iter().enumerate().filter(|(_, m)| m.is_system()).map(|(i, _)| i).collect();
        prop_assert!(systems.is_empty() || systems == vec![0]);
        if let Some(last_sys) = msgs.iter().rev().find(|m| m.is_system()) {
            prop_assert_eq!(&once[0], last_sys);
        }
        if !pair_safe {
            let first_turn = once.iter().find(|m| !m.is_system());
            // A user message, or the greeting that opens the conversation.
            prop_assert!(first_turn.is_none_or(|m| m.role() == Role::User || (greeting && m == &msgs[0])));
        }
    }

    /// Block eviction, turn by turn: the window never exceeds the budget and keeps the
    /// contract; while it fits its start stays, so each window begins with the previous one;
    /// once it overflows it becomes the longest valid run within the low-water mark.
    #[test]
    fn block_eviction_keeps_prefixes_and_evicts_to_the_low_water_mark(
        turns in prop::collection::vec(turn(), 1..16),
        sys in prop::option::of(1u32..40),
        policy in policy(),
        low_share in 1usize..100,
    ) {
        let max = match policy.budget() { Budget::Messages(n) | Budget::Tokens(n) => n };
        prop_assume!(max >= 2);
        let low = (max * low_share / 100).clamp(1, max - 1);
        let block = policy.clone().evict_to(low).unwrap();
        let low_policy = WindowPolicy::new(match policy.budget() {
            Budget::Messages(_) => Budget::Messages(low),
            Budget::Tokens(_) => Budget::Tokens(low),
        }).unwrap().with_boundary(policy.boundary());
        let (msgs, _) = build(&turns, false);
        let all = stored(&msgs);
        // Grow the conversation one generated turn at a time (a user message starts each).
        let ends: Vec<usize> = all.iter().enumerate().skip(1)
            .filter(|(_, m)| m.message.role() == Role::User).map(|(i, _)| i)
            .chain(std::iter::once(all.len())).collect();
        let mut start = 0;
        let mut previous: Vec<u64> = Vec::new();
        for end in ends {
            let tail: Vec<&StoredMessage> = all[start..end].iter().collect();
            let sel = select(&tail, sys, &block, &Heuristic);
            let run: Vec<&StoredMessage> = sel.indices.iter().map(|&i| tail[i]).collect();
            prop_assert!(run_ok(&run, tail.first().copied(), sys, &block), "breaks the contract: {:?}", sel);
            let seqs: Vec<u64> = run.iter().map(|m| m.seq).collect();
            if sel.start == 0 && !previous.is_empty() && previous.first() == seqs.first() {
                prop_assert!(seqs.starts_with(&previous), "no eviction, yet the window changed its beginning");
            }
            if sel.start > 0 {
                // Evicted: the longest valid run within the low-water mark.
                prop_assert!(run_ok(&run, tail.first().copied(), sys, &low_policy), "an eviction left more than the low-water mark");
                for p in 0..tail.len() - run.len() {
                    prop_assert!(!run_ok(&tail[p..], tail.first().copied(), sys, &low_policy), "a longer run from {} fits the low-water mark", p);
                }
            }
            start += sel.start;
            previous = seqs;
        }
    }

    /// Turn by turn on the advisor's path (load, prompt, answer, commit), under token budgets
    /// too: the prompt and the window after each commit are what `select` chooses over the
    /// whole conversation, counted from scratch. The memory plans from the log it shares with
    /// the store and the token sums kept with it; this checks that against the plain rule.
    #[test]
    fn turns_planned_from_the_shared_log_match_select_over_everything(
        mut turns in prop::collection::vec(turn(), 1..14),
        policy in policy(),
        plain in any::<bool>(),
    ) {
        if plain {
            // No tool calls anywhere: every window takes the plain path.
            turns.iter_mut().for_each(|t| t.rounds.clear());
        }
        let (msgs, _) = build(&turns, false);
        // Grouped into turns, each from a user message (or a system message before it) on.
        let mut groups: Vec<Vec<Message>> = Vec::new();
        for m in msgs {
            let opens = m.is_system() || (m.role() == Role::User && !groups.last().is_some_and(|g| g.iter().all(Message::is_system)));
            if opens || groups.is_empty() {
                groups.push(Vec::new());
            }
            groups.last_mut().unwrap().push(m);
        }
        let memory = ChatMemory::builder(InMemoryStore::new())
            .policy(policy.clone())
            .retention(Retention::KeepHistory)
            .counter(Heuristic)
            .build()
            .expect("valid memory settings");
        let id = ConversationId::new("p").unwrap();
        let count = |m: &Message| Heuristic.count_message(m) as u32;
        // The window's indices into `all`.
        let expected = |all: &[Message], system: Option<&Message>| -> Vec<usize> {
            let stored: Vec<StoredMessage> = all
                .iter()
                .enumerate()
                .map(|(i, m)| StoredMessage::new(i as u64 + 1, count(m), m.clone()))
                .collect();
            select(&stored, system.map(count), &policy, &Heuristic).indices
        };
        let mut all: Vec<Message> = Vec::new();
        let mut system: Option<Message> = None;
        block_on(async {
            for group in &groups {
                let opening = group.iter().take_while(|m| m.is_system() || m.role() == Role::User).count();
                let mut turn = memory.begin(&id).await.unwrap();
                turn.extend(group[..opening].to_vec());
                let mut seen = all.clone();
                let mut seen_system = system.clone();
                for m in &group[..opening] {
                    if m.is_system() { seen_system = Some(m.clone()); } else { seen.push(m.clone()); }
                }
                // The stored messages the window keeps once the turn's are added, then the
                // turn's own (the model always sees them).
                let prompt: Vec<Message> = turn.prompt().into_iter().filter(|m| !m.is_system()).cloned().collect();
                let kept = expected(&seen, seen_system.as_ref()).into_iter().filter(|&i| i < all.len());
                let want: Vec<Message> = kept.map(|i| all[i].clone()).chain(seen[all.len()..].iter().cloned()).collect();
                prop_assert_eq!(prompt, want, "the prompt");
                for m in &group[opening..] {
                    turn.push(m.clone());
                }
                turn.commit().await.unwrap();
                for m in group {
                    if m.is_system() { system = Some(m.clone()); } else { all.push(m.clone()); }
                }
                let window: Vec<Message> = memory.load(&id).await.unwrap().turns().cloned().collect();
                let want: Vec<Message> = expected(&all, system.as_ref()).into_iter().map(|i| all[i].clone()).collect();
                prop_assert_eq!(window, want, "the window after the commit");
            }
            Ok(())
        })?;
    }
}
