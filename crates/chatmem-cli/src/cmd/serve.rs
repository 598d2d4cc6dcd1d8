//! `chatmem serve`: the memory API over HTTP (crate `chatmem-server`), until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use chatmem_server::{Auth, Limits, PolicyCaps, ServeOptions, ServerConfig, Upstream, app, metrics_app};

use crate::args::{ServeCommand, parse_duration, positive};
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
    /// The largest `max_messages` a request's own window policy may ask for (a client
    /// cannot lift eviction past it; the server's own policy is not bound by it).
    #[arg(long, value_name = "N", default_value_t = PolicyCaps::default().max_messages)]
    max_window_messages: usize,
    /// The largest `max_tokens` a request's own window policy may ask for.
    #[arg(long, value_name = "N", default_value_t = PolicyCaps::default().max_tokens)]
    max_window_tokens: usize,
    /// Refuse requests that give their own window policy: every conversation has the
    /// server's.
    #[arg(long)]
    no_client_policy: bool,
    /// How long a client has to send a request's headers (from connecting, or from the
    /// request's first byte on a kept-alive connection); then the connection is closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
    /// How long a client has to send a request's body, from the end of its headers; then the
    /// request is answered 408.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Connections open at once; over it new ones wait in the accept queue until one closes.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = positive)]
    max_connections: usize,
    /// After SIGTERM or Ctrl-C, how long in-flight requests have to finish before the
    /// remaining connections are closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    shutdown_timeout: Duration,
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
    /// Send each user's facts with their turns (a chat completion's X-Chatmem-User header, a
    /// REST turn's "user"); the store must keep users' facts.
    #[arg(long)]
    facts: bool,
    /// The model that reads users' messages for facts, in the background, on the upstream
    /// endpoint (as --summary-model); implies --facts.
    #[arg(long, value_name = "M")]
    facts_model: Option<String>,
    /// The most tokens of facts sent with a turn (default 1000).
    #[arg(long, value_name = "N", value_parser = positive)]
    facts_max_tokens: Option<usize>,
    /// How many turns that evict nothing pass before --facts-model reads a conversation's
    /// recent messages (default 10; 1: every turn). Messages leaving the window are read as
    /// they leave.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    facts_every: Option<u32>,
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

    /// How the listeners treat slow clients and shut down.
    fn serve_options(&self) -> ServeOptions {
        ServeOptions {
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
            shutdown_timeout: self.shutdown_timeout,
        }
    }

    /// The model `--summary-model` names, on the upstream endpoint.
    pub(crate) fn summary_model(&self, name: Option<&str>) -> anyhow::Result<chatmem_openai::OpenAiModel> {
        let (Some(url), Some(name)) = (&self.upstream_base_url, name) else {
            bail!("--summarize needs --upstream-base-url and --summary-model: the summary model is called there");
        };
        upstream_model(url, name)
    }

    /// `memory` with the facts the flags ask for: sent with users' turns (`--facts`, within
    /// `--facts-max-tokens`), and read from their messages by `--facts-model` on the upstream.
    /// A store that keeps no facts is refused here, not at the first turn.
    fn with_facts(
        &self,
        memory: chatmem::ChatMemory<std::sync::Arc<dyn chatmem::Store>>,
    ) -> anyhow::Result<chatmem::ChatMemory<std::sync::Arc<dyn chatmem::Store>>> {
        if !self.facts && self.facts_model.is_none() {
            if self.facts_max_tokens.is_some() {
                bail!("--facts-max-tokens needs --facts (or --facts-model)");
            }
            if self.facts_every.is_some() {
                bail!("--facts-every needs --facts-model: it says how often that model reads");
            }
            return Ok(memory);
        }
        if !memory.store().keeps_facts() {
            bail!("--facts needs a store that keeps users' facts; this store does not");
        }
        let mut facts = chatmem::Facts::new();
        if let Some(tokens) = self.facts_max_tokens {
            facts = facts.max_tokens(tokens)?;
        }
        if let Some(turns) = self.facts_every {
            if self.facts_model.is_none() {
                bail!("--facts-every needs --facts-model: it says how often that model reads");
            }
            facts = facts.extract_every(turns)?;
        }
        let memory = memory.with_facts(Some(facts))?;
        let Some(name) = &self.facts_model else {
            return Ok(memory);
        };
        let Some(url) = &self.upstream_base_url else {
            bail!("--facts-model needs --upstream-base-url: the facts model is called there");
        };
        let extractor = chatmem::facts::FactExtractor::new(upstream_model(url, name)?, |call| {
            tokio::spawn(call);
        });
        Ok(memory.with_fact_extractor(Some(extractor)))
    }
}

/// Model `name` on the OpenAI-compatible endpoint at `url`, with the upstream's key.
fn upstream_model(url: &str, name: &str) -> anyhow::Result<chatmem_openai::OpenAiModel> {
    {
        let builder = match upstream_key() {
            Some(key) => chatmem_openai::OpenAiModel::builder().api_key(key),
            None => chatmem_openai::OpenAiModel::builder().no_api_key(),
        };
        Ok(builder.base_url(url.to_owned()).model(name.to_owned()).build()?)
    }
}

fn upstream_key() -> Option<String> {
    std::env::var("CHATMEM_UPSTREAM_API_KEY")
        .ok()
        .filter(|k| !k.trim().is_empty())
}

