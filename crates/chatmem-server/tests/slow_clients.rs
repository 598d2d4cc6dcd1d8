//! `chatmem_server::serve` against slow and idle clients, over raw TCP on loopback: unfinished
//! headers, trickled bodies, idle keep-alive connections, the connection cap, an oversized
//! `Content-Length`, head limits, and shutdown with a client stalled.
//!
//! These tests drive the production listener on purpose: what they check (header and body
//! timeouts, the connection cap) lives in `serve`, not in the router. A binary of its own, so
//! its timing bounds do not share the process with the other server tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use chatmem::{ChatMemory, InMemoryStore, Store};
use chatmem_server::{ServeOptions, ServerConfig, app, serve};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// Far longer than any configured timeout here: a test that needs it has failed.
const BOUND: Duration = Duration::from_secs(15);

fn short(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Options whose timeouts are all long, so a test shortens only the one it is about.
fn patient() -> ServeOptions {
    ServeOptions {
        header_timeout: Duration::from_secs(60),
        body_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        max_connections: 64,
        shutdown_timeout: Duration::from_secs(60),
    }
}

fn chatmem_app() -> Router {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    app(ChatMemory::new(store), ServerConfig::default())
}

/// The server on a free loopback port, stopped (then awaited) through the sender.
async fn start(router: Router, options: ServeOptions) -> (SocketAddr, oneshot::Sender<()>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(listener, router, options, async {
            let _ = stopped.await;
        })
        .await
        .expect("serve");
    });
    (addr, stop, server)
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

async fn send(stream: &mut TcpStream, bytes: &[u8]) {
    stream.write_all(bytes).await.expect("write");
}

/// One response: its status and its body parsed as JSON (`Null` when it is not JSON). Fails
/// when the connection closes first.
async fn response(stream: &mut TcpStream) -> (u16, Value) {
    read_response(stream).await
}

