//! [`ServerProcess`]: `chatmem serve` as a separate process on a loopback port, as an
//! application would run it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use crate::error::LoadError;

/// How long the server may take to say where it listens (a PostgreSQL store migrates first).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a SIGTERM may take to end it (in-flight requests finish first).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// What `chatmem serve` prints once it listens, before the URL.
const LISTENING: &str = "serving conversation memory on ";

/// A running `chatmem serve --listen 127.0.0.1:0 --store URL --retention keep-history`
/// (history kept so every committed message can be counted afterwards); killed on drop if
/// [`ServerProcess::stop`] was not called.
///
/// ```no_run
/// # fn demo() -> Result<(), chatmem_loadtest::LoadError> {
/// let server = chatmem_loadtest::ServerProcess::spawn("target/debug/chatmem".as_ref(), "memory:")?;
/// println!("{}", server.base_url()); // http://127.0.0.1:PORT
/// server.stop()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ServerProcess {
    child: Option<Child>,
    base_url: String,
    stderr: Arc<Mutex<String>>,
}

impl ServerProcess {
    /// Starts the `chatmem` binary at `program` serving `store` on a free loopback port, and
    /// waits until it listens.
    ///
    /// # Errors
    /// [`LoadError::Spawn`] when it cannot be started, [`LoadError::NotUp`] (with what it
    /// printed) when it exits or stays silent for a minute.
    pub fn spawn(program: &Path, store: &str) -> Result<Self, LoadError> {
        Self::spawn_with(program, &["--store", store, "--retention", "keep-history"])
    }

    /// Starts `program serve --listen 127.0.0.1:0 <args>` and waits until it listens: for
    /// other settings than [`ServerProcess::spawn`]'s (e.g. a server that drops history, to
    /// see the verification catch it).
    ///
    /// # Errors
    /// As [`ServerProcess::spawn`].
    pub fn spawn_with(program: &Path, args: &[&str]) -> Result<Self, LoadError> {
        let mut child = Command::new(program)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("CHATMEM_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| LoadError::Spawn {
                program: program.display().to_string(),
                source,
            })?;
        // A thread reads stderr to its end (so the server never blocks on a full pipe),
        // keeps it for error messages, and passes on the line that names the address.
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        if let Some(pipe) = child.stderr.take() {
            let kept = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Some((_, url)) = line.split_once(LISTENING) {
                        let _ = tx.send(url.trim().to_owned());
                    }
                    let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                    kept.push_str(&line);
                    kept.push('\n');
                }
            });
        }
        let mut server = Self {
            child: Some(child),
            base_url: String::new(),
            stderr,
        };
        let started = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(url) => {
                    server.base_url = url;
                    return Ok(server);
                }
                Err(mpsc::RecvTimeoutError::Timeout) if started.elapsed() < START_TIMEOUT => {
                    if let Some(Ok(Some(status))) = server.child.as_mut().map(Child::try_wait) {
                        return Err(LoadError::NotUp(format!("it exited ({status}): {}", server.stderr())));
                    }
                }
                Err(_) => {
                    return Err(LoadError::NotUp(format!(
                        "it did not print where it listens: {}",
                        server.stderr()
                    )));
                }
            }
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// What the server printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .trim()
            .to_owned()
    }

    /// Sends SIGTERM and waits for a clean exit (in-flight requests finish first).
    ///
    /// # Errors
    /// [`LoadError::Stop`] when the signal cannot be sent, the server does not exit within
    /// 30 seconds (it is then killed), or it exits with a failure.
    pub fn stop(mut self) -> Result<ExitStatus, LoadError> {
        let Some(mut child) = self.child.take() else {
            return Err(LoadError::Stop("already stopped".into()));
        };
        // `kill` the command: sending a signal from Rust would need unsafe code or another crate.
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .map_err(|e| LoadError::Stop(format!("running kill: {e}")))?;
        if !sent.success() {
            return Err(LoadError::Stop(format!("kill -TERM failed ({sent})")));
        }
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(status),
                Ok(Some(status)) => return Err(LoadError::Stop(format!("it exited {status}: {}", self.stderr()))),
                Ok(None) if started.elapsed() < STOP_TIMEOUT => std::thread::sleep(Duration::from_millis(50)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(LoadError::Stop("it did not exit within 30 s of SIGTERM; killed".into()));
                }
                Err(e) => return Err(LoadError::Stop(format!("waiting: {e}"))),
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
