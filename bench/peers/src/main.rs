//! The Rust peers' side of the benchmark: rig-memory 0.44 (over rig-core's in-memory
//! conversation memory), langchain-rust 7 (window and token buffers; SQLite, PostgreSQL and
//! Redis histories) and daimon 0.25 (sliding and token windows; Redis memory), each
//! configured as its docs show, on the same workloads as `bench-chatmem`. A turn is what
//! each framework's agent does per model call: read the memory (and cut the window the model
//! gets), then store the user message and the answer. One JSON line per result on stdout.
//! The in-memory workloads (W1, W2, W2L) run chatmem's cases here too, taking turns with the
//! peers' in blocks (`bench_common::in_memory` says why); chatmem's core crate links no SQLite.
//!
//! Run with: `cargo run --release -- [--quick]` (from bench/peers).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bench_common::in_memory::{BoxFut, Case, Turner};
use bench_common::{self as b, Plan};
use daimon::memory::Memory as _;
use langchain_rust::schemas::BaseMemory;
use rig_memory::{ConversationMemory, InMemoryConversationMemory, IntoFilter};
use serde_json::json;
use tokio::sync::Mutex;

type Res<T> = Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The last `n` messages (the window a store-backed history is cut to before the call).
fn last<T>(all: &[T], n: Option<usize>) -> &[T] {
    match n {
        Some(n) if all.len() > n => &all[all.len() - n..],
        _ => all,
    }
}

/// cl100k token count of `text`, with tiktoken-rs as the peers' docs suggest.
fn cl100k(text: &str) -> usize {
    tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len()
}

// ---- rig-memory ----

struct Rig {
    mem: InMemoryConversationMemory,
    id: rig_core::id::ConversationId,
}

impl Turner for Rig {
    fn turn(&mut self, user: String, answer: String) -> BoxFut<'_, ()> {
        Box::pin(async move {
            black_box(self.mem.load(&self.id).await.map_err(err)?);
            let pair = vec![
                rig_core::completion::Message::user(user),
                rig_core::completion::Message::assistant(answer),
            ];
            self.mem.append(&self.id, pair).await.map_err(err)
        })
    }
}

fn rig_text(message: &rig_core::completion::Message) -> usize {
    use rig_core::completion::Message;
    use rig_core::message::{AssistantContent, UserContent};
    match message {
        Message::User { content, .. } => content
            .iter()
            .map(|c| match c {
                UserContent::Text(t) => cl100k(&t.text),
                _ => 0,
            })
            .sum(),
        Message::Assistant(a) => a
            .content
            .iter()
            .map(|c| match c {
                AssistantContent::Text(t) => cl100k(&t.text),
                _ => 0,
            })
            .sum(),
        Message::System { content } => cl100k(content),
    }
}

fn rig_messages(n: usize) -> Rig {
    Rig {
        mem: InMemoryConversationMemory::new()
            .with_filter(rig_memory::SlidingWindowMemory::last_messages(n).into_filter()),
        id: rig_core::id::ConversationId::new("c"),
    }
}

fn rig_tokens(budget: usize) -> Rig {
    Rig {
        mem: InMemoryConversationMemory::new()
            .with_filter(rig_memory::TokenWindowMemory::new(budget, rig_text).into_filter()),
        id: rig_core::id::ConversationId::new("c"),
    }
}

// ---- langchain-rust ----

struct Lc<M> {
    mem: M,
    window: Option<usize>,
}

impl<M: BaseMemory> Turner for Lc<M> {
    fn turn(&mut self, user: String, answer: String) -> BoxFut<'_, ()> {
        Box::pin(async move {
            let all = self.mem.messages().await.map_err(err)?;
            black_box(last(&all, self.window));
            self.mem.add_user_message(&user).await.map_err(err)?;
            self.mem.add_ai_message(&answer).await.map_err(err)
        })
    }
}

// ---- daimon ----

struct Dm<M> {
    mem: M,
    window: Option<usize>,
}

impl<M: daimon::memory::Memory> Turner for Dm<M> {
    fn turn(&mut self, user: String, answer: String) -> BoxFut<'_, ()> {
        Box::pin(async move {
            let all = self.mem.get_messages().await.map_err(err)?;
            black_box(last(&all, self.window));
            self.mem
                .add_message(&daimon::model::types::Message::user(user))
                .await
                .map_err(err)?;
            self.mem
                .add_message(&daimon::model::types::Message::assistant(answer))
                .await
                .map_err(err)
        })
    }
}

fn daimon_cl100k(m: &daimon::model::types::Message) -> usize {
    m.content.as_deref().map_or(0, cl100k)
}

async fn timed(t: &mut dyn Turner, warmup: usize, max: usize, cap: Duration) -> Res<Vec<f64>> {
    let t = Mutex::new(t);
    b::measure(warmup, max, cap, |i| {
        let t = &t;
        async move { t.lock().await.turn(b::user_text(i, ""), b::answer_text(i, "")).await }
    })
    .await
}

