//! What the modules share: running `chatmem` as a user would, the checks on its refusals, and
//! `chatmem serve` as a process on a free loopback port.

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use chatmem_test::loopback::free_port;
use serde_json::{Value, json};

/// A database server a test runs on: the variable naming its URL, and how to provide one.
#[derive(Clone, Copy)]
pub(crate) struct ServerStore {
    pub(crate) var: &'static str,
    how: &'static str,
}

pub(crate) const POSTGRES: ServerStore = ServerStore {
    var: "CHATMEM_TEST_PG_URL",
    how: "start PostgreSQL",
};
pub(crate) const MYSQL: ServerStore = ServerStore {
    var: "CHATMEM_TEST_MYSQL_URL",
    how: "start MySQL or MariaDB",
};
pub(crate) const REDIS: ServerStore = ServerStore {
    var: "CHATMEM_TEST_REDIS_URL",
    how: "start Redis",
};
pub(crate) const REDIS_CLUSTER: ServerStore = ServerStore {
    var: "CHATMEM_TEST_REDIS_CLUSTER_URL",
    how: "start a Redis Cluster (bash crates/chatmem-redis/tests/cluster/start.sh)",
};

impl ServerStore {
    /// The server's URL; panics, saying how to provide it, when the variable is unset (the tests
    /// calling this are `#[ignore = "needs VAR"]`).
    pub(crate) fn url(self) -> String {
        chatmem_test::required_env(self.var, self.how)
    }
}

/// The command line `line` split at whitespace (no argument in these tests holds a space).
pub(crate) fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `chatmem args…` with `stdin` as its input and no store from the environment.
pub(crate) fn chatmem(args: &[&str], stdin: impl AsRef<[u8]>) -> Output {
    chatmem_to(args, stdin, Stdio::piped())
}

/// [`chatmem`] with stdout going to `stdout` (a file such as /dev/full, or a pipe).
pub(crate) fn chatmem_to(args: &[&str], stdin: impl AsRef<[u8]>, stdout: Stdio) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(args)
        .env_remove("CHATMEM_STORE")
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chatmem");
    // The command may exit (on bad arguments or input) before reading stdin: a broken pipe is
    // fine.
    let _ = child.stdin.take().expect("stdin").write_all(stdin.as_ref());
    child.wait_with_output().expect("wait")
}

/// Runs a command that must succeed; returns what it printed, as JSON.
pub(crate) fn ok_json(args: &[&str], stdin: &str) -> Value {
    let out = chatmem(args, stdin);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Runs a command that must succeed quietly (no progress drawn on a non-terminal stderr);
/// returns stdout.
pub(crate) fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = chatmem(args, stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {err}");
    assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
    out.stdout
}

/// Runs `chatmem args…`, which must refuse (see [`refused`]) with a line containing `needle`.
pub(crate) fn fails(args: &[&str], stdin: impl AsRef<[u8]>, needle: &str) {
    refused(&chatmem(args, stdin), args, &[needle]);
}

/// Exit code 2, nothing on stdout, and one line on stderr containing every one of `needles`;
/// returns the line.
pub(crate) fn refused(out: &Output, args: &[&str], needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line expected: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: {err:?} should mention {needle:?}");
    }
    err
}

/// The roles of a JSON array of messages.
pub(crate) fn roles(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|m| m["role"].as_str().expect("role"))
        .collect()
}

/// A conversation from a spec like `"S U1 A1"`: each word a message whose text is the word, its
/// role by the first letter (`S`ystem, `U`ser, otherwise assistant).
pub(crate) fn conv(spec: &str) -> String {
    let msgs: Vec<Value> = spec
        .split_whitespace()
        .map(|t| match &t[..1] {
            "S" => json!({"role": "system", "content": t}),
            "U" => json!({"role": "user", "content": t}),
            _ => json!({"role": "assistant", "content": t}),
        })
        .collect();
    Value::from(msgs).to_string()
}

/// The python of the examples' venv, `CHATMEM_TEST_PYTHON` (the tests calling this are
/// `#[ignore = "needs CHATMEM_TEST_PYTHON"]`).
pub(crate) fn examples_python() -> std::path::PathBuf {
    chatmem_test::required_env(
        "CHATMEM_TEST_PYTHON",
        "make the examples' venv (`bash examples/python/setup.sh` prints its python)",
    )
    .into()
}

/// A file of the repository, by its path from the root.
pub(crate) fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// `chatmem serve --listen listen args…` with no store from the environment, stdout discarded
/// and stderr piped (what a test reads after [`Serve::stop`]).
pub(crate) fn serve_command(listen: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_chatmem"));
    command
        .args(["serve", "--listen", listen])
        .args(args)
        .env_remove("CHATMEM_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// `chatmem serve` as a process on a free loopback port.
pub(crate) struct Serve {
    /// `http://127.0.0.1:PORT`
    pub(crate) base: String,
    /// Taken by [`Serve::stop`]; a server still here when a test fails is killed.
    child: Option<Child>,
}

impl Serve {
    /// Starts `chatmem serve args…` (see [`serve_command`]; `configure` adds to the command,
    /// e.g. its environment) and waits until it answers `/healthz`.
    pub(crate) async fn start(args: &[&str], configure: impl FnOnce(&mut Command)) -> Self {
        let port = free_port();
        let mut command = serve_command(&format!("127.0.0.1:{port}"), args);
        configure(&mut command);
        let child = command.spawn().expect("spawn chatmem serve");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let started = Instant::now();
        while http.get(format!("{base}/healthz")).send().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the server did not come up"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            base,
            child: Some(child),
        }
    }

    /// Stops the server with SIGTERM and returns how it ended.
    pub(crate) fn stop(mut self) -> Output {
        let child = self.child.take().expect("a running server");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        child.wait_with_output().expect("wait")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `chatmem chat args… --base-url <server> --model mock-model --store <store>` with `input` on
/// stdin (one user message a line) and no store from the environment; its output once it ends.
pub(crate) async fn chat_piped(
    server: &chatmem_test::upstream::MockUpstream,
    store: &str,
    args: &[&str],
    input: &str,
) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .arg("chat")
        .args(args)
        .args([
            "--base-url",
            &server.base_url,
            "--model",
            "mock-model",
            "--store",
            store,
        ])
        .env_remove("CHATMEM_STORE")
        .env("OPENAI_API_KEY", "test-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chatmem chat");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).await.expect("write");
    drop(stdin);
    child.wait_with_output().await.expect("wait")
}