/// Runs `chatmem serve` (the store is created if missing).
pub(crate) async fn run(command: ServeCommand) -> anyhow::Result<()> {
    // A bad upstream stops the server here, rather than failing every chat completion.
    if let Some(url) = &command.serve.upstream_base_url {
        let upstream = Upstream {
            base_url: url.clone(),
            api_key: upstream_key(),
        };
        upstream
            .check()
            .with_context(|| format!("--upstream-base-url {}", chatmem::store::redact_url(url)))?;
    }
    let summary = &command.memory.summary;
    let summary_model = summary.required_model()?;
    let summarizer = summary.summarizer(|_| command.serve.summary_model(summary_model))?;
    let memory = command.serve.with_facts(command.memory.open(summarizer).await?)?;
    // The embedding model's calibration runs beside the start; until it answers, questions
    // are recalled by words.
    let warming = memory.clone();
    tokio::spawn(async move { crate::recall::warm(&warming).await });
    serve(&command.serve, memory).await
}

/// Runs the server on `memory` until SIGTERM or Ctrl-C; in-flight requests get
/// `--shutdown-timeout` to finish.
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
    let limits = Limits {
        policy: PolicyCaps {
            allowed: !args.no_client_policy,
            max_messages: args.max_window_messages,
            max_tokens: args.max_window_tokens,
        },
        ..Limits::default()
    };
    let config = ServerConfig {
        auth,
        upstream,
        limits,
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
        let options = args.serve_options();
        tokio::spawn(async move {
            if let Err(e) = chatmem_server::serve(scrape, router, options, std::future::pending()).await {
                eprintln!("chatmem: the metrics listener stopped: {e}");
            }
        });
    }
    eprintln!(
        "chatmem: serving conversation memory on http://{}",
        listener.local_addr()?
    );
    chatmem_server::serve(listener, app(memory, config), args.serve_options(), shutdown())
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::args::{Cli, Command};

    fn args(args: &[&str]) -> super::ServeArgs {
        let cli = Cli::try_parse_from(["chatmem", "serve"].iter().chain(args)).expect("valid flags");
        let Command::Serve(command) = cli.command else {
            panic!("not serve")
        };
        command.serve
    }

    fn options(flags: &[&str]) -> chatmem_server::ServeOptions {
        args(flags).serve_options()
    }

    #[test]
    fn the_facts_flags_turn_facts_on_and_refuse_what_cannot_work() {
        use std::sync::Arc;
        let memory = || chatmem::ChatMemory::new(Arc::new(chatmem::InMemoryStore::new()) as Arc<dyn chatmem::Store>);
        let off = args(&[]).with_facts(memory()).expect("no facts");
        assert!(off.facts_settings().is_none());
        let on = args(&["--facts", "--facts-max-tokens=300"])
            .with_facts(memory())
            .expect("facts on");
        assert_eq!(on.facts_settings().map(chatmem::Facts::token_budget), Some(300));
        assert!(on.fact_extractor().is_none());
        let alone = args(&["--facts-max-tokens=300"]).with_facts(memory());
        assert!(alone.is_err_and(|e| e.to_string().contains("needs --facts")));
        let nowhere = args(&["--facts-model=cheap"]).with_facts(memory());
        assert!(nowhere.is_err_and(|e| e.to_string().contains("--upstream-base-url")));
        let read = args(&["--facts-model=cheap", "--upstream-base-url=http://127.0.0.1:9/v1"])
            .with_facts(memory())
            .expect("a facts model");
        assert!(read.facts_settings().is_some(), "--facts-model implies --facts");
        assert!(read.fact_extractor().is_some());
        assert!(Cli::try_parse_from(["chatmem", "serve", "--facts-max-tokens=0"]).is_err());
        let every = args(&[
            "--facts-model=cheap",
            "--facts-every=2",
            "--upstream-base-url=http://127.0.0.1:9/v1",
        ])
        .with_facts(memory())
        .expect("a facts model reading every 2 turns");
        assert_eq!(every.facts_settings().map(chatmem::Facts::extract_every_value), Some(2));
        let unread = args(&["--facts", "--facts-every=2"]).with_facts(memory());
        assert!(unread.is_err_and(|e| e.to_string().contains("--facts-every needs --facts-model")));
        assert!(Cli::try_parse_from(["chatmem", "serve", "--facts-every=0"]).is_err());
    }

    #[test]
    fn the_listener_flags_default_to_the_servers_defaults_and_set_each_option() {
        assert_eq!(options(&[]), chatmem_server::ServeOptions::default());
        let set = options(&[
            "--header-timeout=2s",
            "--body-timeout=3s",
            "--idle-timeout=4s",
            "--max-connections=5",
            "--shutdown-timeout=6s",
        ]);
        let secs = std::time::Duration::from_secs;
        assert_eq!(
            (
                set.header_timeout,
                set.body_timeout,
                set.idle_timeout,
                set.max_connections,
                set.shutdown_timeout
            ),
            (secs(2), secs(3), secs(4), 5, secs(6))
        );
        assert!(Cli::try_parse_from(["chatmem", "serve", "--max-connections=0"]).is_err());
        assert!(Cli::try_parse_from(["chatmem", "serve", "--idle-timeout=0s"]).is_err());
    }
}
