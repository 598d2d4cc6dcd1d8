//! [`LiteLlmProcess`]: LiteLLM's proxy (`litellm --config`), the comparison the proxy benchmark
//! runs beside `chatmem serve`, in front of the same loopback upstream.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::LoadError;
use crate::proxy::upstream::MODEL;

/// How long LiteLLM may take to answer its health check (importing the proxy takes seconds).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a SIGTERM may take to end it before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// The lines of its output kept for error messages.
const KEPT_LINES: usize = 40;

/// The proxy's master key, which clients send as their bearer token: LiteLLM 1.110 refuses to
/// start without one (unless told it may run open), and its docs set one.
pub const MASTER_KEY: &str = "sk-proxybench-master-key";

/// LiteLLM's config: one model name routed to the upstream as an OpenAI-compatible provider,
/// with a dummy key (the upstream checks none).
pub(crate) fn config_yaml(upstream_base_url: &str) -> String {
    format!(
        "model_list:\n  - model_name: {MODEL}\n    litellm_params:\n      model: openai/{MODEL}\n      \
         api_base: {upstream_base_url}\n      api_key: sk-proxybench-dummy\n\
         litellm_settings:\n  telemetry: false\n\
         general_settings:\n  master_key: {MASTER_KEY}\n"
    )
}

/// A running `litellm --config <dir>/litellm.yaml --host 127.0.0.1 --port <free port>`, as its
/// docs start it (one worker), with nothing that reaches the network: the model cost map is
/// the packaged one (`LITELLM_LOCAL_MODEL_COST_MAP`), telemetry off (`LITELLM_TELEMETRY_DISABLED`
/// and the config), proxies bypassed for loopback. Killed on drop if
/// [`LiteLlmProcess::stop`] was not called.
#[derive(Debug)]
pub struct LiteLlmProcess {
    child: Option<Child>,
    base_url: String,
    output: Arc<Mutex<VecDeque<String>>>,
}

impl LiteLlmProcess {
    /// Writes the config into `dir`, starts `program` (the venv's `litellm`) and waits until
    /// `GET /health/liveliness` answers 200.
    ///
    /// # Errors
    /// [`LoadError::LiteLlm`] (with the last lines it printed) when it cannot be started, exits,
    /// or does not answer within three minutes.
    pub async fn spawn(program: &Path, upstream_base_url: &str, dir: &Path) -> Result<Self, LoadError> {
        let fail = |what: String| LoadError::LiteLlm(what);
        let config = dir.join("litellm.yaml");
        std::fs::write(&config, config_yaml(upstream_base_url))
            .map_err(|e| fail(format!("writing {}: {e}", config.display())))?;
        // A free port: bound, read and released; nothing else on the machine races for it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| fail(format!("finding a free port: {e}")))?
            .port();
        let mut child = Command::new(program)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY_DISABLED", "true")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("starting {}: {e}", program.display())))?;
        // Both pipes are read to their end, so it never blocks on a full one (its access log
        // writes a line per request); the last lines are kept for error messages.
        let output = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stdout.take() {
            keep_tail(pipe, output.clone());
        }
        if let Some(pipe) = child.stderr.take() {
            keep_tail(pipe, output.clone());
        }
        let mut process = Self {
            child: Some(child),
            base_url: format!("http://127.0.0.1:{port}"),
            output,
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(LoadError::Client)?;
        let health = format!("{}/health/liveliness", process.base_url);
        let started = Instant::now();
        loop {
            if let Ok(r) = client.get(&health).send().await
                && r.status().is_success()
            {
                return Ok(process);
            }
            if let Some(Ok(Some(status))) = process.child.as_mut().map(Child::try_wait) {
                return Err(fail(format!("it exited ({status}): {}", process.output())));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(fail(format!("no health answer within 3 minutes: {}", process.output())));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The last lines it printed.
    pub fn output(&self) -> String {
        let lines = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }

    /// Sends SIGTERM, waits up to 20 seconds, then kills it.
    ///
    /// # Errors
    /// [`LoadError::Stop`] when `kill` cannot be run or it had to be killed.
    pub fn stop(mut self) -> Result<(), LoadError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // `kill` the command: sending a signal from Rust would need unsafe code or another crate.
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .map_err(|e| LoadError::Stop(format!("running kill: {e}")))?;
        let started = Instant::now();
        while started.elapsed() < STOP_TIMEOUT {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(LoadError::Stop(
            "LiteLLM did not exit within 20 s of SIGTERM; killed".into(),
        ))
    }
}

impl Drop for LiteLlmProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn keep_tail(pipe: impl Read + Send + 'static, kept: Arc<Mutex<VecDeque<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.len() == KEPT_LINES {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_routes_the_model_to_the_upstream() {
        let yaml = config_yaml("http://127.0.0.1:4321/v1");
        assert!(yaml.starts_with("model_list:\n  - model_name: bench-model\n"), "{yaml}");
        assert!(yaml.contains("\n      model: openai/bench-model\n"), "{yaml}");
        assert!(yaml.contains("\n      api_base: http://127.0.0.1:4321/v1\n"), "{yaml}");
        assert!(yaml.contains("\nlitellm_settings:\n  telemetry: false\n"), "{yaml}");
        assert!(
            yaml.ends_with("\ngeneral_settings:\n  master_key: sk-proxybench-master-key\n"),
            "{yaml}"
        );
    }
}
