//! Helpers shared by the integration tests: the server URL, throwaway table prefixes, a raw
//! connection, and a loopback TCP proxy that counts round trips and simulates outages.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use chatmem_mysql::MysqlStore;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The prefix shared by tests whose child processes must find the same tables (they
/// isolate themselves with unique conversation ids).
pub const SHARED_PREFIX: &str = "chatmem_test_shared";

/// `CHATMEM_TEST_MYSQL_URL`, which every test marked `#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]` needs.
pub fn mysql_url() -> String {
    chatmem_test::required_env("CHATMEM_TEST_MYSQL_URL", "start MySQL or MariaDB")
}

/// A table prefix unique to this call.
pub fn fresh_prefix(tag: &str) -> String {
    format!("cmt_{tag}_{:012x}", fastrand::u64(..) >> 16)
}

/// A store with tables `prefix_…`.
pub async fn store_in(url: &str, prefix: &str) -> MysqlStore {
    MysqlStore::builder(url)
        .prefix(prefix)
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "connecting to CHATMEM_TEST_MYSQL_URL failed: {e} ({:?})",
                std::error::Error::source(&e)
            )
        })
}

/// A plain driver connection, for setting up what the store would never write.
pub async fn raw_conn(url: &str) -> mysql_async::Conn {
    mysql_async::Conn::new(mysql_async::Opts::from_url(url).expect("url"))
        .await
        .expect("raw connect")
}

/// Drops the tables and procedures of a prefix made by [`fresh_prefix`].
pub async fn drop_prefix(url: &str, prefix: &str) {
    let mut conn = raw_conn(url).await;
    for sql in [
        format!("DROP TABLE IF EXISTS `{prefix}_messages`"),
        format!("DROP TABLE IF EXISTS `{prefix}_conversations`"),
        format!("DROP TABLE IF EXISTS `{prefix}_schema_version`"),
        format!("DROP PROCEDURE IF EXISTS `{prefix}_commit`"),
        format!("DROP PROCEDURE IF EXISTS `{prefix}_clear`"),
    ] {
        conn.query_drop(sql).await.expect("dropping the test tables");
    }
    let _ = conn.disconnect().await;
}

/// The test server's URL and TCP address, for tests that put a loopback proxy in between.
///
/// # Panics
/// When the variable is unset or names no TCP address.
pub fn mysql_url_over_tcp() -> (String, SocketAddr) {
    let url = mysql_url();
    let opts = mysql_async::Opts::from_url(&url).expect("CHATMEM_TEST_MYSQL_URL parses");
    let host = match opts.ip_or_hostname() {
        "localhost" => "127.0.0.1",
        h => h,
    };
    let addr = format!("{host}:{}", opts.tcp_port())
        .parse()
        .expect("CHATMEM_TEST_MYSQL_URL is not a TCP address; the loopback proxy needs one");
    (url, addr)
}

/// `url` pointed at `addr` instead (user, password and database kept).
pub fn url_via(url: &str, addr: SocketAddr) -> String {
    let opts = mysql_async::Opts::from_url(url).expect("CHATMEM_TEST_MYSQL_URL parses");
    let user = opts.user().unwrap_or("root");
    let password = opts.pass().map(|p| format!(":{p}")).unwrap_or_default();
    format!("mysql://{user}{password}@{addr}/{}", opts.db_name().unwrap_or("test"))
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
    /// Swallow the reply, then close the connection: the client sees a lost connection.
    Close,
    /// Swallow the reply and every later byte: the client waits until it times out.
    Silence,
}

