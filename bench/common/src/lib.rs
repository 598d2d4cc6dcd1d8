//! What both bench binaries share: the workloads' sizes, the deterministic text, the timing
//! loop and its statistics, the in-memory workloads' interleaved runner with chatmem's turn
//! ([`in_memory`]), the JSON result lines, the round-trip counting proxy and the W4 checker.
//! It links no database driver (chatmem's core crate has none), so the chatmem side (rusqlite)
//! and the peers' side (sqlx's SQLite) can both use it.

pub mod in_memory;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Run sizes; `--quick` gives the smoke-test sizes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub quick: bool,
    /// Turns per in-memory run (W1, W2).
    pub memory_turns: usize,
    /// Turns of the one W2L conversation.
    pub long_turns: usize,
    /// Time cap per in-memory case (W1, W2, W2L): peers that re-tokenize the whole history
    /// every turn would take hours for W2L's 2,000 turns.
    pub memory_cap: Duration,
    /// W3 history sizes in messages.
    pub histories: Vec<usize>,
    /// Measured turns per W3 history size, at most.
    pub store_turns: usize,
    /// Time cap per W3 history size per peer (measured turns stop when it is spent).
    pub store_cap: Duration,
    /// W4: turns per worker on the shared conversation and on own conversations.
    pub w4_turns: usize,
    pub w4_own_turns: usize,
    /// Turns counted through the proxy per store.
    pub rt_turns: usize,
}

impl Plan {
    /// From the process arguments (`--quick`) and `BENCH_ONLY` (comma-separated workload
    /// names, e.g. `W1,W3`), for running a part.
    pub fn from_args() -> Self {
        let quick = std::env::args().any(|a| a == "--quick");
        if quick {
            Self {
                quick,
                memory_turns: 400,
                long_turns: 400,
                memory_cap: Duration::from_secs(5),
                histories: vec![10, 100, 1_000],
                store_turns: 30,
                store_cap: Duration::from_secs(2),
                w4_turns: 10,
                w4_own_turns: 5,
                rt_turns: 10,
            }
        } else {
            Self {
                quick,
                memory_turns: 2_000,
                long_turns: 2_000,
                memory_cap: Duration::from_secs(60),
                histories: vec![10, 100, 1_000, 10_000, 100_000],
                store_turns: 200,
                store_cap: Duration::from_secs(8),
                w4_turns: 50,
                w4_own_turns: 50,
                rt_turns: 20,
            }
        }
    }

    /// Whether workload `name` is to run (all unless `BENCH_ONLY` names others).
    pub fn runs(&self, name: &str) -> bool {
        match std::env::var("BENCH_ONLY") {
            Ok(only) if !only.trim().is_empty() => only.split(',').any(|w| w.trim().eq_ignore_ascii_case(name)),
            _ => true,
        }
    }
}

/// The W1 window in messages and the W2 / W2L token budgets.
pub const W1_MESSAGES: usize = 20;
pub const W2_TOKENS: usize = 4_000;
pub const W2L_TOKENS: usize = 100_000;
/// W3 window in messages (what each peer's store history is trimmed to before the call).
pub const W3_MESSAGES: usize = 20;
/// W4 sizes: workers on one conversation, workers on own conversations.
pub const W4_SHARED_WORKERS: usize = 16;
pub const W4_OWN_WORKERS: usize = 64;
/// The system message every peer is given (chatmem stores it; the others keep it in the agent).
pub const SYSTEM: &str = "你是邻里仓的售后客服。You are the after-sales agent of a neighbourhood warehouse.";

const ZH: &str = "我的订单LC202610060018还没有发货，已经等了三天了，请帮我查一下物流状态，如果还不能发货的话我想申请退款，另外优惠券能不能一起退回来？";
const EN: &str = "My order LC202610060018 has not shipped yet and it has been three days. Could you check the logistics status, and if it still cannot ship I would like a refund; can the coupon be returned as well? ";
const ZH_A: &str = "您好，已为您查询订单LC202610060018：仓库显示该订单因库存调拨暂未出库，预计明天下午发出。如果您不想等待，可以在订单页面点击申请退款，款项将在一到三个工作日内原路退回，优惠券会在退款完成后自动返还到您的账户，有效期不变。";
const EN_A: &str = "Hello, I have checked order LC202610060018 for you: the warehouse shows it is waiting for a stock transfer and has not left yet; it should ship tomorrow afternoon. If you would rather not wait, tap Request refund on the order page and the money returns to your original payment method within one to three working days. The coupon is returned to your account automatically once the refund completes, with its original expiry date. ";

