//! Property tests of clearing old tool results ([`ClearToolResults`]): over random tool-heavy
//! conversations and settings, through [`ChatMemory`] turn by turn (every prompt a tool loop
//! sends) and through the pure rule ([`select`]).

use std::collections::HashMap;
use std::sync::Arc;

use chatmem::store::StoredMessage;
use chatmem::window::{CLEARED_ARGUMENTS, cleared_placeholder, select};
use chatmem::{
    Budget, ChatMemory, ClearToolResults, ConversationId, Heuristic, InMemoryStore, Message, Retention, Role,
    TokenCounter, ToolCall, TurnBoundary, WindowPolicy,
};
use proptest::prelude::*;

const TOOLS: [&str; 3] = ["get_order", "search", "get_policy"];

/// One generated turn: the user's question, tool rounds (each: the calls' tools and result
/// sizes in bytes), then an answer.
#[derive(Debug, Clone)]
struct GenTurn {
    question: usize,
    rounds: Vec<Vec<(usize, usize)>>,
}

fn gen_turn() -> impl Strategy<Value = GenTurn> {
    (
        0usize..120,
        prop::collection::vec(prop::collection::vec((0usize..3, 0usize..2400), 1..=3), 0..=2),
    )
        .prop_map(|(question, rounds)| GenTurn { question, rounds })
}

/// The messages of each turn, in order (call ids unique across the conversation).
fn messages(turns: &[GenTurn]) -> Vec<Vec<Message>> {
    let mut call = 0;
    turns
        .iter()
        .enumerate()
        .map(|(t, turn)| {
            let mut out = vec![Message::user(format!("q{t} {}", "w ".repeat(turn.question)))];
            for round in &turn.rounds {
                let calls: Vec<ToolCall> = round
                    .iter()
                    .map(|&(tool, _)| {
                        call += 1;
                        ToolCall::new(
                            format!("c{call}"),
                            TOOLS[tool],
                            format!("{{\"order\":\"LC{call:012}\"}}"),
                        )
                    })
                    .collect();
                out.push(Message::assistant_tool_calls(calls.clone()));
                for (c, &(_, size)) in calls.iter().zip(round) {
                    let body = format!("{{\"id\":\"{}\",\"data\":\"{}\"}}", c.id, "x".repeat(size));
                    out.push(Message::tool_result(&c.id, body));
                }
            }
            out.push(Message::assistant(format!("a{t} done")));
            out
        })
        .collect()
}

/// Clearing's settings: keep, the block, the trigger as a share of the budget, whether a tool is
/// excluded, whether inputs are cleared, whether the window may start on any message but a
/// tool result (pair-safe) rather than on a user message.
type Clearing = (usize, usize, Option<usize>, bool, bool, bool);

fn clearing() -> impl Strategy<Value = Clearing> {
    (
        1usize..5,
        0usize..600,
        prop::option::of(0usize..100),
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
}

/// A token policy with clearing, or `None` when the generated settings are refused.
fn policy(budget: usize, evict: Option<usize>, c: Clearing) -> Option<WindowPolicy> {
    let (keep, block, trigger_share, exclude, inputs, pair_safe) = c;
    let mut clear = ClearToolResults::new(keep)
        .ok()?
        .clear_at_least_tokens(block)
        .clear_inputs(inputs);
    if let Some(share) = trigger_share {
        clear = clear.trigger_tokens(block.max(budget * share / 100));
    }
    if exclude {
        clear = clear.exclude_tool("get_policy");
    }
    let boundary = if pair_safe {
        TurnBoundary::PairSafe
    } else {
        TurnBoundary::User
    };
    let mut policy = WindowPolicy::try_tokens(budget).ok()?.with_boundary(boundary);
    if let Some(share) = evict {
        policy = policy.evict_to((budget * share / 100).clamp(1, budget - 1)).ok()?;
    }
    policy.with_clearing(clear).ok()
}

/// What one prompt sent, as the tests read it.
struct Sent {
    prompt: Vec<Message>,
    cleared: chatmem::Cleared,
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// Every prompt of every model call of the conversation (one per tool round and one for the
/// answer), and the memory after it.
fn run(turns: &[Vec<Message>], policy: &WindowPolicy, retention: Retention) -> (Vec<Sent>, Vec<Message>) {
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(policy.clone())
        .retention(retention)
        .counter(Arc::new(Heuristic))
        .build()
        .expect("valid settings");
    let id = ConversationId::new("c").expect("an id");
    block_on(async {
        let mut sent = Vec::new();
        memory
            .add(&id, [Message::system("You are the shop's after-sale desk.")])
            .await
            .expect("added");
        for turn in turns {
            let mut t = memory.begin(&id).await.expect("begun");
            for m in turn {
                // The model is called before each assistant message.
                if m.role() == Role::Assistant {
                    sent.push(Sent {
                        prompt: t.prompt().into_iter().cloned().collect(),
                        cleared: t.cleared(),
                    });
                }
                t.push(m.clone());
            }
            t.commit().await.expect("committed");
        }
        let history = memory.history(&id).await.expect("history");
        (sent, history)
    })
}

/// The tool calls of a prompt by id: (tool, arguments as sent).
fn calls(prompt: &[Message]) -> HashMap<String, (String, String)> {
    prompt
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.clone(), (c.name.clone(), c.arguments.clone())))
        .collect()
}