/// W1, W2 and W2L: chatmem's cases and the peers' in this one process, taking turns in blocks
/// (`b::in_memory::interleaved` says why).
async fn in_memory(plan: &Plan) -> Res<()> {
    let case = |system, variant, turner: Box<dyn Turner>| Case {
        system,
        variant,
        turner,
    };
    if plan.runs("W1") {
        let w = b::W1_MESSAGES;
        let mut cases = b::in_memory::chatmem_cases("W1")?;
        cases.extend([
            case(
                "langchain-rust",
                None,
                Box::new(Lc {
                    mem: langchain_rust::memory::WindowBufferMemory::new(w),
                    window: None,
                }),
            ),
            case(
                "daimon",
                None,
                Box::new(Dm {
                    mem: daimon::memory::SlidingWindowMemory::new(w),
                    window: None,
                }),
            ),
            case("rig-memory", None, Box::new(rig_messages(w))),
        ]);
        b::in_memory::run_workload(plan, "W1", cases).await?;
    }
    for (workload, budget) in [("W2", b::W2_TOKENS), ("W2L", b::W2L_TOKENS)] {
        if !plan.runs(workload) {
            continue;
        }
        let mut cases = b::in_memory::chatmem_cases(workload)?;
        cases.extend([
            case(
                "langchain-rust",
                Some("cl100k (built in)"),
                Box::new(Lc {
                    mem: langchain_rust::memory::TokenBufferMemory::new(budget),
                    window: None,
                }),
            ),
            case(
                "daimon",
                Some("cl100k (tiktoken-rs)"),
                Box::new(Dm {
                    mem: daimon::memory::TokenWindowMemory::new(budget).with_token_counter(daimon_cl100k),
                    window: None,
                }),
            ),
            case(
                "daimon",
                Some("default estimate (4 chars/token)"),
                Box::new(Dm {
                    mem: daimon::memory::TokenWindowMemory::new(budget),
                    window: None,
                }),
            ),
            case("rig-memory", Some("cl100k (tiktoken-rs)"), Box::new(rig_tokens(budget))),
        ]);
        b::in_memory::run_workload(plan, workload, cases).await?;
    }
    Ok(())
}

/// A store-backed peer: makes the memory of a conversation, seeds history in bulk, and reads
/// back every stored text (for the W4 check).
#[derive(Clone)]
enum StorePeer {
    LcSqlite(sqlx::SqlitePool),
    LcPostgres(sqlx::PgPool),
    LcRedis(String),
    DaimonRedis(String),
}