/// A loopback proxy in front of the MySQL server. It splits the client's byte stream into
/// protocol packets (3-byte length, 1-byte sequence id) and counts commands: after the
/// handshake, a packet with sequence id 0 starts a command, and every command but
/// `COM_STMT_SEND_LONG_DATA` and `COM_STMT_CLOSE` (which get no reply) and `COM_QUIT` is one
/// wait for the server: one round trip.
#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    round_trips: Arc<AtomicU64>,
    executes: Arc<AtomicU64>,
    mode: watch::Sender<Mode>,
    /// 0: forward replies; else the [`ReplyLoss`] (as `1 + index`) for the next command.
    lose_reply: Arc<AtomicU8>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
        let addr = listener.local_addr().expect("proxy addr");
        let round_trips = Arc::new(AtomicU64::new(0));
        let executes = Arc::new(AtomicU64::new(0));
        let (mode, _) = watch::channel(Mode::Up);
        let mode_rx = mode.subscribe();
        let counter = round_trips.clone();
        let exec_counter = executes.clone();
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
                let exec_counter = exec_counter.clone();
                let losing = Arc::new(AtomicU8::new(0));
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let frontend = Frontend::new(counter, exec_counter, armed, losing.clone());
                    let up = tokio::spawn(pump(cr, sw, mode_rx.clone(), Some(frontend), None));
                    let down = tokio::spawn(pump(sr, cw, mode_rx, None, Some(losing)));
                    let _ = up.await;
                    let _ = down.await;
                });
            }
        });
        Self {
            addr,
            round_trips,
            executes,
            mode,
            lose_reply,
        }
    }

    /// The next statement a client executes (`COM_STMT_EXECUTE`; a prepare is let through),
    /// on whichever connection, reaches the server but its
    /// reply never reaches the client; the connection is then closed (after the server has
    /// had time to finish the command) or left silent, as `how` says.
    pub fn lose_next_reply(&self, how: ReplyLoss) {
        let code = match how {
            ReplyLoss::Close => 1,
            ReplyLoss::Silence => 2,
        };
        self.lose_reply.store(code, Ordering::SeqCst);
    }

    /// Whether an armed [`lose_next_reply`](Self::lose_next_reply) has been taken by a command.
    pub fn reply_lost(&self) -> bool {
        self.lose_reply.load(Ordering::SeqCst) == 0
    }

    /// Round trips (commands that wait for a reply) seen so far.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }

    /// Prepared statements executed (`COM_STMT_EXECUTE`) so far: every store operation is one.
    pub fn executes(&self) -> u64 {
        self.executes.load(Ordering::SeqCst)
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
    losing: Option<Arc<AtomicU8>>,
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
        if let Some(losing) = losing.as_ref() {
            match losing.load(Ordering::SeqCst) {
                0 => {}
                1 => {
                    // Let the server finish the command (its reply is what arrived), then cut.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return;
                }
                _ => continue,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Splits the client's byte stream into packets without buffering bodies.
struct Frontend {
    header: Vec<u8>,
    skip: usize,
    round_trips: Arc<AtomicU64>,
    executes: Arc<AtomicU64>,
    armed: Arc<AtomicU8>,
    losing: Arc<AtomicU8>,
}

impl Frontend {
    fn new(round_trips: Arc<AtomicU64>, executes: Arc<AtomicU64>, armed: Arc<AtomicU8>, losing: Arc<AtomicU8>) -> Self {
        Self {
            header: Vec::with_capacity(5),
            skip: 0,
            round_trips,
            executes,
            armed,
            losing,
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        const COM_QUIT: u8 = 0x01;
        const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
        const COM_STMT_CLOSE: u8 = 0x19;
        const COM_STMT_EXECUTE: u8 = 0x17;
        while !data.is_empty() {
            if self.skip > 0 {
                let k = self.skip.min(data.len());
                self.skip -= k;
                data = &data[k..];
                continue;
            }
            // Header (4 bytes) and the first payload byte: the command.
            let k = (5 - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.header.len() < 5 {
                return;
            }
            let len =
                usize::from(self.header[0]) | usize::from(self.header[1]) << 8 | usize::from(self.header[2]) << 16;
            let seq = self.header[3];
            let command = self.header[4];
            if seq == 0 {
                // A command: the client's handshake packets have sequence ids from 1.
                if ![COM_QUIT, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE].contains(&command) {
                    self.round_trips.fetch_add(1, Ordering::SeqCst);
                    if command == COM_STMT_EXECUTE {
                        self.executes.fetch_add(1, Ordering::SeqCst);
                        // Taken before the command is forwarded, so before any reply to it.
                        if self.losing.load(Ordering::SeqCst) == 0 {
                            self.losing
                                .store(self.armed.swap(0, Ordering::SeqCst), Ordering::SeqCst);
                        }
                    }
                }
            }
            self.skip = len.saturating_sub(1);
            self.header.clear();
        }
    }
}
