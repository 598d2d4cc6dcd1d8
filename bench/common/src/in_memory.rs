//! The in-memory workloads (W1, W2, W2L) as one runner: every system's conversation is a
//! [`Turner`], and [`interleaved`] measures them in one process, taking turns in blocks.
//!
//! Why in one process: this VM switches between a fast and a slow phase within milliseconds
//! (each side alone varied 2.1–6.5 µs per W1 turn from run to run), so two figures measured
//! seconds apart, in two processes, can be a phase apart. Blocks of [`BLOCK`] turns, each system
//! in turn and the first system rotating, put every system in every phase alike.
//!
//! chatmem's cases are here too ([`chatmem_case`]), so the chatmem side alone (the quick run in
//! CI) and the peers' side beside chatmem measure the very same turn.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::time::{Duration, Instant};

use chatmem::{
    ChatMemory, Cl100k, ConversationId, Heuristic, InMemoryStore, Message, Store, TokenCounter, WindowPolicy,
};
use serde_json::{Value, json};

/// A boxed turn future (the peers' memories are behind trait objects).
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Turns a system runs before another takes over. Small enough that a block of the fastest
/// system (W1, ~3 µs a turn) stays within one phase of the VM's speed; large enough that the
/// switch (the next system's data coming back into cache) is a small part of a block.
pub const BLOCK: usize = 50;

/// One conversation as one system keeps it: a turn reads the window the next model call gets,
/// then stores the user message and the answer.
pub trait Turner: Send {
    fn turn(&mut self, user: String, answer: String) -> BoxFut<'_, ()>;

    /// Fields to add to the result row after the run (chatmem: the window's length).
    fn fields(&mut self) -> BoxFut<'_, Value> {
        Box::pin(async { Ok(json!({})) })
    }
}

/// A system's conversation under one configuration.
pub struct Case {
    pub system: &'static str,
    /// The configuration, when a system runs more than one (`"variant"` in the result row).
    pub variant: Option<&'static str>,
    pub turner: Box<dyn Turner>,
}

/// One turn on `id` as chatmem's advisor runs it (`begin`, which loads, the user message pushed
/// and the `prompt`, the answer pushed, one `commit`); the system message joins the first turn
/// only. Every bench workload's chatmem turn is this one.
pub async fn chatmem_turn<S: Store>(
    m: &ChatMemory<S>,
    id: &ConversationId,
    user: String,
    answer: String,
) -> Result<(), String> {
    let mut t = m.begin(id).await.map_err(|e| e.to_string())?;
    if t.loaded().system().is_none() {
        t.push(Message::system(crate::SYSTEM));
    }
    t.push(Message::user(user));
    black_box(t.prompt());
    t.push(Message::assistant(answer));
    t.commit().await.map(drop).map_err(|e| e.to_string())
}

/// The token budget that leaves `budget` for the turns after the system message (the system
/// message and the list overhead count toward chatmem's budget, not the peers').
pub fn chatmem_tokens(budget: usize) -> Result<WindowPolicy, String> {
    let sys = Cl100k.count_message(&Message::system(crate::SYSTEM));
    WindowPolicy::try_tokens(budget + sys + chatmem::tokens::PER_LIST).map_err(|e| e.to_string())
}

struct Chatmem {
    memory: ChatMemory<InMemoryStore>,
    id: ConversationId,
    window_messages: bool,
}

impl Turner for Chatmem {
    fn turn(&mut self, user: String, answer: String) -> BoxFut<'_, ()> {
        Box::pin(chatmem_turn(&self.memory, &self.id, user, answer))
    }

    fn fields(&mut self) -> BoxFut<'_, Value> {
        Box::pin(async {
            if !self.window_messages {
                return Ok(json!({}));
            }
            let loaded = self.memory.load(&self.id).await.map_err(|e| e.to_string())?;
            Ok(json!({"window_messages": loaded.len()}))
        })
    }
}

/// chatmem's cases for an in-memory workload: W1 with the default counter (cl100k) and with
/// the heuristic one, a 21-message window (the system message takes the extra slot); W2 and
/// W2L one each, with their token budgets.
pub fn chatmem_cases(workload: &str) -> Result<Vec<Case>, String> {
    let id = ConversationId::new(workload.to_ascii_lowercase()).map_err(|e| e.to_string())?;
    let built = |b: chatmem::ChatMemoryBuilder<InMemoryStore>| b.build().map_err(|e| e.to_string());
    let case = |variant, memory, window_messages| Case {
        system: "chatmem",
        variant,
        turner: Box::new(Chatmem {
            memory,
            id: id.clone(),
            window_messages,
        }),
    };
    let messages = || ChatMemory::builder(InMemoryStore::new()).policy(WindowPolicy::messages(crate::W1_MESSAGES + 1));
    Ok(match workload {
        "W1" => vec![
            case(Some("cl100k counter (default)"), built(messages())?, false),
            case(Some("heuristic counter"), built(messages().counter(Heuristic))?, false),
        ],
        "W2" | "W2L" => {
            let budget = if workload == "W2" {
                crate::W2_TOKENS
            } else {
                crate::W2L_TOKENS
            };
            let memory = built(ChatMemory::builder(InMemoryStore::new()).policy(chatmem_tokens(budget)?))?;
            vec![case(None, memory, true)]
        }
        other => return Err(format!("no in-memory workload {other:?}")),
    })
}