/// [`response`] from any reader (half of a split stream).
async fn read_response(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> (u16, Value) {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "closed before a response: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().expect("a length"));
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "closed in the body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
    (status, body)
}

/// The response, within [`BOUND`].
async fn answer(stream: &mut TcpStream) -> (u16, Value) {
    tokio::time::timeout(BOUND, response(stream))
        .await
        .expect("an answer in time")
}

/// Waits (within [`BOUND`]) for the server to close the connection, and returns what it sent
/// before closing.
async fn closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut sent = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        loop {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => sent.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    sent
}

/// The error's code, after checking the one JSON shape.
fn error_code(status: u16, body: &Value) -> (u16, String) {
    let error = &body["error"];
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(error["request_id"].as_str().is_some_and(|id| id.len() == 16), "{body}");
    (status, error["code"].as_str().expect("a code").to_owned())
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n";

#[tokio::test]
async fn unfinished_headers_are_closed_by_the_header_timeout() {
    let options = ServeOptions {
        header_timeout: short(300),
        ..patient()
    };
    let (addr, _stop, _server) = start(chatmem_app(), options).await;

    // A request line and one header, and then nothing.
    let mut slow = connect(addr).await;
    send(&mut slow, b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n").await;
    assert!(closed(&mut slow).await.is_empty(), "closed without an answer");

    // A connection that never says anything, the same.
    let mut silent = connect(addr).await;
    assert!(closed(&mut silent).await.is_empty());

    // Headers trickled a byte at a time do not restart the clock.
    let mut trickle = connect(addr).await;
    let writer = tokio::spawn(async move {
        for byte in b"GET /healthz HTTP/1.1\r\nx-slow: ".iter().chain([b'a'; 200].iter()) {
            if trickle.write_all(&[*byte]).await.is_err() {
                return trickle;
            }
            tokio::time::sleep(short(20)).await;
        }
        trickle
    });
    let mut trickle = writer.await.expect("writer");
    assert!(closed(&mut trickle).await.is_empty());
}

#[tokio::test]
async fn a_trickled_body_is_answered_408_at_the_body_timeout() {
    let options = ServeOptions {
        body_timeout: short(500),
        ..patient()
    };
    let (addr, _stop, _server) = start(chatmem_app(), options).await;
    let mut stream = connect(addr).await;
    send(
        &mut stream,
        b"POST /v1/conversations/c1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{",
    )
    .await;
    let (mut reader, mut writer) = stream.into_split();
    // A byte every 50 ms: the body would take 50 s.
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(short(50)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut buf = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut chunk = [0u8; 4096];
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    trickle.abort();
    assert!(read.is_ok(), "the server waited for the whole trickle");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap_or("")).expect("a JSON body");
    assert_eq!(error_code(408, &body), (408, "body_timeout".to_owned()));
}

#[tokio::test]
async fn a_content_length_over_the_limit_is_refused_before_the_body() {
    let (addr, _stop, _server) = start(chatmem_app(), patient()).await;
    let mut stream = connect(addr).await;
    // The headers only: the body never comes, so only the header can be refused.
    send(
        &mut stream,
        b"POST /v1/conversations/c1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 2000000\r\n\r\n",
    )
    .await;
    let (status, body) = answer(&mut stream).await;
    assert_eq!(error_code(status, &body), (413, "too_large".to_owned()));
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("1048576") && message.contains("2000000"), "{message}");
}

/// A client that sends its whole over-limit body before it reads (as most HTTP clients do)
/// still gets the 413: the server stops writing, then reads and drops what is still coming
/// before it closes, so the close is no reset that would discard the answer in flight.
#[tokio::test]
async fn a_body_over_the_limit_sent_whole_still_gets_its_answer() {
    let (addr, _stop, _server) = start(chatmem_app(), patient()).await;
    for _ in 0..3 {
        let stream = connect(addr).await;
        let (mut read, mut write) = stream.into_split();
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(3 << 20)
        );
        let head = format!(
            "POST /v1/conversations/c1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        // In pieces, as an HTTP client's writes come: the answer arrives while it sends.
        let sender = tokio::spawn(async move {
            write.write_all(head.as_bytes()).await?;
            for piece in body.as_bytes().chunks(64 << 10) {
                write.write_all(piece).await?;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            write.flush().await
        });
        let sent = tokio::time::timeout(BOUND, sender)
            .await
            .expect("sent in time")
            .expect("the sender");
        assert!(sent.is_ok(), "the whole body could be sent: {sent:?}");
        let (status, answer) = tokio::time::timeout(BOUND, read_response(&mut read))
            .await
            .expect("an answer in time");
        assert_eq!(error_code(status, &answer), (413, "too_large".to_owned()));
    }
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_by_the_idle_timeout() {
    let options = ServeOptions {
        idle_timeout: short(1_000),
        ..patient()
    };
    let (addr, _stop, _server) = start(chatmem_app(), options).await;
    let mut stream = connect(addr).await;
    // Two requests on one connection: it is kept alive between them...
    for _ in 0..2 {
        send(&mut stream, HEALTHZ).await;
        assert_eq!(answer(&mut stream).await.0, 200);
    }
    // ...and closed once idle for the idle timeout (the header timeout is a minute).
    assert!(closed(&mut stream).await.is_empty());
}

#[tokio::test]
async fn connections_over_the_cap_wait_until_one_closes() {
    let options = ServeOptions {
        max_connections: 2,
        ..patient()
    };
    let (addr, _stop, _server) = start(chatmem_app(), options).await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut stream = connect(addr).await;
        send(&mut stream, HEALTHZ).await;
        assert_eq!(answer(&mut stream).await.0, 200);
        open.push(stream);
    }
    // A third client: accepted by the kernel, but not served while two are open.
    let mut third = connect(addr).await;
    send(&mut third, HEALTHZ).await;
    assert!(
        tokio::time::timeout(short(500), response(&mut third)).await.is_err(),
        "served over the cap"
    );
    drop(open.pop());
    assert_eq!(answer(&mut third).await.0, 200);
}

#[tokio::test]
async fn healthz_gets_through_once_idle_connections_are_reaped() {
    let options = ServeOptions {
        max_connections: 3,
        idle_timeout: short(500),
        ..patient()
    };
    let (addr, _stop, _server) = start(chatmem_app(), options).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        let mut stream = connect(addr).await;
        send(&mut stream, HEALTHZ).await;
        assert_eq!(answer(&mut stream).await.0, 200);
        idle.push(stream);
    }
    let mut probe = connect(addr).await;
    send(&mut probe, HEALTHZ).await;
    assert_eq!(answer(&mut probe).await.0, 200);
    for mut stream in idle {
        assert!(closed(&mut stream).await.is_empty(), "an idle connection was left open");
    }
}

#[tokio::test]
async fn shutdown_finishes_in_flight_requests_and_then_closes_stalled_clients() {
    // `/hold` tells the test it has started, then answers once released.
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let router = {
        let (started, release) = (Arc::clone(&started), Arc::clone(&release));
        Router::new().route(
            "/hold",
            get(move || async move {
                started.notify_one();
                release.notified().await;
                "done"
            }),
        )
    };
    let options = ServeOptions {
        shutdown_timeout: short(2_000),
        ..patient()
    };
    let (addr, stop, server) = start(router, options).await;

    // Connected first, so accepted first: half a request head, and then nothing.
    let mut stalled = connect(addr).await;
    send(&mut stalled, b"GET /hold HTTP/1.1\r\nhost: loc").await;
    let mut in_flight = connect(addr).await;
    send(&mut in_flight, b"GET /hold HTTP/1.1\r\nhost: localhost\r\n\r\n").await;
    tokio::time::timeout(BOUND, started.notified())
        .await
        .expect("the request started");

    stop.send(()).expect("the server listens for the signal");
    release.notify_one();
    let mut reply = String::new();
    tokio::time::timeout(BOUND, in_flight.read_to_string(&mut reply))
        .await
        .expect("the in-flight request was answered")
        .expect("read");
    assert!(reply.starts_with("HTTP/1.1 200") && reply.ends_with("done"), "{reply}");

    // The stalled client does not keep the server running past the shutdown deadline
    // (its header timeout is a minute).
    tokio::time::timeout(BOUND, server)
        .await
        .expect("serve returned after the shutdown deadline")
        .expect("serve");
    assert!(closed(&mut stalled).await.is_empty());
}

#[tokio::test]
async fn a_head_over_the_limits_is_answered_in_the_json_shape() {
    let (addr, _stop, _server) = start(chatmem_app(), patient()).await;

    let mut stream = connect(addr).await;
    let big = "a".repeat(20_000);
    send(
        &mut stream,
        format!("GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: {big}\r\n\r\n").as_bytes(),
    )
    .await;
    let (status, body) = answer(&mut stream).await;
    assert_eq!(error_code(status, &body), (431, "header_too_large".to_owned()));
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("x-big") && message.contains("16384"), "{message}");

    let mut stream = connect(addr).await;
    let query = "q".repeat(9_000);
    send(
        &mut stream,
        format!("GET /v1/conversations?cursor={query} HTTP/1.1\r\nhost: localhost\r\n\r\n").as_bytes(),
    )
    .await;
    let (status, body) = answer(&mut stream).await;
    assert_eq!(error_code(status, &body), (414, "uri_too_long".to_owned()));
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("query") && message.contains("8192"), "{message}");

    // Within the limits, the same requests are served.
    let mut stream = connect(addr).await;
    send(
        &mut stream,
        b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: aaaa\r\n\r\n",
    )
    .await;
    assert_eq!(answer(&mut stream).await.0, 200);
}

