//! The load test of `chatmem serve`: the `chatmem` binary as a separate process on loopback
//! (as an application runs it, so the generator's own work does not run inside the server),
//! loaded with window reads and turn commits, then every history checked.
//!
//! Run with (one or more stores, each in turn):
//!
//! ```sh
//! cargo bench -p chatmem-cli --bench load -- --store memory: --store sqlite:/tmp/load.db \
//!     --store postgres://postgres@127.0.0.1:5432/test --store redis://127.0.0.1:6379
//! ```
//!
//! Flags: `--seconds` (60), `--connections` (200), `--conversations` (1000), `--read-share`
//! (0.5), `--json FILE` (append one JSON report per store). Prints a table per store and its
//! JSON; exits 1 if any request failed or any acknowledged message is missing.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use chatmem_loadtest::{LoadConfig, ServerProcess};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Load chatmem serve with window reads and turn commits")]
struct Args {
    /// Store URL the server uses (repeat for several stores, run one after another).
    #[arg(long = "store", value_name = "URL", default_value = "memory:")]
    stores: Vec<String>,
    /// Seconds of measured load per store.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Concurrent connections.
    #[arg(long, default_value_t = 200)]
    connections: usize,
    /// Conversations the requests are spread over.
    #[arg(long, default_value_t = 1000)]
    conversations: usize,
    /// The share of requests that read a window (the rest commit a turn).
    #[arg(long, default_value_t = 0.5)]
    read_share: f64,
    /// Append each store's JSON report to this file (one object per line).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Ok(duration) = Duration::try_from_secs_f64(args.seconds) else {
        eprintln!("load: --seconds must be a positive number");
        return ExitCode::FAILURE;
    };
    let config = LoadConfig {
        duration,
        connections: args.connections,
        conversations: args.conversations,
        read_share: args.read_share,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("load: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut clean = true;
    for store in &args.stores {
        let label = chatmem::store::redact_url(store).to_string();
        match runtime.block_on(one_store(store, &label, &config, args.json.as_ref())) {
            Ok(true) => {}
            Ok(false) => clean = false,
            Err(e) => {
                eprintln!("load: {label}: {e}");
                clean = false;
            }
        }
    }
    if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// Runs the load against a fresh server on `store`; true when the run was clean.
async fn one_store(
    store: &str,
    label: &str,
    config: &LoadConfig,
    json: Option<&PathBuf>,
) -> Result<bool, Box<dyn std::error::Error>> {
    let server = ServerProcess::spawn(env!("CARGO_BIN_EXE_chatmem").as_ref(), store)?;
    let report = chatmem_loadtest::run(server.base_url(), label, config).await?;
    server.stop()?;
    println!("{}", report.table());
    let line = serde_json::to_string(&report.json())?;
    println!("{line}\n");
    if let Some(path) = json {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(f, "{line}")?;
    }
    Ok(report.is_clean())
}
