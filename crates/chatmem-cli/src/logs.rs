//! The log lines of `chatmem serve` (and of any command run with `RUST_LOG` set): a
//! `tracing` subscriber writing to stderr, as text or as JSON lines, at the level `RUST_LOG`
//! asks (by default `info` for chatmem's crates, `warn` for the libraries under them).

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// What the log lines are when `RUST_LOG` is not set: chatmem's crates (every target starting
/// with `chatmem`) at `info`, the rest at `warn`.
const DEFAULT_FILTER: &str = "warn,chatmem=info";

/// How log lines are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum LogFormat {
    /// One line of text per event, its request's span (id, method, route) before it.
    #[default]
    Text,
    /// One JSON object per line: the event's fields at the top level, its request's span under
    /// `span` (and every enclosing span under `spans`).
    Json,
}

/// Installs the subscriber for the rest of the process.
///
/// # Errors
/// When `RUST_LOG` is set but is not a valid filter, or a subscriber is already installed.
pub(crate) fn install(format: LogFormat) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(given) if !given.trim().is_empty() => {
            EnvFilter::try_new(&given).with_context(|| format!("RUST_LOG={given:?} is not a valid log filter"))?
        }
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}

/// Whether the user asked for logs from a command that is quiet by default.
pub(crate) fn asked_for() -> bool {
    std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty())
}
