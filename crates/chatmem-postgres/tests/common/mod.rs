//! Helpers shared by the integration tests: the server URL, throwaway schemas, a raw
//! client, and a loopback TCP proxy that counts round trips and simulates outages.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chatmem_postgres::PostgresStore;
use deadpool_postgres::tokio_postgres::config::Host;
use deadpool_postgres::tokio_postgres::{self, Config, NoTls};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The schema shared by tests whose child processes must find the same tables (they
/// isolate themselves with unique conversation ids).
pub const SHARED_SCHEMA: &str = "chatmem_test_shared";

/// `CHATMEM_TEST_PG_URL`, or `None` after printing the skip notice.
pub fn pg_url() -> Option<String> {
    chatmem_test::service_url("CHATMEM_TEST_PG_URL", "start PostgreSQL")
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

/// A loopback proxy in front of the PostgreSQL server. It parses the frontend
/// (client-to-server) protocol and counts `Sync` and simple `Query` messages: each one
/// is a point where the client waits for the server's `ReadyForQuery`, i.e. one round trip.
#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    round_trips: Arc<AtomicU64>,
    mode: watch::Sender<Mode>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
        let addr = listener.local_addr().expect("proxy addr");
        let round_trips = Arc::new(AtomicU64::new(0));
        let (mode, _) = watch::channel(Mode::Up);
        let mode_rx = mode.subscribe();
        let counter = round_trips.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if *mode_rx.borrow() == Mode::Down {
                    drop(client);
                    continue;
                }
                let (counter, mode_rx) = (counter.clone(), mode_rx.clone());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = tokio::spawn(pump(cr, sw, mode_rx.clone(), Some(Frontend::new(counter))));
                    let down = tokio::spawn(pump(sr, cw, mode_rx, None));
                    let _ = up.await;
                    let _ = down.await;
                });
            }
        });
        Self {
            addr,
            round_trips,
            mode,
        }
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
}

impl Frontend {
    fn new(round_trips: Arc<AtomicU64>) -> Self {
        Self {
            startup: true,
            header: Vec::with_capacity(8),
            skip: 0,
            round_trips,
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
                }
                self.skip = be(&self.header[1..5]).saturating_sub(4);
            }
            self.header.clear();
        }
    }
}