fn first_turn(prompt: &[Message]) -> Option<&Message> {
    prompt.iter().find(|m| !m.is_system())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// Every prompt: no orphan result and no unanswered call (but the one being answered),
    /// within the budget as sent unless the turn alone overflows it, the newest `keep` uses
    /// whole, excluded tools whole, each placeholder exact; memory keeps every original.
    #[test]
    fn every_prompt_keeps_the_rules(
        turns in prop::collection::vec(gen_turn(), 1..14),
        budget in 300usize..6000,
        evict in prop::option::weighted(0.3, 30usize..95),
        c in clearing(),
    ) {
        let Some(policy) = policy(budget, evict, c) else { return Ok(()) };
        let clear = policy.clearing().cloned().expect("clearing");
        let turns = messages(&turns);
        let (sent, history) = run(&turns, &policy, Retention::KeepHistory);
        let stored: Vec<Message> = turns.iter().flatten().cloned().collect();
        let history: Vec<Message> = history.into_iter().filter(|m| !m.is_system()).collect();
        prop_assert_eq!(&history, &stored, "memory keeps every original");
        let originals: HashMap<&str, &Message> =
            stored.iter().filter_map(|m| m.tool_call_id().map(|id| (id, m))).collect();
        for s in &sent {
            let prompt = &s.prompt;
            let tokens = Heuristic.count_messages(prompt);
            if tokens > budget {
                // Only a turn longer than the window: the prompt is then that turn alone.
                let first = first_turn(prompt).expect("a message");
                prop_assert!(first.role() == Role::User && prompt.iter().filter(|m| m.role() == Role::User).count() == 1,
                    "{tokens} > {budget} with more than the current turn");
            }
            let called = calls(prompt);
            let mut seen: Vec<&str> = Vec::new();
            for (k, m) in prompt.iter().enumerate() {
                if let Some(id) = m.tool_call_id() {
                    prop_assert!(called.contains_key(id), "orphan result {id}");
                    let call_at = prompt[..k].iter().rposition(|p| p.tool_calls().iter().any(|c| c.id == id));
                    prop_assert!(call_at.is_some(), "result {id} before its call");
                    seen.push(id);
                }
            }
            for (id, (tool, args)) in &called {
                let original = originals[id.as_str()];
                let result = prompt.iter().find(|m| m.tool_call_id() == Some(id));
                let Some(result) = result else { continue }; // the calls being answered
                let is_cleared = result != original;
                if is_cleared {
                    prop_assert!(!clear.excludes(tool), "an excluded tool's result was cleared");
                    let tokens = u32::try_from(Heuristic.count_message(original)).unwrap();
                    prop_assert_eq!(result.text().map(|t| t.into_owned()), Some(cleared_placeholder(tool, id, tokens)));
                    prop_assert_eq!(result.role(), Role::Tool);
                    if clear.clears_inputs() {
                        prop_assert_eq!(args.as_str(), CLEARED_ARGUMENTS);
                    }
                } else {
                    prop_assert_ne!(args.as_str(), CLEARED_ARGUMENTS, "a whole result's call lost its arguments");
                }
            }
            let newest = seen.len().saturating_sub(clear.keep());
            for id in &seen[newest..] {
                let result = prompt.iter().find(|m| m.tool_call_id() == Some(id)).expect("seen");
                prop_assert_eq!(result, originals[id], "one of the newest {} uses was cleared", clear.keep());
            }
            let cleared = prompt.iter().filter(|m| m.tool_call_id().is_some_and(|id| **m != *originals[id])).count();
            prop_assert_eq!(cleared, s.cleared.results);
        }
    }

    /// While the window's first message stays, the cleared results only grow, each growth a
    /// block saving at least `clear_at_least_tokens`; and a prompt with as many cleared results
    /// as the one before begins with it, message for message (what a provider's cache serves).
    #[test]
    fn the_prompt_changes_only_when_a_block_is_cleared(
        turns in prop::collection::vec(gen_turn(), 1..16),
        budget in 1500usize..8000,
        evict in prop::option::weighted(0.5, 30usize..95),
        c in clearing(),
        keep_history in any::<bool>(),
    ) {
        let Some(policy) = policy(budget, evict, c) else { return Ok(()) };
        let block = policy.clearing().expect("clearing").block_tokens() as u64;
        let retention = if keep_history { Retention::KeepHistory } else { Retention::DropEvicted };
        let (sent, _) = run(&messages(&turns), &policy, retention);
        for pair in sent.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            if first_turn(&before.prompt) != first_turn(&after.prompt) {
                continue; // the window start moved
            }
            prop_assert!(after.cleared.results >= before.cleared.results, "a cleared result came back");
            if after.cleared.results == before.cleared.results {
                prop_assert!(after.prompt.starts_with(&before.prompt), "the prompt changed with no block cleared");
            } else {
                prop_assert!(after.cleared.tokens_saved >= before.cleared.tokens_saved + block.max(1),
                    "a block saved less than {block}");
            }
        }
    }

    /// The pure rule: the window as sent fits the budget, holds at least the turns the window
    /// without clearing holds (without block eviction), and clears nothing while the
    /// uncleared window is within the trigger; the tokens saved are exactly the difference.
    #[test]
    fn the_rule_fits_what_is_sent_and_holds_more(
        turns in prop::collection::vec(gen_turn(), 1..20),
        budget in 300usize..8000,
        c in clearing(),
        system in prop::option::of(1u32..60),
    ) {
        let Some(policy) = policy(budget, None, c) else { return Ok(()) };
        let stored: Vec<StoredMessage> = messages(&turns)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, m)| {
                let tokens = u32::try_from(Heuristic.count_message(&m)).unwrap();
                StoredMessage::new(i as u64 + 1, tokens, m)
            })
            .collect();
        let sel = select(&stored, system, &policy, &Heuristic);
        let plain = WindowPolicy::tokens(budget).with_boundary(policy.boundary());
        let plain = select(&stored, system, &plain, &Heuristic);
        prop_assert!(sel.start <= plain.start, "clearing held fewer messages");
        let sent: Vec<&Message> = sel.indices.iter().map(|&i| sel.replacement(i).unwrap_or(&stored[i].message)).collect();
        let as_stored: u64 = sel.indices.iter().map(|&i| u64::from(stored[i].tokens)).sum();
        let as_sent: u64 = sent.iter().map(|m| Heuristic.count_message(m) as u64).sum();
        prop_assert_eq!(as_stored - as_sent, sel.cleared.tokens_saved);
        let fixed = 3 + u64::from(system.unwrap_or(0));
        if !sel.indices.is_empty() {
            prop_assert!(fixed + as_sent <= budget as u64, "{} > {budget}", fixed + as_sent);
        }
        let trigger = policy.clearing().expect("clearing").trigger_for(Budget::Tokens(budget)) as u64;
        if fixed + as_stored <= trigger {
            prop_assert!(sel.cleared.is_empty(), "cleared within the trigger");
        }
        prop_assert!(sel.replaced.windows(2).all(|w| w[0].0 < w[1].0));
        prop_assert!(sel.replaced.iter().all(|(i, _)| sel.indices.contains(i)));
    }
}

