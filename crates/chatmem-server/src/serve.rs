//! [`serve`]: the server's listener, for clients that cannot be trusted to be quick: deadlines
//! on a request's headers and body and on idle connections, a cap on open connections, and a
//! deadline on shutdown.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use http_body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::request_limits::BodyTimeout;
use crate::unreadable::JsonRefusals;

/// hyper's bound on its read buffer, which holds a request's head while it is parsed: far
/// above [`Limits::max_header_bytes`](crate::Limits::max_header_bytes) and [`Limits::max_uri_bytes`](crate::Limits::max_uri_bytes), so a head over those
/// reaches `request_limits::refuse_oversized` and is answered in the JSON shape. hyper answers what it cannot
/// parse itself (400 for bytes it cannot read, 431 for a head over this bound or over 100
/// header fields, 414 for a URI over 64 KiB) with a bodiless response, which
/// [`JsonRefusals`] rewrites in the JSON shape.
const HEAD_BUFFER_BYTES: usize = 256 << 10;

/// How [`serve`] treats slow and idle clients, and how long it takes to stop.
///
/// ```
/// use std::time::Duration;
/// use chatmem_server::ServeOptions;
///
/// let options = ServeOptions { idle_timeout: Duration::from_secs(5), ..ServeOptions::default() };
/// assert_eq!(options.header_timeout, Duration::from_secs(10));
/// assert_eq!(options.max_connections, 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a client has to send a request's headers, from connecting (its first request)
    /// or from the request's first byte (on a kept-alive connection); then the connection is
    /// closed (default 10 s).
    pub header_timeout: Duration,
    /// How long a client has to send a request's whole body, from the end of its headers; then
    /// the request is answered 408 `body_timeout` (default 30 s).
    pub body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed
    /// (default 60 s).
    pub idle_timeout: Duration,
    /// Connections open at once (default 1024). Over it new connections wait in the operating
    /// system's accept queue until one closes (the idle timeout closes idle ones), so they are
    /// served late rather than refused. Keep it under the process's open-file limit, so
    /// accepting never fails for want of a descriptor.
    pub max_connections: usize,
    /// After the shutdown signal, how long in-flight requests have to finish; then the
    /// remaining connections are closed and [`serve`] returns (default 10 s).
    pub shutdown_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `listener` over HTTP/1.1 until `shutdown` resolves: then it stops
/// accepting, lets in-flight requests finish within [`ServeOptions::shutdown_timeout`], closes
/// what is left and returns. Slow clients are held to `options` (the alternative to
/// `axum::serve`, which waits for every client as long as it likes).
///
/// Every answer is in the one JSON error shape: the router's, and hyper's own to requests it
/// cannot parse (rewritten from its bodiless answers, see `unreadable.rs`).
///
/// Accept errors (too many open files, a connection reset before it was accepted) are logged
/// and retried, as `axum::serve` does, so today it returns `Ok` once shut down; the `Result`
/// leaves room for failures that should stop a server.
///
/// ```no_run
/// use std::sync::Arc;
/// use chatmem::{ChatMemory, InMemoryStore, Store};
/// use chatmem_server::{ServeOptions, ServerConfig, app, serve};
///
/// # async fn run() -> std::io::Result<()> {
/// let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
/// let router = app(ChatMemory::new(store), ServerConfig::default());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let stop = async { let _ = tokio::signal::ctrl_c().await; };
/// serve(listener, router, ServeOptions::default(), stop).await
/// # }
/// ```
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(options.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut http = http1::Builder::new();
    // hyper's header timer starts whenever it waits for a request head, idle time included, so
    // it cannot keep a 10 s header deadline apart from a 60 s idle one: `expiry` keeps both.
    http.header_read_timeout(None).max_buf_size(HEAD_BUFFER_BYTES);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        // A slot first, then accept: over the cap, clients wait in the accept queue.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break, // never closed
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        // A streamed answer is many small writes: with Nagle's algorithm each would wait for
        // the client's delayed ACK of the one before (up to 40 ms on Linux).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set");
        }
        let connection = connection(stream, http.clone(), router.clone(), options, graceful.watcher());
        connections.spawn(async move {
            connection.await;
            drop(slot);
        });
    }
    drop(listener);
    tracing::info!(open = connections.len(), "shutting down: finishing in-flight requests");
    if tokio::time::timeout(options.shutdown_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "the shutdown deadline passed: closing the connections still open"
        );
    }
    connections.shutdown().await;
    Ok(())
}

/// After a failed accept: a connection that failed before it was accepted is the client's
/// business; anything else (out of file descriptors) gets a second's pause before the retry.
async fn accept_failed(e: &io::Error) {
    use io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Serves one connection until it ends, the client is too slow (`expiry`), or shutdown's
/// deadline aborts it.
async fn connection(stream: TcpStream, http: http1::Builder, router: Router, options: ServeOptions, watcher: Watcher) {
    let (activity, phase) = Activity::new(options);
    let io = TokioIo::new(JsonRefusals::new(Watched::new(stream, Arc::clone(&activity))));
    let body_timeout = options.body_timeout;
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let router = router.clone();
        let busy = Busy::start(&activity);
        async move {
            let request = request.map(|body| Body::new(DeadlineBody::new(Body::new(body), body_timeout)));
            let response = router.oneshot(request).await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| Body::new(UntilSent { body, _busy: busy })))
        }
    });
    let served = watcher.watch(http.serve_connection(io, service));
    tokio::select! {
        result = served => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        () = expiry(phase) => tracing::debug!("connection closed: the client was too slow or idle too long"),
    }
}