/// Measures `cases` taking turns in blocks of [`BLOCK`]: each case runs `warmup` unmeasured
/// turns first (stopping at half of `cap`), then up to `max` measured turns, and stops early
/// once its own time passes `cap` (with at least 3 measured). Returns each case with its
/// per-turn times in microseconds, in turn order. Turn `i`'s text is made inside the timed
/// turn, as [`crate::measure`] and the Python side do.
pub async fn interleaved(
    mut cases: Vec<Case>,
    warmup: usize,
    max: usize,
    cap: Duration,
) -> Result<Vec<(Case, Vec<f64>)>, String> {
    let n = cases.len();
    let mut next = vec![warmup; n];
    let mut spent = vec![Duration::ZERO; n];
    for (c, case) in cases.iter_mut().enumerate() {
        for i in 0..warmup {
            let t = Instant::now();
            case.turner
                .turn(crate::user_text(i, ""), crate::answer_text(i, ""))
                .await?;
            spent[c] += t.elapsed();
            if spent[c] > cap / 2 {
                next[c] = i + 1;
                break;
            }
        }
    }
    let mut samples: Vec<Vec<f64>> = (0..n).map(|_| Vec::with_capacity(max)).collect();
    let done = |s: &Vec<f64>, spent: Duration| s.len() >= max || (s.len() >= 3 && spent > cap);
    for block in 0.. {
        let mut ran = false;
        for k in 0..n {
            let c = (block + k) % n;
            for _ in 0..BLOCK {
                if done(&samples[c], spent[c]) {
                    break;
                }
                ran = true;
                let i = next[c];
                let t = Instant::now();
                cases[c]
                    .turner
                    .turn(crate::user_text(i, ""), crate::answer_text(i, ""))
                    .await?;
                let took = t.elapsed();
                spent[c] += took;
                samples[c].push(took.as_secs_f64() * 1e6);
                next[c] += 1;
            }
        }
        if !ran {
            break;
        }
    }
    Ok(cases.into_iter().zip(samples).collect())
}

/// The in-memory workloads, in the order they run.
pub const WORKLOADS: [&str; 3] = ["W1", "W2", "W2L"];

/// Runs `cases` of in-memory `workload` with [`interleaved`] at the plan's sizes and prints one
/// result row each. The sizes are set here once for every side: W1 and W2 take 100 warm-up turns
/// and `plan.memory_turns` measured; W2L is one conversation from its first turn,
/// `plan.long_turns` long, every turn's time kept (its plot needs them).
pub async fn run_workload(plan: &crate::Plan, workload: &str, cases: Vec<Case>) -> Result<(), String> {
    let (warmup, max, keep) = match workload {
        "W1" | "W2" => (100, plan.memory_turns, false),
        "W2L" => (0, plan.long_turns, true),
        other => return Err(format!("no in-memory workload {other:?}")),
    };
    for (mut case, s) in interleaved(cases, warmup, max, plan.memory_cap).await? {
        let mut f = crate::summary_fields(&s, keep);
        if let Some(v) = case.variant {
            f["variant"] = json!(v);
        }
        if let (Some(out), Value::Object(more)) = (f.as_object_mut(), case.turner.fields().await?) {
            out.extend(more);
        }
        crate::emit(workload, case.system, "memory", f);
    }
    crate::progress(&format!("{workload} done"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the order of its turns in a shared log.
    struct Logged {
        name: char,
        log: std::sync::Arc<std::sync::Mutex<String>>,
        sleep: Duration,
    }

    impl Turner for Logged {
        fn turn(&mut self, _: String, _: String) -> BoxFut<'_, ()> {
            Box::pin(async move {
                self.log.lock().map_err(|e| e.to_string())?.push(self.name);
                if !self.sleep.is_zero() {
                    std::thread::sleep(self.sleep);
                }
                Ok(())
            })
        }
    }

    fn logged(name: char, log: &std::sync::Arc<std::sync::Mutex<String>>, sleep: Duration) -> Case {
        Case {
            system: "test",
            variant: None,
            turner: Box::new(Logged {
                name,
                log: log.clone(),
                sleep,
            }),
        }
    }

    #[tokio::test]
    async fn cases_take_turns_in_blocks_and_the_first_rotates() {
        let log = std::sync::Arc::default();
        let cases = vec![logged('a', &log, Duration::ZERO), logged('b', &log, Duration::ZERO)];
        let out = interleaved(cases, 2, 2 * BLOCK + 10, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(out.iter().all(|(_, s)| s.len() == 2 * BLOCK + 10));
        let log = log.lock().unwrap().clone();
        let block = |c: char, n: usize| c.to_string().repeat(n);
        let expected = [
            "aabb".to_string(),
            block('a', BLOCK),
            block('b', BLOCK),
            block('b', BLOCK),
            block('a', BLOCK),
            block('a', 10),
            block('b', 10),
        ]
        .concat();
        assert_eq!(log, expected);
    }

    #[tokio::test]
    async fn a_slow_case_stops_at_its_cap_and_the_others_go_on() {
        let log = std::sync::Arc::default();
        let cases = vec![
            logged('s', &log, Duration::from_millis(20)),
            logged('f', &log, Duration::ZERO),
        ];
        let out = interleaved(cases, 0, 200, Duration::from_millis(70)).await.unwrap();
        let slow = out[0].1.len();
        assert!((3..=5).contains(&slow), "the slow case ran {slow} turns");
        assert_eq!(out[1].1.len(), 200);
    }

    #[tokio::test]
    async fn chatmem_cases_run_the_advisor_turn() {
        let out = interleaved(chatmem_cases("W1").unwrap(), 0, 30, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(out.len(), 2);
        let mut w2 = chatmem_cases("W2").unwrap();
        for i in 0..5 {
            w2[0]
                .turner
                .turn(crate::user_text(i, ""), crate::answer_text(i, ""))
                .await
                .unwrap();
        }
        // The system message and five turns, all within 4,000 tokens.
        assert_eq!(w2[0].turner.fields().await.unwrap(), json!({"window_messages": 11}));
        assert!(chatmem_cases("W9").is_err());
    }
}
