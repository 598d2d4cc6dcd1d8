//! A loopback TCP proxy in front of a database server, for tests: it counts the client's
//! round trips on the wire and simulates outages (a server that went away, one that stopped
//! answering, a reply lost after the server applied the request). The real server is never
//! touched.
//!
//! The proxy understands just enough of the wire [`Protocol`] to split the client's byte
//! stream into requests without buffering their bodies.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The wire protocol between the client and the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// PostgreSQL's frontend/backend protocol: every `Sync` (extended protocol) or `Query`
    /// (simple protocol) is one wait for the server's `ReadyForQuery`, i.e. one round trip,
    /// and one statement whose reply can be lost.
    Postgres,
    /// MySQL's client/server protocol (3-byte length, 1-byte sequence id per packet): after
    /// the handshake, a packet with sequence id 0 starts a command, and every command but
    /// `COM_STMT_SEND_LONG_DATA` and `COM_STMT_CLOSE` (which get no reply) and `COM_QUIT` is
    /// one round trip. A statement whose reply can be lost is a `COM_STMT_EXECUTE` (a
    /// prepare is let through).
    Mysql,
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

/// The loopback proxy; see the [module docs](self).
#[derive(Debug)]
pub struct Proxy {
    /// Where clients connect instead of the server.
    pub addr: SocketAddr,
    round_trips: Arc<AtomicU64>,
    statements: Arc<AtomicU64>,
    mode: watch::Sender<Mode>,
    /// 0: forward replies; else the [`ReplyLoss`] (as `1 + index`) for the next statement.
    lose_reply: Arc<AtomicU8>,
}

impl Proxy {
    /// A proxy on a fresh loopback port in front of the server at `upstream`.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(upstream: SocketAddr, protocol: Protocol) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
        let addr = listener.local_addr().expect("proxy addr");
        let round_trips = Arc::new(AtomicU64::new(0));
        let statements = Arc::new(AtomicU64::new(0));
        let (mode, _) = watch::channel(Mode::Up);
        let mode_rx = mode.subscribe();
        let lose_reply = Arc::new(AtomicU8::new(0));
        let counters = Counters {
            round_trips: round_trips.clone(),
            statements: statements.clone(),
            armed: lose_reply.clone(),
        };
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if *mode_rx.borrow() == Mode::Down {
                    drop(client);
                    continue;
                }
                let (counters, mode_rx) = (counters.clone(), mode_rx.clone());
                // This connection's reply loss, taken from `armed` by its next statement.
                let losing = Arc::new(AtomicU8::new(0));
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let frontend = Frontend::new(protocol, counters, losing.clone());
                    let backend = Backend::new(protocol, losing);
                    let up = tokio::spawn(pump(cr, sw, mode_rx.clone(), Some(frontend), None));
                    let down = tokio::spawn(pump(sr, cw, mode_rx, None, Some(backend)));
                    let _ = up.await;
                    let _ = down.await;
                });
            }
        });
        Self {
            addr,
            round_trips,
            statements,
            mode,
            lose_reply,
        }
    }

    /// The next statement a client sends, on whichever connection, reaches the server but
    /// its reply never reaches the client; the connection is then closed (once the server
    /// has finished the statement, commit included) or left silent, as `how` says. Other
    /// connections are not affected.
    pub fn lose_next_reply(&self, how: ReplyLoss) {
        let code = match how {
            ReplyLoss::Close => 1,
            ReplyLoss::Silence => 2,
        };
        self.lose_reply.store(code, Ordering::SeqCst);
    }

    /// Whether an armed [`lose_next_reply`](Self::lose_next_reply) has been taken by a statement.
    pub fn reply_lost(&self) -> bool {
        self.lose_reply.load(Ordering::SeqCst) == 0
    }

    /// Round trips (requests that wait for a reply) seen so far.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }

    /// Statements whose reply [`lose_next_reply`](Self::lose_next_reply) can lose, seen so
    /// far: every store operation is one.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::SeqCst)
    }

    /// Switches what the proxy does with traffic from now on.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