/// `n` characters of `pattern` repeated, starting at an offset that depends on `seed`.
///
/// The text of a turn is made inside the timed turn, for every system alike, so it must cost
/// next to nothing: each pattern is repeated once (with its char offsets) and a cut is one
/// slice and one copy. (Collecting chars one by one was more than a third of a chatmem W1 turn.)
fn cut(pattern: &'static str, seed: usize, n: usize) -> String {
    /// The longest cut made (the answers).
    const LONGEST: usize = 600;
    struct Cycled {
        text: String,
        /// The byte offset of each char of `text`, and its end.
        at: Vec<usize>,
        chars: usize,
    }
    static TABLES: OnceLock<Vec<(&'static str, Cycled)>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        [ZH, EN, ZH_A, EN_A]
            .into_iter()
            .map(|p| {
                let chars = p.chars().count();
                let text = p.repeat(LONGEST / chars + 2);
                let at = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
                (p, Cycled { text, at, chars })
            })
            .collect()
    });
    let Some((_, t)) = tables.iter().find(|(p, _)| *p == pattern) else {
        unreachable!("cut is called with the patterns above")
    };
    let start = (seed * 7) % t.chars;
    t.text[t.at[start]..t.at[(start + n).min(t.at.len() - 1)]].to_owned()
}

/// `body`, tagged `tag` at its start when given.
fn tagged(tag: &str, body: String) -> String {
    if tag.is_empty() {
        return body;
    }
    let mut s = String::with_capacity(tag.len() + body.len());
    s.push_str(tag);
    s.push_str(&body);
    s
}

/// The user message of turn `i` (≈200 characters; even turns Chinese, odd turns English),
/// tagged `tag` at its start when given.
pub fn user_text(i: usize, tag: &str) -> String {
    let body = if i.is_multiple_of(2) {
        cut(ZH, i, 200)
    } else {
        cut(EN, i, 200)
    };
    tagged(tag, body)
}

/// The answer of turn `i` (≈600 characters), tagged like [`user_text`].
pub fn answer_text(i: usize, tag: &str) -> String {
    let body = if i.is_multiple_of(2) {
        cut(ZH_A, i, 600)
    } else {
        cut(EN_A, i, 600)
    };
    tagged(tag, body)
}

/// The W4 tag of worker `w`'s turn `t`, `u` for the user message and `a` for the answer.
pub fn tag(w: usize, t: usize, kind: char) -> String {
    format!("<w{w}t{t}{kind}>")
}

/// Median, p90 and mean of samples in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: usize,
    pub median_us: f64,
    pub p90_us: f64,
    pub mean_us: f64,
}

/// Summarises `samples` (microseconds).
pub fn summarize(samples: &[f64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    Summary {
        n: s.len(),
        median_us: at(0.5),
        p90_us: at(0.9),
        mean_us: s.iter().sum::<f64>() / s.len() as f64,
    }
}

/// Times `turn(i)` for `i` in `0..warmup + max` (the first `warmup` unmeasured), stopping
/// early once `cap` is spent (with at least 3 measured turns).
pub async fn measure<F, Fut, E>(warmup: usize, max: usize, cap: Duration, mut turn: F) -> Result<Vec<f64>, E>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    // Warm-up stops at half the cap too: the slowest peers need seconds per turn.
    let started = Instant::now();
    let mut first = warmup;
    for i in 0..warmup {
        turn(i).await?;
        if started.elapsed() > cap / 2 {
            first = i + 1;
            break;
        }
    }
    let mut samples = Vec::with_capacity(max);
    for i in first..first + max {
        let t = Instant::now();
        turn(i).await?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        if samples.len() >= 3 && started.elapsed() > cap {
            break;
        }
    }
    Ok(samples)
}

