//! The proxy benchmark: chat completions sent straight to a loopback upstream,
//! through `chatmem serve` on each store (window of 20; memory loaded and committed on every
//! call), and through LiteLLM's proxy (no memory), in one run, the targets taking turns in
//! rounds. Prints each target's latency and what it adds to the direct call, and chatmem's
//! added latency as a share of LiteLLM's. A benchmark, not a test: nothing is asserted.
//!
//! ```sh
//! bash bench/proxy/setup.sh            # LiteLLM's proxy in bench/proxy/.venv (once)
//! cargo bench -p chatmem-cli --bench proxy
//! ```
//!
//! Stores (default: an SQLite file in a temporary folder, `CHATMEM_TEST_PG_URL` and
//! `CHATMEM_TEST_REDIS_URL`, or the loopback servers `.ci/run` uses) with `--store URL`
//! (repeatable); `--litellm PATH` (default `bench/proxy/.venv/bin/litellm` when it exists) or
//! `--no-litellm`; `--warmup` (200), `--sequential` (2000), `--connections` (16),
//! `--concurrent` (8000), `--rounds` (10), `--block-warmup` (5), `--json FILE` (append the
//! run's JSON). Exits 1 when a target could not be started or a call failed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use chatmem_loadtest::ServerProcess;
use chatmem_loadtest::proxy::{LiteLlmProcess, LoopbackUpstream, ProxyConfig, ServerTime, Target};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Chat completions direct, through chatmem serve and through LiteLLM's proxy")]
struct Args {
    /// Store URL of a `chatmem serve` target (repeatable; default SQLite, PostgreSQL, Redis).
    #[arg(long = "store", value_name = "URL")]
    stores: Vec<String>,
    /// LiteLLM's `litellm` command (default: bench/proxy/.venv/bin/litellm when it exists).
    #[arg(long, value_name = "PATH")]
    litellm: Option<PathBuf>,
    /// Leave LiteLLM out.
    #[arg(long)]
    no_litellm: bool,
    /// Sequential calls per target before the rounds (not measured).
    #[arg(long, default_value_t = ProxyConfig::default().warmup)]
    warmup: usize,
    /// Measured sequential calls per target.
    #[arg(long, default_value_t = ProxyConfig::default().sequential)]
    sequential: usize,
    /// Connections of the concurrent phase.
    #[arg(long, default_value_t = ProxyConfig::default().connections)]
    connections: usize,
    /// Measured concurrent calls per target.
    #[arg(long, default_value_t = ProxyConfig::default().concurrent)]
    concurrent: usize,
    /// Rounds each phase is split into.
    #[arg(long, default_value_t = ProxyConfig::default().rounds)]
    rounds: usize,
    /// Calls per connection before each target's share of a round (not measured).
    #[arg(long, default_value_t = ProxyConfig::default().block_warmup)]
    block_warmup: usize,
    /// Append the run's JSON report to this file (one object per line).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("proxy: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("proxy: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts every target, runs the workload, prints the report; true when all went well.
async fn bench(args: Args) -> Result<bool, Box<dyn std::error::Error>> {
    let config = ProxyConfig {
        warmup: args.warmup,
        sequential: args.sequential,
        connections: args.connections,
        concurrent: args.concurrent,
        rounds: args.rounds,
        block_warmup: args.block_warmup,
    };
    config.validate()?;
    let dir = tempfile::tempdir()?;
    let stores = if args.stores.is_empty() {
        let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        vec![
            format!("sqlite:{}", dir.path().join("proxy.db").display()),
            env("CHATMEM_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test"),
            env("CHATMEM_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
        ]
    } else {
        args.stores.clone()
    };
    let mut clean = true;
    let upstream = LoopbackUpstream::start()?;
    let mut targets = vec![Target::direct(upstream.base_url())];

    let mut servers = Vec::new();
    for store in &stores {
        let label = chatmem::store::redact_url(store).to_string();
        let flags = [
            "--store",
            store,
            "--upstream-base-url",
            upstream.base_url(),
            "--max-messages",
            "20",
        ];
        match ServerProcess::spawn_with(env!("CARGO_BIN_EXE_chatmem").as_ref(), &flags) {
            Ok(server) => {
                targets.push(Target::chatmem(
                    &format!("chatmem ({})", store_name(store)),
                    server.base_url(),
                ));
                servers.push(server);
            }
            Err(e) => {
                eprintln!("proxy: chatmem serve on {label} left out: {e}");
                clean = false;
            }
        }
    }

    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let litellm_program = match (&args.litellm, args.no_litellm) {
        (_, true) => None,
        (Some(p), false) => Some(p.clone()),
        (None, false) => Some(repo.join("bench/proxy/.venv/bin/litellm")).filter(|p| p.exists()),
    };
    let mut litellm = None;
    match &litellm_program {
        Some(program) => match LiteLlmProcess::spawn(program, upstream.base_url(), dir.path()).await {
            Ok(process) => {
                let name = match litellm_version(program) {
                    Some(v) => format!("LiteLLM {v}"),
                    None => "LiteLLM".to_owned(),
                };
                targets.push(Target::litellm(&name, process.base_url()));
                litellm = Some(process);
            }
            Err(e) => {
                eprintln!("proxy: LiteLLM left out: {e}");
                clean = false;
            }
        },
        None if args.no_litellm => {}
        None => {
            eprintln!("proxy: LiteLLM left out: no bench/proxy/.venv (run `bash bench/proxy/setup.sh`)");
            clean = false;
        }
    }

    println!("machine: {}; load average before: {}", cpu(), loadavg());
    let report = chatmem_loadtest::proxy::run(&targets, &config).await?;
    println!("load average after: {}\n", loadavg());
    println!("{}", report.table());
    clean &= report.is_clean();
    let line = serde_json::to_string(&report.json())?;
    if let Some(path) = &args.json {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(f, "{line}")?;
    }
    for (server, target) in servers.iter().zip(&targets[1..]) {
        match ServerTime::fetch(server.base_url()).await {
            Ok(t) => println!(
                "{}: inside the server, {} chat completions (both phases, warm-ups included): {:.3} ms mean to \
                 the response head, {:.3} ms of it the upstream call",
                target.name, t.calls, t.mean_ms, t.upstream_mean_ms
            ),
            Err(e) => eprintln!("proxy: {}: reading /metrics: {e}", target.name),
        }
    }
    for server in servers {
        if let Err(e) = server.stop() {
            eprintln!("proxy: stopping chatmem serve: {e}");
        }
    }
    if let Some(process) = litellm
        && let Err(e) = process.stop()
    {
        eprintln!("proxy: stopping LiteLLM: {e}");
    }
    Ok(clean)
}

/// The store's name for the report, from its URL's scheme.
fn store_name(url: &str) -> &'static str {
    match url.split(':').next().unwrap_or_default() {
        "sqlite" => "SQLite",
        "postgres" | "postgresql" => "PostgreSQL",
        "mysql" => "MySQL",
        "redis" | "rediss" => "Redis",
        "redis+cluster" | "rediss+cluster" => "Redis Cluster",
        "memory" => "memory",
        _ => "other store",
    }
}

/// The installed LiteLLM's version, asked of the Python beside `program`.
fn litellm_version(program: &Path) -> Option<String> {
    let python = program.parent()?.join("python");
    let out = Command::new(python)
        .args(["-c", "import importlib.metadata as m; print(m.version('litellm'))"])
        .output()
        .ok()?;
    let v = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !v.is_empty()).then_some(v)
}

fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!("{model}, {cores} cores")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