impl StorePeer {
    fn system(&self) -> &'static str {
        match self {
            StorePeer::DaimonRedis(_) => "daimon",
            _ => "langchain-rust",
        }
    }

    fn store(&self) -> &'static str {
        match self {
            StorePeer::LcSqlite(_) => "sqlite",
            StorePeer::LcPostgres(_) => "postgres",
            StorePeer::LcRedis(_) | StorePeer::DaimonRedis(_) => "redis",
        }
    }

    async fn make(&self, conv: &str) -> Res<Box<dyn Turner>> {
        let window = Some(b::W3_MESSAGES);
        Ok(match self {
            StorePeer::LcSqlite(pool) => Box::new(Lc {
                mem: langchain_rust::memory::SqliteMessageHistory::new(pool.clone(), conv),
                window,
            }),
            StorePeer::LcPostgres(pool) => Box::new(Lc {
                mem: langchain_rust::memory::PostgresMessageHistory::new(pool.clone(), conv),
                window,
            }),
            StorePeer::LcRedis(url) => Box::new(Lc {
                mem: langchain_rust::memory::RedisMessageHistory::from_url(url, conv)
                    .await
                    .map_err(err)?,
                window,
            }),
            StorePeer::DaimonRedis(url) => Box::new(Dm {
                mem: daimon::memory::RedisMemory::new(url, format!("daimon:{conv}"))
                    .await
                    .map_err(err)?,
                window,
            }),
        })
    }

    /// Appends `history` messages in bulk, serialized as the peer's own `add` would.
    async fn seed(&self, conv: &str, history: usize) -> Res<()> {
        if history == 0 {
            return Ok(());
        }
        let lc = |k: usize| {
            let m = if k.is_multiple_of(2) {
                langchain_rust::schemas::Message::new_human_message(b::user_text(k / 2, ""))
            } else {
                langchain_rust::schemas::Message::new_ai_message(b::answer_text(k / 2, ""))
            };
            serde_json::to_string(&m).map_err(err)
        };
        let table = langchain_rust::memory::DEFAULT_MESSAGE_HISTORY_TABLE;
        match self {
            StorePeer::LcSqlite(pool) => {
                // Creates the table as the history would.
                langchain_rust::memory::SqliteMessageHistory::new(pool.clone(), conv)
                    .messages()
                    .await
                    .map_err(err)?;
                let mut tx = pool.begin().await.map_err(err)?;
                for k in 0..history {
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "INSERT INTO {table} (session_id, message) VALUES (?, ?)"
                    )))
                    .bind(conv)
                    .bind(lc(k)?)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                }
                tx.commit().await.map_err(err)
            }
            StorePeer::LcPostgres(pool) => {
                langchain_rust::memory::PostgresMessageHistory::new(pool.clone(), conv)
                    .messages()
                    .await
                    .map_err(err)?;
                for chunk in (0..history).collect::<Vec<_>>().chunks(5_000) {
                    let rows = chunk.iter().map(|&k| lc(k)).collect::<Res<Vec<String>>>()?;
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "INSERT INTO {table} (session_id, message) SELECT $1, m FROM unnest($2::text[]) WITH ORDINALITY AS x(m, i) ORDER BY i"
                    )))
                    .bind(conv)
                    .bind(rows)
                    .execute(pool)
                    .await
                    .map_err(err)?;
                }
                Ok(())
            }
            StorePeer::LcRedis(url) | StorePeer::DaimonRedis(url) => {
                let daimon = matches!(self, StorePeer::DaimonRedis(_));
                let key = if daimon {
                    format!("daimon:{conv}")
                } else {
                    format!("{}{conv}", langchain_rust::memory::DEFAULT_REDIS_KEY_PREFIX)
                };
                let client = redis::Client::open(url.as_str()).map_err(err)?;
                let mut conn = client.get_multiplexed_async_connection().await.map_err(err)?;
                for chunk in (0..history).collect::<Vec<_>>().chunks(1_000) {
                    let rows = chunk
                        .iter()
                        .map(|&k| {
                            if daimon {
                                let m = if k.is_multiple_of(2) {
                                    daimon::model::types::Message::user(b::user_text(k / 2, ""))
                                } else {
                                    daimon::model::types::Message::assistant(b::answer_text(k / 2, ""))
                                };
                                serde_json::to_string(&m).map_err(err)
                            } else {
                                lc(k)
                            }
                        })
                        .collect::<Res<Vec<String>>>()?;
                    redis::cmd("RPUSH")
                        .arg(&key)
                        .arg(rows)
                        .query_async::<()>(&mut conn)
                        .await
                        .map_err(err)?;
                }
                Ok(())
            }
        }
    }

    /// Every stored text of `conv`, oldest first.
    async fn texts(&self, conv: &str) -> Res<Vec<String>> {
        Ok(match self {
            StorePeer::LcSqlite(pool) => {
                let h = langchain_rust::memory::SqliteMessageHistory::new(pool.clone(), conv);
                h.messages()
                    .await
                    .map_err(err)?
                    .into_iter()
                    .map(|m| m.content)
                    .collect()
            }
            StorePeer::LcPostgres(pool) => {
                let h = langchain_rust::memory::PostgresMessageHistory::new(pool.clone(), conv);
                h.messages()
                    .await
                    .map_err(err)?
                    .into_iter()
                    .map(|m| m.content)
                    .collect()
            }
            StorePeer::LcRedis(url) => {
                let h = langchain_rust::memory::RedisMessageHistory::from_url(url, conv)
                    .await
                    .map_err(err)?;
                h.messages()
                    .await
                    .map_err(err)?
                    .into_iter()
                    .map(|m| m.content)
                    .collect()
            }
            StorePeer::DaimonRedis(url) => {
                let h = daimon::memory::RedisMemory::new(url, format!("daimon:{conv}"))
                    .await
                    .map_err(err)?;
                h.get_messages()
                    .await
                    .map_err(err)?
                    .into_iter()
                    .filter_map(|m| m.content)
                    .collect()
            }
        })
    }
}

