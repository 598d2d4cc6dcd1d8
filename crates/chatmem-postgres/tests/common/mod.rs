//! Helpers shared by the integration tests: the server URL, throwaway schemas, a raw
//! client, and a loopback TCP proxy that counts round trips and simulates outages.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use chatmem_postgres::PostgresStore;
use deadpool_postgres::tokio_postgres::config::Host;
use deadpool_postgres::tokio_postgres::{self, Config, NoTls};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The schema shared by tests whose child processes must find the same tables (they
/// isolate themselves with unique conversation ids).
pub const SHARED_SCHEMA: &str = "chatmem_test_shared";

/// `CHATMEM_TEST_PG_URL`, which every test marked `#[ignore = "needs CHATMEM_TEST_PG_URL"]` needs.
pub fn pg_url() -> String {
    chatmem_test::required_env("CHATMEM_TEST_PG_URL", "start PostgreSQL")
}

/// A schema name unique to this call.
pub fn fresh_schema(tag: &str) -> String {
    format!("cmt_{tag}_{:016x}", fastrand::u64(..))
}

/// A store in `schema`.
pub async fn store_in(url: &str, schema: &str) -> PostgresStore {
    PostgresStore::builder(url)
        .schema(schema)
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "connecting to CHATMEM_TEST_PG_URL failed: {e} ({:?})",
                std::error::Error::source(&e)
            )
        })
}

/// A plain driver connection, for setting up what the store would never write.
pub async fn raw_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("raw connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Drops a schema made by [`fresh_schema`].
pub async fn drop_schema(url: &str, schema: &str) {
    let client = raw_client(url).await;
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("dropping the test schema");
}

/// The test server's URL and TCP address, for tests that put a loopback proxy in between.
///
/// # Panics
/// When the variable is unset or the server is not reached over TCP.
pub fn pg_url_over_tcp() -> (String, SocketAddr) {
    let url = pg_url();
    let Some(upstream) = tcp_addr(&url) else {
        panic!("CHATMEM_TEST_PG_URL is not a TCP address; the loopback proxy needs one");
    };
    (url, upstream)
}

/// The TCP address of the server in `url`, when it is reached over TCP.
pub fn tcp_addr(url: &str) -> Option<SocketAddr> {
    let config = Config::from_str(url).ok()?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(h) => h.clone(),
        Host::Unix(_) => return None,
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let host = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    format!("{host}:{port}").parse().ok()
}

/// `url` pointed at `addr` instead (key=value form, password kept).
pub fn url_via(url: &str, addr: SocketAddr) -> String {
    let config = Config::from_str(url).expect("CHATMEM_TEST_PG_URL parses");
    let mut out = format!("host={} port={}", addr.ip(), addr.port());
    if let Some(user) = config.get_user() {
        out.push_str(&format!(" user='{}'", user.replace('\'', "\\'")));
    }
    if let Some(password) = config.get_password() {
        out.push_str(&format!(
            " password='{}'",
            String::from_utf8_lossy(password).replace('\'', "\\'")
        ));
    }
    if let Some(db) = config.get_dbname() {
        out.push_str(&format!(" dbname='{}'", db.replace('\'', "\\'")));
    }
    out
}

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything.
    Up,
    /// Keep connections open but forward nothing: a server that stopped answering.
    Stalled,
    /// Close every connection and refuse new ones: a server that went away.
    Down,
}

/// How [`Proxy::lose_next_reply`] loses a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyLoss {
    /// Swallow the reply, then close the connection: the client sees "connection closed".
    Close,
    /// Swallow the reply and keep the connection open: the client waits until it times out.
    Silence,
}

