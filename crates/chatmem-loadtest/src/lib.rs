//! The load generator for `chatmem serve`: many connections reading windows and committing
//! turns at once, latency percentiles per operation, and afterwards a count of every message
//! the server acknowledged, read back from each conversation's history.
//!
//! [`proxy`] is the proxy benchmark: chat completions straight to a loopback upstream,
//! through `chatmem serve` and through LiteLLM's proxy, alternating.
//!
//! It is a tool, not a shipped library: `chatmem-cli`'s `load` bench runs it against the
//! `chatmem` binary (`cargo bench -p chatmem-cli --bench load -- --store URL`), and its
//! `load_smoke` test runs it for a few seconds on every store CI has.
//!
//! ```no_run
//! use chatmem_loadtest::{LoadConfig, ServerProcess};
//! # async fn demo() -> Result<(), chatmem_loadtest::LoadError> {
//! let server = ServerProcess::spawn("target/release/chatmem".as_ref(), "memory:")?;
//! let report = chatmem_loadtest::run(server.base_url(), "memory:", &LoadConfig::default()).await?;
//! println!("{}", report.table());
//! assert!(report.is_clean());
//! server.stop()?;
//! # Ok(()) }
//! ```

mod config;
mod error;
mod ledger;
mod marker;
pub mod proxy;
mod report;
mod run;
mod server;
mod text;
mod verify;

pub use crate::config::LoadConfig;
pub use crate::error::LoadError;
pub use crate::report::{LoadReport, OpStats};
pub use crate::run::run;
pub use crate::server::ServerProcess;
pub use crate::verify::Verification;