/// Prints one result line: `{"workload", "system", "store", ...fields}` as JSON on stdout
/// (the run script collects the lines into `bench/results/`).
pub fn emit(workload: &str, system: &str, store: &str, fields: Value) {
    let mut line = json!({"workload": workload, "system": system, "store": store});
    if let (Some(out), Value::Object(more)) = (line.as_object_mut(), fields) {
        out.extend(more);
    }
    println!("{line}");
}

/// A summary as JSON fields, plus `samples` when `keep` (W2L keeps every turn's time).
pub fn summary_fields(samples: &[f64], keep: bool) -> Value {
    let s = summarize(samples);
    let mut v = json!({"turns": s.n, "median_us": s.median_us, "p90_us": s.p90_us, "mean_us": s.mean_us});
    if keep {
        v["samples_us"] = json!(samples.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>());
    }
    v
}

/// Logs progress on stderr (stdout holds the results).
pub fn progress(msg: &str) {
    eprintln!(
        "[{:>8.1}s] {msg}",
        START.get_or_init(Instant::now).elapsed().as_secs_f64()
    );
}
static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Counts, across every connection through it, request/response exchanges (a client write
/// after the server last spoke, or the first write of a connection) and bytes each way.
#[derive(Debug, Default)]
pub struct Counts {
    pub round_trips: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
    pub connections: AtomicU64,
}

impl Counts {
    /// (round trips, bytes from the server) so far.
    pub fn read(&self) -> (u64, u64) {
        (
            self.round_trips.load(Ordering::SeqCst),
            self.bytes_down.load(Ordering::SeqCst),
        )
    }
}

/// A loopback TCP proxy to `target`; returns its address and its counts. It runs until the
/// process exits.
pub async fn counting_proxy(target: SocketAddr) -> std::io::Result<(SocketAddr, Arc<Counts>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let counts = Arc::new(Counts::default());
    let c = Arc::clone(&counts);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(target).await else {
                continue;
            };
            c.connections.fetch_add(1, Ordering::SeqCst);
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let c = Arc::clone(&c);
            tokio::spawn(async move {
                // true while the client spoke last: its next write is not a new exchange.
                let client_last = Arc::new(AtomicBool::new(false));
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let (c1, l1) = (Arc::clone(&c), Arc::clone(&client_last));
                let up = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if !l1.swap(true, Ordering::SeqCst) {
                            c1.round_trips.fetch_add(1, Ordering::SeqCst);
                        }
                        c1.bytes_up.fetch_add(n as u64, Ordering::SeqCst);
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown().await;
                };
                let (c2, l2) = (Arc::clone(&c), Arc::clone(&client_last));
                let down = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match sr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        l2.store(false, Ordering::SeqCst);
                        c2.bytes_down.fetch_add(n as u64, Ordering::SeqCst);
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = cw.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    Ok((addr, counts))
}

/// `url` with its host and port replaced by `addr` (for sending a client through the proxy).
pub fn via(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (auth_host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let auth = auth_host
        .rsplit_once('@')
        .map(|(a, _)| format!("{a}@"))
        .unwrap_or_default();
    format!("{scheme}://{auth}{addr}{path}")
}

/// The host:port of `url` as a socket address (loopback services only).
pub fn socket_of(url: &str, default_port: u16) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split('/').next().unwrap_or(rest);
    let host_port = host_port.rsplit_once('@').map_or(host_port, |(_, h)| h);
    let host_port = host_port.split('?').next().unwrap_or(host_port);
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().unwrap_or(default_port)),
        None => (host_port, default_port),
    };
    let host = if host == "localhost" || host.is_empty() {
        "127.0.0.1"
    } else {
        host
    };
    format!("{host}:{port}")
        .parse()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], port)))
}

/// What the W4 shared-conversation check found in a conversation's stored messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct W4Check {
    pub expected_turns: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub interleaved: usize,
}

