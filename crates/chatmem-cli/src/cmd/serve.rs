//! `chatmem serve`: the memory API over HTTP (crate `chatmem-server`), until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use chatmem_server::{Auth, ServerConfig, Upstream, app, metrics_app};

use crate::args::ServeCommand;
use crate::logs::LogFormat;

/// Serve conversation memory over HTTP for applications in any language.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// Where to listen. Without --auth only a loopback address is allowed.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// A TOML file of bearer tokens, each mapped to a tenant (`[[token]]` tables with `token`
    /// and `tenant`); a tenant sees only its own conversations.
    #[arg(long, value_name = "FILE")]
    auth: Option<PathBuf>,
    /// The OpenAI-compatible model `POST /v1/chat/completions` forwards to, with memory
    /// (its key from CHATMEM_UPSTREAM_API_KEY, if it needs one).
    #[arg(long, value_name = "URL")]
    upstream_base_url: Option<String>,
    /// Also serve GET /metrics, and nothing else, on this address without a bearer token, for
    /// a Prometheus scraper (on the main address /metrics needs the token when --auth is set).
    /// It shows counts only, never conversations.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Without --auth, also answer requests whose Host is NAME (or NAME:PORT); repeatable.
    /// By default only localhost, 127.0.0.1 and [::1] are answered, so a web page that points
    /// its own DNS name at this machine reads nothing.
    #[arg(long = "allowed-host", value_name = "NAME", value_parser = parse_host)]
    allowed_hosts: Vec<String>,
    /// Let web pages of ORIGIN (`https://app.example`) call the server, with CORS; repeatable.
    /// By default a request from another site's page is refused (403).
    #[arg(long = "allowed-origin", value_name = "ORIGIN", value_parser = parse_origin)]
    allowed_origins: Vec<String>,
    /// Log lines on stderr as `text` or `json` (one object per line); RUST_LOG sets the level
    /// (default: info for chatmem, warn for the rest).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// `--allowed-host`: a name, optionally with a port (`chatmem.internal`, `10.0.0.5:8080`).
fn parse_host(value: &str) -> Result<String, String> {
    let bad = value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#'));
    if bad {
        return Err(format!("{value:?} is not a host name (give NAME or NAME:PORT)"));
    }
    Ok(value.to_owned())
}

/// `--allowed-origin`: `http(s)://host[:port]`, as browsers send it in `Origin`.
fn parse_origin(value: &str) -> Result<String, String> {
    let value = value.trim_end_matches('/');
    let authority = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .unwrap_or_default();
    if parse_host(authority).is_err() {
        return Err(format!(
            "{value:?} is not an origin (give SCHEME://HOST[:PORT], as `https://app.example`)"
        ));
    }
    Ok(value.to_owned())
}

impl ServeArgs {
    /// How the server's log lines are written (`--log-format`).
    pub(crate) fn log_format(&self) -> LogFormat {
        self.log_format
    }

    /// The model `--summary-model` names, on the upstream endpoint.
    pub(crate) fn summary_model(&self, name: Option<&str>) -> anyhow::Result<chatmem_openai::OpenAiModel> {
        let (Some(url), Some(name)) = (&self.upstream_base_url, name) else {
            bail!("--summarize needs --upstream-base-url and --summary-model: the summary model is called there");
        };
        let builder = match upstream_key() {
            Some(key) => chatmem_openai::OpenAiModel::builder().api_key(key),
            None => chatmem_openai::OpenAiModel::builder().no_api_key(),
        };
        Ok(builder.base_url(url.clone()).model(name.to_owned()).build()?)
    }
}

fn upstream_key() -> Option<String> {
    std::env::var("CHATMEM_UPSTREAM_API_KEY")
        .ok()
        .filter(|k| !k.trim().is_empty())
}

/// Runs `chatmem serve` (the store is created if missing).
pub(crate) async fn run(command: ServeCommand) -> anyhow::Result<()> {
    let summary = &command.memory.summary;
    let summary_model = summary.required_model()?;
    let summarizer = summary.summarizer(|_| command.serve.summary_model(summary_model))?;
    let memory = command.memory.open(summarizer).await?;
    serve(&command.serve, memory).await
}

/// Runs the server on `memory` until SIGTERM or Ctrl-C; in-flight requests finish first.
async fn serve(
    args: &ServeArgs,
    memory: chatmem::ChatMemory<std::sync::Arc<dyn chatmem::Store>>,
) -> anyhow::Result<()> {
    let auth = match &args.auth {
        Some(path) => Some(Auth::from_file(path)?),
        None => None,
    };
    if auth.is_none() && !args.listen.ip().is_loopback() {
        bail!(
            "refusing to listen on {} without --auth: anyone who can reach it could read every conversation (give --auth FILE, or listen on 127.0.0.1)",
            args.listen
        );
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let upstream = args.upstream_base_url.as_ref().map(|url| Upstream {
        base_url: url.clone(),
        api_key: upstream_key(),
    });
    let config = ServerConfig {
        auth,
        upstream,
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        ..ServerConfig::default()
    };
    if let Some(addr) = args.metrics_listen {
        let scrape = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr} (--metrics-listen)"))?;
        eprintln!("chatmem: serving metrics on http://{}/metrics", scrape.local_addr()?);
        // Ends with the process: a scrape holds nothing to finish.
        let router = metrics_app(config.metrics.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(scrape, router).await {
                eprintln!("chatmem: the metrics listener stopped: {e}");
            }
        });
    }
    eprintln!(
        "chatmem: serving conversation memory on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app(memory, config))
        .with_graceful_shutdown(shutdown())
        .await
        .context("serving")
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