/// The proxy-wide counters and the armed reply loss, shared by every connection.
#[derive(Clone)]
struct Counters {
    round_trips: Arc<AtomicU64>,
    statements: Arc<AtomicU64>,
    armed: Arc<AtomicU8>,
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
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
                Forward::CloseLater => {
                    // Let the server finish the command (its reply is what arrived), then cut.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return;
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// What a client request is, for the counters.
enum Request {
    /// Gets no reply.
    NoReply,
    /// Waits for a reply, which is never lost.
    RoundTrip,
    /// Waits for a reply, which [`Proxy::lose_next_reply`] can lose.
    Statement,
}

/// Splits the client's byte stream into requests without buffering bodies.
struct Frontend {
    protocol: Protocol,
    /// PostgreSQL only: still in the startup phase, whose messages have no type byte.
    startup: bool,
    header: Vec<u8>,
    skip: usize,
    counters: Counters,
    /// This connection's reply loss (see [`Backend`]).
    losing: Arc<AtomicU8>,
}

impl Frontend {
    fn new(protocol: Protocol, counters: Counters, losing: Arc<AtomicU8>) -> Self {
        Self {
            protocol,
            startup: protocol == Protocol::Postgres,
            header: Vec::with_capacity(8),
            skip: 0,
            counters,
            losing,
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.skip > 0 {
                let k = self.skip.min(data.len());
                self.skip -= k;
                data = &data[k..];
                continue;
            }
            let need = match self.protocol {
                // Startup-phase messages: length, then a code; later ones: a type byte, then
                // a 4-byte length that counts itself.
                Protocol::Postgres if self.startup => 8,
                Protocol::Postgres => 5,
                // The packet header (4 bytes) and the first payload byte: the command.
                Protocol::Mysql => 5,
            };
            let k = (need - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.header.len() < need {
                return;
            }
            let (request, skip) = match self.protocol {
                Protocol::Postgres => self.postgres_message(),
                Protocol::Mysql => mysql_packet(&self.header),
            };
            self.skip = skip;
            match request {
                Request::NoReply => {}
                Request::RoundTrip => {
                    self.counters.round_trips.fetch_add(1, Ordering::SeqCst);
                }
                Request::Statement => {
                    self.counters.round_trips.fetch_add(1, Ordering::SeqCst);
                    self.counters.statements.fetch_add(1, Ordering::SeqCst);
                    // Taken before the request is forwarded, so before any reply to it.
                    if self.losing.load(Ordering::SeqCst) == 0 {
                        self.losing
                            .store(self.counters.armed.swap(0, Ordering::SeqCst), Ordering::SeqCst);
                    }
                }
            }
            self.header.clear();
        }
    }

    /// The PostgreSQL message whose header is complete, and the body bytes to skip.
    fn postgres_message(&mut self) -> (Request, usize) {
        const SSL_REQUEST: u32 = 80_877_103;
        const GSS_REQUEST: u32 = 80_877_104;
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if self.startup {
            let (len, code) = (be(&self.header[0..4]), be(&self.header[4..8]) as u32);
            if code != SSL_REQUEST && code != GSS_REQUEST {
                self.startup = false;
            }
            return (Request::NoReply, len.saturating_sub(8));
        }
        let request = if self.header[0] == b'S' || self.header[0] == b'Q' {
            Request::Statement
        } else {
            Request::NoReply
        };
        (request, be(&self.header[1..5]).saturating_sub(4))
    }
}

/// The MySQL packet whose header and command byte `header` holds, and the bytes to skip.
fn mysql_packet(header: &[u8]) -> (Request, usize) {
    const COM_QUIT: u8 = 0x01;
    const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
    const COM_STMT_CLOSE: u8 = 0x19;
    const COM_STMT_EXECUTE: u8 = 0x17;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let (seq, command) = (header[3], header[4]);
    // A command: the client's handshake packets have sequence ids from 1.
    let request = if seq != 0 || [COM_QUIT, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE].contains(&command) {
        Request::NoReply
    } else if command == COM_STMT_EXECUTE {
        Request::Statement
    } else {
        Request::RoundTrip
    };
    (request, len.saturating_sub(1))
}

/// What to do with bytes the server sent.
enum Forward {
    Yes,
    No,
    /// Drop them and close the connection to the client.
    Close,
    /// Drop them and close the connection to the client a little later.
    CloseLater,
}

/// Swallows the server's reply on a connection whose statement took the proxy's reply loss.
///
/// On PostgreSQL the reply is read up to and including its `ReadyForQuery` message (the
/// statement and its transaction are over then; the client waits for each reply before it
/// sends its next request, so that reply starts at a message boundary). On MySQL, where a
/// reply's end is not parsed, a lost-then-closed reply closes the connection shortly after
/// its first bytes arrive.
struct Backend {
    protocol: Protocol,
    /// Set by this connection's [`Frontend`] when a statement takes the reply loss.
    marked: Arc<AtomicU8>,
    /// The loss in progress, and whether its `ReadyForQuery` has been seen.
    losing: Option<(ReplyLoss, bool)>,
    header: Vec<u8>,
    skip: usize,
}

impl Backend {
    fn new(protocol: Protocol, marked: Arc<AtomicU8>) -> Self {
        Self {
            protocol,
            marked,
            losing: None,
            header: Vec::with_capacity(5),
            skip: 0,
        }
    }

    fn feed(&mut self, data: &[u8]) -> Forward {
        if self.losing.is_none() {
            self.losing = match self.marked.load(Ordering::SeqCst) {
                1 => Some((ReplyLoss::Close, false)),
                2 => Some((ReplyLoss::Silence, false)),
                _ => return Forward::Yes,
            };
        }
        match self.protocol {
            Protocol::Postgres => self.postgres_reply(data),
            Protocol::Mysql => match self.losing {
                Some((ReplyLoss::Close, _)) => Forward::CloseLater,
                _ => Forward::No,
            },
        }
    }

    fn postgres_reply(&mut self, mut data: &[u8]) -> Forward {
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