/// Where a connection is, for its deadlines.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Between requests: closed at the instant unless a byte of the next one comes.
    Idle(Instant),
    /// Reading a request head: closed at the instant unless the head is complete by then.
    Head(Instant),
    /// This many requests being answered (their bodies have [`DeadlineBody`]).
    Busy(usize),
}

/// A connection's phase, moved by its reads ([`Watched`]) and requests ([`Busy`]).
#[derive(Debug)]
struct Activity {
    phase: watch::Sender<Phase>,
    header_timeout: Duration,
    idle_timeout: Duration,
}

impl Activity {
    /// A new connection: its first request's header clock starts now.
    fn new(options: ServeOptions) -> (Arc<Self>, watch::Receiver<Phase>) {
        let (phase, receiver) = watch::channel(Phase::Head(Instant::now() + options.header_timeout));
        let activity = Self {
            phase,
            header_timeout: options.header_timeout,
            idle_timeout: options.idle_timeout,
        };
        (Arc::new(activity), receiver)
    }

    /// Bytes came: if the connection was idle, a request head has begun.
    fn bytes_arrived(&self) {
        self.phase.send_if_modified(|phase| match phase {
            Phase::Idle(_) => {
                *phase = Phase::Head(Instant::now() + self.header_timeout);
                true
            }
            _ => false,
        });
    }
}

/// One request being answered; dropped when its response body has been sent (or the request
/// was abandoned), which starts the idle clock once no other request is being answered.
#[derive(Debug)]
struct Busy(Arc<Activity>);

impl Busy {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.phase.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(n) => Phase::Busy(n + 1),
                _ => Phase::Busy(1),
            }
        });
        Self(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let idle = self.0.idle_timeout;
        self.0.phase.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
                _ => Phase::Idle(Instant::now() + idle),
            }
        });
    }
}

/// Resolves when the connection's current deadline passes (never while a request is being
/// answered).
async fn expiry(mut phase: watch::Receiver<Phase>) {
    loop {
        let deadline = match *phase.borrow_and_update() {
            Phase::Idle(at) | Phase::Head(at) => Some(at),
            Phase::Busy(_) => None,
        };
        let changed = match deadline {
            Some(at) => tokio::select! {
                () = tokio::time::sleep_until(at) => return,
                changed = phase.changed() => changed,
            },
            None => phase.changed().await,
        };
        if changed.is_err() {
            // Every sender is gone, so the connection is too: its own future ends the select.
            std::future::pending::<()>().await;
        }
    }
}

/// How long, and for how many bytes, a closing connection keeps reading what the client still
/// sends (see [`Watched::poll_shutdown`]).
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 16 << 20;

/// The connection's socket, telling [`Activity`] when bytes arrive.
#[derive(Debug)]
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
    /// Set once the write side is shut: until when, and how much more, it reads to drop.
    linger: Option<(Pin<Box<Sleep>>, usize)>,
}

impl Watched {
    fn new(stream: TcpStream, activity: Arc<Activity>) -> Self {
        Self {
            stream,
            activity,
            linger: None,
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_arrived();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    /// A lingering close, as web servers do: the write side is shut (the client reads the
    /// answer and then the end), then what the client still sends is read and dropped until it
    /// stops, for at most [`LINGER`] and [`LINGER_BYTES`]. Closing a socket with unread bytes
    /// sends a reset instead, and a client still sending a refused body (over the size limit,
    /// answered before it was read) then loses the answer already on its way.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.linger.is_none() {
            std::task::ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
            this.linger = Some((Box::pin(tokio::time::sleep(LINGER)), LINGER_BYTES));
        }
        let Some((until, left)) = this.linger.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let mut scratch = [0u8; 8 << 10];
        loop {
            if until.as_mut().poll(cx).is_ready() || *left == 0 {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    *left = left.saturating_sub(buf.filled().len());
                }
                // The client's end, or its error: nothing more will come.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// A response body holding its request's [`Busy`] until hyper has taken the last of it.
struct UntilSent {
    body: Body,
    _busy: Busy,
}

impl HttpBody for UntilSent {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that fails with [`BodyTimeout`] once its deadline passes, however steadily
/// it trickles in (tower-http's body timeout restarts at every chunk, so a byte a second
/// would pass it).
struct DeadlineBody {
    body: Body,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl DeadlineBody {
    fn new(body: Body, timeout: Duration) -> Self {
        Self {
            body,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        if !this.body.is_end_stream() && this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout::new(this.timeout)))));
        }
        Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