/// A message-count window with clearing keeps its messages and sends old results as
/// placeholders once the window's tokens pass the trigger.
#[test]
fn a_message_window_clears_past_its_trigger() {
    let turns: Vec<Vec<Message>> = messages(&[
        GenTurn {
            question: 1,
            rounds: vec![vec![(0, 2000)], vec![(1, 2000)]],
        },
        GenTurn {
            question: 1,
            rounds: vec![vec![(0, 2000)]],
        },
    ]);
    let clear = ClearToolResults::new(1).expect("keep 1").trigger_tokens(1000);
    let policy = WindowPolicy::messages(50).with_clearing(clear).expect("valid");
    let (sent, _) = run(&turns, &policy, Retention::DropEvicted);
    let last = &sent.last().expect("prompts").prompt;
    assert_eq!(
        last.len(),
        1 + turns.iter().flatten().count() - 1,
        "every message stays"
    );
    let placeholders: Vec<String> = last
        .iter()
        .filter(|m| m.tool_call_id().is_some())
        .filter_map(|m| m.text().map(|t| t.into_owned()))
        .filter(|t| t.starts_with("[cleared: "))
        .collect();
    assert_eq!(
        placeholders,
        vec![
            "[cleared: get_order result for call c1, 511 tokens]".to_owned(),
            "[cleared: search result for call c2, 511 tokens]".to_owned()
        ]
    );
    // Under the trigger, nothing.
    let lax = WindowPolicy::messages(50)
        .with_clearing(ClearToolResults::new(1).expect("keep 1"))
        .expect("valid");
    let (sent, _) = run(&turns, &lax, Retention::DropEvicted);
    assert!(sent.iter().all(|s| s.cleared.is_empty()));
}