/// A loopback proxy in front of the PostgreSQL server. It parses the frontend
/// (client-to-server) protocol and counts `Sync` and simple `Query` messages: each one
/// is a point where the client waits for the server's `ReadyForQuery`, i.e. one round trip.
#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    round_trips: Arc<AtomicU64>,
    mode: watch::Sender<Mode>,
    /// 0: forward replies; else the [`ReplyLoss`] (as `1 + index`) for the next one.
    lose_reply: Arc<AtomicU8>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
        let addr = listener.local_addr().expect("proxy addr");
        let round_trips = Arc::new(AtomicU64::new(0));
        let (mode, _) = watch::channel(Mode::Up);
        let mode_rx = mode.subscribe();
        let counter = round_trips.clone();
        let lose_reply = Arc::new(AtomicU8::new(0));
        let armed = lose_reply.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if *mode_rx.borrow() == Mode::Down {
                    drop(client);
                    continue;
                }
                let (counter, mode_rx, armed) = (counter.clone(), mode_rx.clone(), armed.clone());
                // This connection's reply loss, taken from `armed` by its next request.
                let losing = Arc::new(AtomicU8::new(0));
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let frontend = Frontend::new(counter, armed, losing.clone());
                    let up = tokio::spawn(pump(cr, sw, mode_rx.clone(), Some(frontend), None));
                    let down = tokio::spawn(pump(sr, cw, mode_rx, None, Some(Backend::new(losing))));
                    let _ = up.await;
                    let _ = down.await;
                });
            }
        });
        Self {
            addr,
            round_trips,
            mode,
            lose_reply,
        }
    }

    /// The next request a client sends, on whichever connection, reaches the server but its
    /// reply never reaches the client: the proxy reads the reply up to its `ReadyForQuery`
    /// (so the server has finished the statement, commit included) and then loses it as
    /// `how` says. Other connections are not affected.
    pub fn lose_next_reply(&self, how: ReplyLoss) {
        let code = match how {
            ReplyLoss::Close => 1,
            ReplyLoss::Silence => 2,
        };
        self.lose_reply.store(code, Ordering::SeqCst);
    }

    /// Whether an armed [`lose_next_reply`](Self::lose_next_reply) has been taken by a request.
    pub fn reply_lost(&self) -> bool {
        self.lose_reply.load(Ordering::SeqCst) == 0
    }

    /// Round trips (Sync + Query messages) seen so far.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    mut frontend: Option<Frontend>,
    mut backend: Option<Backend>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        loop {
            let current = *mode.borrow_and_update();
            match current {
                Mode::Up => break,
                Mode::Down => return,
                Mode::Stalled => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        if let Some(frontend) = frontend.as_mut() {
            frontend.feed(&buf[..n]);
        }
        if let Some(backend) = backend.as_mut() {
            match backend.feed(&buf[..n]) {
                Forward::Yes => {}
                Forward::No => continue,
                Forward::Close => return,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Splits the client's byte stream into protocol messages without buffering bodies.
struct Frontend {
    startup: bool,
    header: Vec<u8>,
    skip: usize,
    round_trips: Arc<AtomicU64>,
    /// The proxy's armed reply loss, and this connection's (see [`Backend`]).
    armed: Arc<AtomicU8>,
    losing: Arc<AtomicU8>,
}

impl Frontend {
    fn new(round_trips: Arc<AtomicU64>, armed: Arc<AtomicU8>, losing: Arc<AtomicU8>) -> Self {
        Self {
            startup: true,
            header: Vec::with_capacity(8),
            skip: 0,
            round_trips,
            armed,
            losing,
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        const SSL_REQUEST: u32 = 80_877_103;
        const GSS_REQUEST: u32 = 80_877_104;
        while !data.is_empty() {
            if self.skip > 0 {
                let k = self.skip.min(data.len());
                self.skip -= k;
                data = &data[k..];
                continue;
            }
            // Startup-phase messages have no type byte: length, then a code.
            let need = if self.startup { 8 } else { 5 };
            let k = (need - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.header.len() < need {
                return;
            }
            let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if self.startup {
                let (len, code) = (be(&self.header[0..4]), be(&self.header[4..8]) as u32);
                if code != SSL_REQUEST && code != GSS_REQUEST {
                    self.startup = false;
                }
                self.skip = len.saturating_sub(8);
            } else {
                if self.header[0] == b'S' || self.header[0] == b'Q' {
                    self.round_trips.fetch_add(1, Ordering::SeqCst);
                    // Taken before the request is forwarded, so before any reply to it.
                    if self.losing.load(Ordering::SeqCst) == 0 {
                        self.losing
                            .store(self.armed.swap(0, Ordering::SeqCst), Ordering::SeqCst);
                    }
                }
                self.skip = be(&self.header[1..5]).saturating_sub(4);
            }
            self.header.clear();
        }
    }
}

/// What to do with bytes the server sent.
enum Forward {
    Yes,
    No,
    /// Drop them and close the connection to the client.
    Close,
}

/// Swallows the server's reply on a connection whose request took the proxy's reply loss,
/// up to and including its `ReadyForQuery` message. The client waits for each reply
/// before it sends its next request, so that reply starts at a message boundary.
struct Backend {
    /// Set by this connection's [`Frontend`] when a request takes the reply loss.
    marked: Arc<AtomicU8>,
    /// The loss in progress, and whether its `ReadyForQuery` has been seen.
    losing: Option<(ReplyLoss, bool)>,
    header: Vec<u8>,
    skip: usize,
}

impl Backend {
    fn new(marked: Arc<AtomicU8>) -> Self {
        Self {
            marked,
            losing: None,
            header: Vec::with_capacity(5),
            skip: 0,
        }
    }

    fn feed(&mut self, mut data: &[u8]) -> Forward {
        if self.losing.is_none() {
            self.losing = match self.marked.load(Ordering::SeqCst) {
                1 => Some((ReplyLoss::Close, false)),
                2 => Some((ReplyLoss::Silence, false)),
                _ => return Forward::Yes,
            };
        }
        let Some((how, done)) = self.losing.as_mut() else {
            return Forward::Yes;
        };
        // Backend messages: a type byte, a 4-byte length that counts itself, the body.
        while !data.is_empty() && !*done {
            if self.skip > 0 {
                let k = self.skip.min(data.len());
                self.skip -= k;
                data = &data[k..];
                continue;
            }
            let k = (5 - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.header.len() < 5 {
                break;
            }
            let len = u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]) as usize;
            self.skip = len.saturating_sub(4);
            if self.header[0] == b'Z' {
                // ReadyForQuery: the statement and its transaction are over.
                *done = true;
            }
            self.header.clear();
        }
        match (*how, *done) {
            (ReplyLoss::Close, true) => Forward::Close,
            _ => Forward::No,
        }
    }
}