/// Checks the stored texts of the shared conversation after `workers` × `turns` tagged
/// turns: a turn is lost when its user message or its answer is missing, duplicated when
/// either is stored twice, interleaved when its answer does not directly follow its user
/// message.
pub fn check_w4(texts: &[String], workers: usize, turns: usize) -> W4Check {
    let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
    for (pos, t) in texts.iter().enumerate() {
        if let Some(end) = t.find('>')
            && t.starts_with("<w")
        {
            seen.entry(t[..=end].to_string()).or_default().push(pos);
        }
    }
    let mut out = W4Check {
        expected_turns: workers * turns,
        ..Default::default()
    };
    for w in 0..workers {
        for t in 0..turns {
            let u = seen.get(&tag(w, t, 'u'));
            let a = seen.get(&tag(w, t, 'a'));
            match (u, a) {
                (Some(u), Some(a)) => {
                    if u.len() > 1 || a.len() > 1 {
                        out.duplicated += 1;
                    }
                    if a[0] != u[0] + 1 {
                        out.interleaved += 1;
                    }
                }
                _ => out.lost += 1,
            }
        }
    }
    out
}

/// Runs `workers` tasks each doing `turns` turns via `turn(worker, turn)`, returning the wall
/// time, the first error (a worker stops at its first) and how many turns completed.
pub async fn run_workers<F, Fut>(workers: usize, turns: usize, turn: F) -> (Duration, Option<String>, usize)
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let turn = Arc::new(turn);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let turn = Arc::clone(&turn);
        tasks.push(tokio::spawn(async move {
            for t in 0..turns {
                if let Err(e) = turn(w, t).await {
                    return (t, Some(e));
                }
            }
            (turns, None)
        }));
    }
    let (mut first_err, mut completed) = (None, 0);
    for task in tasks {
        let (done, e) = task.await.unwrap_or_else(|e| (0, Some(e.to_string())));
        completed += done;
        if let Some(e) = e {
            first_err.get_or_insert(e);
        }
    }
    (started.elapsed(), first_err, completed)
}

/// The W4 result fields for a shared-conversation run.
pub fn w4_fields(check: W4Check, wall: Duration, error: Option<String>) -> Value {
    json!({
        "workers": W4_SHARED_WORKERS,
        "expected_turns": check.expected_turns,
        "lost": check.lost,
        "duplicated": check.duplicated,
        "interleaved": check.interleaved,
        "seconds": wall.as_secs_f64(),
        "error": error,
    })
}

/// The W4 result fields for an own-conversations run: turns/s counts completed turns only.
pub fn throughput_fields(workers: usize, completed: usize, wall: Duration, error: Option<String>) -> Value {
    json!({
        "workers": workers,
        "turns": completed,
        "seconds": wall.as_secs_f64(),
        "turns_per_s": completed as f64 / wall.as_secs_f64(),
        "error": error,
    })
}

/// A multi-thread runtime with two workers (the machine has two cores, shared with the
/// database servers).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A bench binary's `main`: the plan from the arguments, a run id, `run` as a task on the
/// 2-worker runtime (where a server's request handlers run, not on a thread outside it: a
/// client's replies then wake a task on a worker, not a parked main thread); on an error,
/// `<side> bench failed: ...` and exit code 1 (so `bench/run.sh` and CI fail).
pub fn main<F, Fut>(side: &str, run: F)
where
    F: FnOnce(Plan, String) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let plan = Plan::from_args();
    let id = run_id();
    progress("start");
    let rt = runtime();
    let result = rt
        .block_on(rt.spawn(run(plan, id)))
        .unwrap_or_else(|e| Err(format!("the bench task failed: {e}")));
    if let Err(e) = result {
        eprintln!("{side} bench failed: {e}");
        std::process::exit(1);
    }
}

/// A unique-enough run id so repeated runs never meet each other's data.
pub fn run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{t:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_is_the_pattern_repeated_from_the_seeds_offset() {
        for pattern in [ZH, EN, ZH_A, EN_A] {
            let chars: Vec<char> = pattern.chars().collect();
            for seed in [0, 1, 2, 17, 999, 123_456] {
                for n in [0, 1, 200, 600] {
                    let start = (seed * 7) % chars.len();
                    let slow: String = chars.iter().cycle().skip(start).take(n).collect();
                    assert_eq!(cut(pattern, seed, n), slow, "seed {seed}, n {n}");
                }
            }
        }
        assert_eq!(user_text(3, "<t>").chars().count(), 203);
        assert!(answer_text(4, "").starts_with(&cut(ZH_A, 4, 5)));
    }
}