#[tokio::test]
async fn what_the_http_parser_refuses_is_answered_in_the_json_shape_too() {
    let (addr, _stop, _server) = start(chatmem_app(), patient()).await;
    let huge_head = format!(
        "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let many_headers: String = (0..120).map(|i| format!("x-h{i}: 1\r\n")).collect();
    let many_headers = format!("GET /healthz HTTP/1.1\r\nhost: localhost\r\n{many_headers}\r\n");
    let long_uri = format!("GET /{} HTTP/1.1\r\nhost: localhost\r\n\r\n", "u".repeat(70_000));
    let cases: [(&[u8], u16, &str); 5] = [
        (b"GET /v1/\xff HTTP/1.1\r\nhost: localhost\r\n\r\n", 400, "bad_request"),
        (
            b"POST /v1/conversations/c1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
            400,
            "bad_request",
        ),
        (huge_head.as_bytes(), 431, "header_too_large"),
        (
            many_headers.as_bytes(),
            431,
            "header_too_large",
        ),
        (long_uri.as_bytes(), 414, "uri_too_long"),
    ];
    for (request, status, code) in cases {
        let stream = connect(addr).await;
        let (mut reading, mut writing) = stream.into_split();
        // The server answers (and closes) before it has read everything of the larger ones.
        let request = request.to_vec();
        let writer = tokio::spawn(async move { writing.write_all(&request).await });
        let (answered, body) = tokio::time::timeout(BOUND, read_response(&mut reading))
            .await
            .expect("an answer in time");
        assert_eq!(error_code(answered, &body), (status, code.to_owned()), "{body}");
        let mut rest = Vec::new();
        let end = tokio::time::timeout(BOUND, reading.read_to_end(&mut rest)).await;
        assert!(end.is_ok(), "the connection is closed after the refusal");
        writer.abort();
    }
}

/// The head of the next response, lower-cased.
async fn head(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    tokio::time::timeout(BOUND, async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed before a response");
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("a response in time");
    String::from_utf8_lossy(&buf).to_lowercase()
}

#[tokio::test]
async fn a_request_refused_before_its_body_is_answered_connection_close() {
    let (addr, stop, server) = start(chatmem_app(), patient()).await;
    let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    let long_id = "x".repeat(300);

    // Refused on its id before the body is read: the rest of the body would be taken for the
    // next request, so the answer says the connection closes, and it does.
    let mut stream = connect(addr).await;
    send(
        &mut stream,
        format!(
            "POST /v1/conversations/{long_id}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    let refused = head(&mut stream).await;
    assert!(refused.starts_with("http/1.1 413"), "{refused}");
    assert!(refused.contains("\r\nconnection: close\r\n"), "{refused}");
    closed(&mut stream).await;

    // A request whose body was read keeps its connection: two on one.
    let mut stream = connect(addr).await;
    for _ in 0..2 {
        send(
            &mut stream,
            format!(
                "POST /v1/conversations/c1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
        let (status, _) = answer(&mut stream).await;
        assert_eq!(status, 200);
    }
    // Refused after its body was read (bad JSON): the connection stays usable too.
    send(
        &mut stream,
        b"POST /v1/conversations/c1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n{x}",
    )
    .await;
    let refused = head(&mut stream).await;
    assert!(
        refused.starts_with("http/1.1 400") && !refused.contains("connection: close"),
        "{refused}"
    );
    let _ = stop.send(());
    drop(stream);
    let _ = tokio::time::timeout(BOUND, server).await;
}
