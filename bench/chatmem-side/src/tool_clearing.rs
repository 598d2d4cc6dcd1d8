//! TC, clearing old tool results: chatmem's arms on the tool-heavy agent transcript that
//! `bench/python/clearing.py transcript` writes (BENCH_TC_TRANSCRIPT names the file; the
//! LangChain arms replay the same file).
//!
//! Each arm replays the transcript through the advisor's path: a turn is `begin`, the user
//! message pushed, then before every model call (one before each round of tool calls, one for
//! the final answer) the `prompt`, each round's call message and results pushed after it, the
//! answer pushed and one `commit`. Every call's prompt is measured as sent: its tokens (cl100k,
//! chatmem's formula), what the same messages cost uncleared, the turns it holds (its user
//! messages), whether it begins with the previous call's prompt message for message (what a
//! provider's prefix cache can serve), and whether a tool message lacks its call before it or a
//! call its result after it.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use bench_common as b;
use chatmem::{
    ChatMemory, Cl100k, ClearToolResults, ConversationId, InMemoryStore, Message, TokenCounter, ToolCall, WindowPolicy,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Res;

/// The budget every arm has, the system message and the list's overhead included.
pub const BUDGET: usize = 20_000;
/// The most recent tool uses the tuned arm keeps whole (LangChain's keep-1 arm keeps as many).
/// At the default, 3, the newest uses held whole (about 5,500 tokens here) leave too little
/// of the budget to append two turns between clearings while holding 3x the turns: the sweep
/// shows both.
pub const KEEP: usize = 1;
/// The tuned clearing arms' trigger: the LangChain arm has the same (bench/python/clearing.py).
/// From the block up to 10,000 the trigger gave the same figures at every setting tried: the
/// results a window keeps whole (the newest `keep`, a block not yet full) mostly exceed it, so
/// every full block is cleared; a trigger nearer the budget sends more tokens for the same turns.
pub const TRIGGER: usize = 10_000;

/// One turn of the transcript: the user message, the rounds of tool calls with their results,
/// the answer.
struct TurnScript {
    user: Message,
    rounds: Vec<(Message, Vec<Message>)>,
    answer: Message,
}

struct Transcript {
    system: Message,
    turns: Vec<TurnScript>,
    sha256_hex: String,
}

fn text(v: &Value, key: &str) -> Res<String> {
    v[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("transcript: {key} is not a string"))
}

fn load(path: &str) -> Res<Transcript> {
    let raw = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let v: Value = serde_json::from_slice(&raw).map_err(|e| format!("{path}: {e}"))?;
    let mut turns = Vec::new();
    for t in v["turns"].as_array().ok_or("transcript: no turns")? {
        let mut rounds = Vec::new();
        for r in t["rounds"].as_array().ok_or("transcript: no rounds")? {
            let calls = r["calls"].as_array().ok_or("transcript: no calls")?;
            let results = r["results"].as_array().ok_or("transcript: no results")?;
            let mut tool_calls = Vec::new();
            let mut tool_results = Vec::new();
            for (c, result) in calls.iter().zip(results) {
                let id = text(c, "id")?;
                tool_calls.push(ToolCall::new(id.clone(), text(c, "name")?, text(c, "arguments")?));
                let result = result.as_str().ok_or("transcript: a result is not a string")?;
                tool_results.push(Message::tool_result(id, result));
            }
            rounds.push((Message::assistant_tool_calls(tool_calls), tool_results));
        }
        turns.push(TurnScript {
            user: Message::user(text(t, "user")?),
            rounds,
            answer: Message::assistant(text(t, "answer")?),
        });
    }
    Ok(Transcript {
        system: Message::system(text(&v, "system")?),
        turns,
        sha256_hex: Sha256::digest(&raw).iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// A message's hash over what is sent of it: the key of the token counts already made.
fn sent_hash(m: &Message) -> u64 {
    let mut h = DefaultHasher::new();
    m.role().as_str().hash(&mut h);
    m.text().hash(&mut h);
    m.tool_call_id().hash(&mut h);
    m.name.hash(&mut h);
    for c in m.tool_calls() {
        (&c.id, &c.name, &c.arguments).hash(&mut h);
    }
    h.finish()
}

/// cl100k counts of messages, each counted once (the prompts repeat the same messages).
#[derive(Default)]
struct Counts(HashMap<u64, usize>);

impl Counts {
    fn message(&mut self, m: &Message) -> usize {
        *self.0.entry(sent_hash(m)).or_insert_with(|| Cl100k.count_message(m))
    }

    fn list<'a>(&mut self, ms: impl IntoIterator<Item = &'a Message>) -> usize {
        chatmem::tokens::PER_LIST + ms.into_iter().map(|m| self.message(m)).sum::<usize>()
    }
}

/// Every call's figures for one arm, as the result row carries them.
#[derive(Default)]
struct Calls {
    turn: Vec<usize>,
    tokens: Vec<usize>,
    uncleared: Vec<usize>,
    /// The tokens of the messages the prompt begins with that also began the previous prompt
    /// (what a provider's prefix cache could serve of it).
    cached: Vec<usize>,
    turns: Vec<usize>,
    prefix: Vec<u8>,
    cleared: Vec<usize>,
    /// Why each prompt that does not begin with the previous one does not: the window's start
    /// moved (evicted), a result that was sent whole is now cleared (cleared), or neither
    /// (other: not expected of any arm).
    breaks: HashMap<&'static str, usize>,
    orphans: usize,
    missing: usize,
    over_budget: usize,
    /// Calls whose `Turn::cleared()` disagrees with what the prompt shows (results cleared,
    /// tokens saved).
    cleared_report_mismatches: usize,
}

/// (orphan tool messages, calls without their result) in a prompt.
fn pairs(prompt: &[&Message]) -> (usize, usize) {
    let mut orphans = 0;
    let mut missing = 0;
    for (i, m) in prompt.iter().enumerate() {
        if let Some(id) = m.tool_call_id()
            && !prompt[..i].iter().any(|p| p.tool_calls().iter().any(|c| c.id == id))
        {
            orphans += 1;
        }
        for c in m.tool_calls() {
            if !prompt[i + 1..].iter().any(|p| p.tool_call_id() == Some(c.id.as_str())) {
                missing += 1;
            }
        }
    }
    (orphans, missing)
}

async fn replay(t: &Transcript, policy: WindowPolicy, id: &ConversationId) -> Res<Calls> {
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(policy)
        .counter(Cl100k)
        .build()
        .map_err(|e| e.to_string())?;
    let mut counts = Counts::default();
    // The results as stored, by call id: what a cleared one would have cost.
    let mut original: HashMap<String, Message> = HashMap::new();
    let mut calls = Calls::default();
    let mut previous: Vec<Message> = Vec::new();
    for (i, script) in t.turns.iter().enumerate() {
        let mut turn = memory.begin(id).await.map_err(|e| e.to_string())?;
        if turn.loaded().system().is_none() {
            turn.push(t.system.clone());
        }
        turn.push(script.user.clone());
        for step in 0..=script.rounds.len() {
            let prompt = turn.prompt();
            let tokens = counts.list(prompt.iter().copied());
            let mut uncleared = tokens;
            let mut cleared = 0;
            for m in &prompt {
                if let Some(stored) = m.tool_call_id().and_then(|id| original.get(id))
                    && stored != *m
                {
                    cleared += 1;
                    uncleared = uncleared + counts.message(stored) - counts.message(m);
                }
            }
            let reported = turn.cleared();
            if reported.results != cleared || reported.tokens_saved != (uncleared - tokens) as u64 {
                calls.cleared_report_mismatches += 1;
            }
            let (orphans, missing) = pairs(&prompt);
            calls.orphans += orphans;
            calls.missing += missing;
            calls.over_budget += usize::from(tokens > BUDGET);
            calls.turn.push(i);
            calls.tokens.push(tokens);
            calls.uncleared.push(uncleared);
            calls
                .turns
                .push(prompt.iter().filter(|m| m.role() == chatmem::Role::User).count());
            let stable = !previous.is_empty()
                && prompt.len() >= previous.len()
                && previous.iter().zip(&prompt).all(|(a, b)| a == *b);
            calls.prefix.push(u8::from(stable));
            let common = previous.iter().zip(&prompt).take_while(|(a, b)| *a == **b).count();
            calls
                .cached
                .push(prompt[..common].iter().map(|m| counts.message(m)).sum());
            if !previous.is_empty() && !stable {
                let at = previous.iter().zip(&prompt).position(|(a, b)| a != *b);
                let newly_cleared = at.is_some_and(|d| {
                    prompt[d]
                        .tool_call_id()
                        .and_then(|id| original.get(id))
                        .is_some_and(|s| s != prompt[d])
                        && previous[d] != *prompt[d]
                        && previous[d].tool_call_id() == prompt[d].tool_call_id()
                });
                let start_moved = previous.get(1) != prompt.get(1).copied();
                let cause = if start_moved {
                    "evicted"
                } else if newly_cleared {
                    "cleared"
                } else {
                    "other"
                };
                *calls.breaks.entry(cause).or_default() += 1;
            }
            calls.cleared.push(cleared);
            previous = prompt.into_iter().cloned().collect();
            if let Some((call, results)) = script.rounds.get(step) {
                turn.push(call.clone());
                for r in results {
                    if let Some(id) = r.tool_call_id() {
                        original.insert(id.to_owned(), r.clone());
                    }
                    turn.push(r.clone());
                }
            }
        }
        turn.push(script.answer.clone());
        turn.commit().await.map_err(|e| e.to_string())?;
    }
    let _ = memory.clear(id).await;
    Ok(calls)
}

/// One arm's policy settings: the budget is [`BUDGET`] for all.
#[derive(Clone, Copy)]
struct Settings {
    /// The most recent tool uses kept whole.
    keep: usize,
    evict_to: Option<usize>,
    /// `(trigger_tokens, clear_at_least_tokens)`, or no clearing; a trigger of `None` is the
    /// default (the budget).
    clearing: Option<(Option<usize>, usize)>,
}

impl Settings {
    fn policy(self) -> Res<WindowPolicy> {
        let e = |e: chatmem::Error| e.to_string();
        let mut policy = WindowPolicy::tokens(BUDGET);
        if let Some(low) = self.evict_to {
            policy = policy.evict_to(low).map_err(e)?;
        }
        if let Some((trigger, at_least)) = self.clearing {
            let mut clear = ClearToolResults::new(self.keep)
                .map_err(e)?
                .clear_at_least_tokens(at_least);
            if let Some(t) = trigger {
                clear = clear.trigger_tokens(t);
            }
            policy = policy.with_clearing(clear).map_err(e)?;
        }
        Ok(policy)
    }

    fn json(self) -> Value {
        let mut v = json!({"max_tokens": BUDGET});
        if let Some(low) = self.evict_to {
            v["evict_to"] = json!(low);
        }
        if let Some((trigger, at_least)) = self.clearing {
            v["keep"] = json!(self.keep);
            v["trigger_tokens"] = json!(trigger.unwrap_or(BUDGET));
            v["clear_at_least_tokens"] = json!(at_least);
        }
        v
    }
}

/// The arms, by name. The tuned clearing arms are what the sweep found (see BENCHMARKS.md):
/// the most prompts that begin with the previous one among the settings that hold 3x the turns
/// of the window alone, at keep 1 and at the default keep 3.
const ARMS: [(&str, Settings); 5] = [
    (
        "token window 20,000",
        Settings {
            keep: 3,
            evict_to: None,
            clearing: None,
        },
    ),
    (
        "token window 20,000, evict_to 15,000",
        Settings {
            keep: 3,
            evict_to: Some(15_000),
            clearing: None,
        },
    ),
    (
        "clearing, defaults",
        Settings {
            keep: 3,
            evict_to: None,
            clearing: Some((None, 0)),
        },
    ),
    (
        "clearing, tuned, keep 3",
        Settings {
            keep: 3,
            evict_to: Some(17_000),
            clearing: Some((Some(TRIGGER), 6_000)),
        },
    ),
    (
        "clearing, tuned",
        Settings {
            keep: KEEP,
            evict_to: Some(12_500),
            clearing: Some((Some(TRIGGER), 10_000)),
        },
    ),
];

/// The sweep's grid: blocks and low-water marks, the trigger [`TRIGGER`] (or the block, when
/// larger); what each trades between turns held, tokens sent and prefix stability.
fn sweep_grid() -> Vec<Settings> {
    let mut grid = Vec::new();
    for keep in [KEEP, 3] {
        for at_least in [0, 2_000, 4_000, 6_000, 8_000, 10_000, 12_000] {
            for evict_to in [
                None,
                Some(10_000),
                Some(12_500),
                Some(15_000),
                Some(17_000),
                Some(18_500),
            ] {
                grid.push(Settings {
                    keep,
                    evict_to,
                    clearing: Some((Some(TRIGGER.max(at_least)), at_least)),
                });
            }
        }
    }
    grid
}

/// What the sweep keeps of a replay: one summary row (`TC-sweep`).
fn summary(c: &Calls) -> Value {
    let n = c.tokens.len().max(1) as f64;
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / n;
    json!({
        "mean_tokens": mean(&c.tokens),
        "mean_uncleared": mean(&c.uncleared),
        "mean_turns": mean(&c.turns),
        "prefix_share": c.prefix.iter().skip(1).map(|&p| f64::from(p)).sum::<f64>() / (n - 1.0),
        "breaks": c.breaks,
        "orphans": c.orphans,
        "missing_results": c.missing,
        "over_budget": c.over_budget,
    })
}

/// Runs TC when BENCH_TC_TRANSCRIPT names the transcript (bench/run.sh writes it).
pub async fn run(plan: &b::Plan, run: &str) -> Res<()> {
    if !plan.runs("TC") {
        return Ok(());
    }
    let Ok(path) = std::env::var("BENCH_TC_TRANSCRIPT") else {
        b::progress("chatmem: BENCH_TC_TRANSCRIPT not set, TC skipped (bench/run.sh writes the transcript)");
        return Ok(());
    };
    let t = load(&path)?;
    let mut counts = Counts::default();
    let all: Vec<&Message> = std::iter::once(&t.system)
        .chain(t.turns.iter().flat_map(|s| {
            std::iter::once(&s.user)
                .chain(s.rounds.iter().flat_map(|(c, rs)| std::iter::once(c).chain(rs)))
                .chain(std::iter::once(&s.answer))
        }))
        .collect();
    let transcript_tokens = counts.list(all.iter().copied());
    for (k, (variant, settings)) in ARMS.iter().enumerate() {
        let id = ConversationId::new(format!("bench-{run}-tc-{k}")).map_err(|e| e.to_string())?;
        let started = std::time::Instant::now();
        let c = replay(&t, settings.policy()?, &id).await?;
        b::progress(&format!(
            "chatmem TC {variant}: {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        b::emit(
            "TC",
            crate::SYS,
            "memory",
            json!({
                "variant": variant,
                "settings": settings.json(),
                "budget": BUDGET,
                "transcript_sha256": t.sha256_hex,
                "transcript_messages": all.len(),
                "transcript_tokens": transcript_tokens,
                "calls": {"turn": c.turn, "tokens": c.tokens, "uncleared": c.uncleared, "cached": c.cached, "turns": c.turns, "prefix": c.prefix, "cleared": c.cleared},
                "breaks": c.breaks,
                "orphans": c.orphans,
                "missing_results": c.missing,
                "over_budget": c.over_budget,
                "cleared_report_mismatches": c.cleared_report_mismatches,
            }),
        );
    }
    // The sweep is the full run's (a minute of a release build; several of the quick run's
    // debug build): BENCH_TC_SWEEP=1 runs it in a quick run too.
    if !plan.quick || std::env::var_os("BENCH_TC_SWEEP").is_some() {
        for (k, settings) in sweep_grid().into_iter().enumerate() {
            let id = ConversationId::new(format!("bench-{run}-tc-sweep-{k}")).map_err(|e| e.to_string())?;
            let c = replay(&t, settings.policy()?, &id).await?;
            let mut row = summary(&c);
            row["settings"] = settings.json();
            b::emit("TC-sweep", crate::SYS, "memory", row);
        }
        b::progress("chatmem TC sweep done");
    }
    Ok(())
}