async fn bench_store(plan: &Plan, run: &str, peer: StorePeer) -> Res<()> {
    let (sys, store) = (peer.system(), peer.store());
    if plan.runs("W3") {
        for &h in &plan.histories {
            let conv = format!("bench-{run}-w3-{h}");
            peer.seed(&conv, h).await?;
            let mut t = peer.make(&conv).await?;
            let s = timed(t.as_mut(), 5, plan.store_turns, plan.store_cap).await?;
            let mut f = b::summary_fields(&s, false);
            f["history"] = json!(h);
            b::emit("W3", sys, store, f);
            b::progress(&format!("{sys} W3 {store} history {h} done"));
        }
    }
    if plan.runs("W4") {
        let conv = format!("bench-{run}-w4-shared");
        // One memory per worker, as separate app instances (or requests) would hold.
        let mut turners = Vec::new();
        for _ in 0..b::W4_SHARED_WORKERS {
            turners.push(Arc::new(Mutex::new(peer.make(&conv).await?)));
        }
        let ts = Arc::new(turners);
        let (wall, e, done) = b::run_workers(b::W4_SHARED_WORKERS, plan.w4_turns, move |w, t| {
            let ts = Arc::clone(&ts);
            async move {
                ts[w]
                    .lock()
                    .await
                    .turn(
                        b::user_text(t, &b::tag(w, t, 'u')),
                        b::answer_text(t, &b::tag(w, t, 'a')),
                    )
                    .await
            }
        })
        .await;
        let texts = peer.texts(&conv).await?;
        let check = b::check_w4(&texts, b::W4_SHARED_WORKERS, plan.w4_turns);
        b::emit(
            "W4-shared",
            sys,
            store,
            b::w4_fields(check, wall, e.map(|e| format!("{e} ({done} turns completed)"))),
        );

        let mut turners = Vec::new();
        for w in 0..b::W4_OWN_WORKERS {
            turners.push(Arc::new(Mutex::new(
                peer.make(&format!("bench-{run}-w4-own-{w}")).await?,
            )));
        }
        let ts = Arc::new(turners);
        let (wall, e, done) = b::run_workers(b::W4_OWN_WORKERS, plan.w4_own_turns, move |w, t| {
            let ts = Arc::clone(&ts);
            async move {
                ts[w]
                    .lock()
                    .await
                    .turn(b::user_text(t, ""), b::answer_text(t, ""))
                    .await
            }
        })
        .await;
        b::emit(
            "W4-own",
            sys,
            store,
            b::throughput_fields(b::W4_OWN_WORKERS, done, wall, e),
        );
        b::progress(&format!("{sys} W4 {store} done"));
    }
    Ok(())
}

async fn round_trips(plan: &Plan, run: &str, peer: StorePeer, counts: &b::Counts) -> Res<()> {
    let conv = format!("bench-{run}-rt");
    peer.seed(&conv, 1_000).await?;
    let mut t = peer.make(&conv).await?;
    timed(t.as_mut(), 3, 0, Duration::ZERO).await?;
    let (rt0, bytes0) = counts.read();
    let n = plan.rt_turns;
    for i in 0..n {
        t.turn(b::user_text(i, ""), b::answer_text(i, "")).await?;
    }
    let (rt1, bytes1) = counts.read();
    b::emit(
        "RT",
        peer.system(),
        peer.store(),
        json!({"history": 1000, "turns": n, "round_trips_per_turn": (rt1 - rt0) as f64 / n as f64, "bytes_read_per_turn": (bytes1 - bytes0) as f64 / n as f64}),
    );
    Ok(())
}

async fn stores(plan: &Plan, run: &str) -> Res<()> {
    let dir = std::env::temp_dir().join(format!("peers-bench-{run}"));
    std::fs::create_dir_all(&dir).map_err(err)?;
    let url = format!("sqlite://{}?mode=rwc", dir.join("langchain.db").display());
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .connect(&url)
        .await
        .map_err(err)?;
    bench_store(plan, run, StorePeer::LcSqlite(pool)).await?;
    let _ = std::fs::remove_dir_all(&dir);
    if let Ok(url) = std::env::var("CHATMEM_TEST_PG_URL") {
        let pool = sqlx::postgres::PgPoolOptions::new().connect(&url).await.map_err(err)?;
        bench_store(plan, run, StorePeer::LcPostgres(pool)).await?;
        if plan.runs("RT") {
            let (addr, counts) = b::counting_proxy(b::socket_of(&url, 5432)).await.map_err(err)?;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .connect(&b::via(&url, addr))
                .await
                .map_err(err)?;
            round_trips(plan, run, StorePeer::LcPostgres(pool), &counts).await?;
        }
    } else {
        b::progress("peers: CHATMEM_TEST_PG_URL not set, PostgreSQL skipped");
    }
    if let Ok(url) = std::env::var("CHATMEM_TEST_REDIS_URL") {
        bench_store(plan, run, StorePeer::LcRedis(url.clone())).await?;
        bench_store(plan, run, StorePeer::DaimonRedis(url.clone())).await?;
        if plan.runs("RT") {
            let (addr, counts) = b::counting_proxy(b::socket_of(&url, 6379)).await.map_err(err)?;
            round_trips(plan, run, StorePeer::LcRedis(b::via(&url, addr)), &counts).await?;
            round_trips(plan, run, StorePeer::DaimonRedis(b::via(&url, addr)), &counts).await?;
        }
    } else {
        b::progress("peers: CHATMEM_TEST_REDIS_URL not set, Redis skipped");
    }
    Ok(())
}

fn main() {
    b::main("peers", |plan, run| async move {
        in_memory(&plan).await?;
        stores(&plan, &run).await
    });
}
