//! A loopback upstream that speaks OpenAI's chat-completions protocol as OpenAI does
//! (every field of a completion and of a chunk), records every request as it came (bytes
//! and JSON), answers from a script of canned responses (status, headers, body chunks with
//! delays, or a connection cut mid-body) and counts the connections it accepted.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

/// One canned response: status, headers and the body in chunks, each sent after its delay;
/// with `cut`, the connection breaks after the chunks instead of ending the body.
#[derive(Debug, Clone)]
pub(crate) struct Canned {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) chunks: Vec<(Duration, Bytes)>,
    pub(crate) cut: bool,
}

impl Canned {
    /// A JSON body with `status`.
    pub(crate) fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".into())],
            chunks: vec![(Duration::ZERO, Bytes::from(body.to_owned()))],
            cut: false,
        }
    }

    /// Server-sent events, each chunk after `gap`.
    pub(crate) fn sse(events: Vec<String>, gap: Duration) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "text/event-stream; charset=utf-8".into())],
            chunks: events.into_iter().map(|e| (gap, Bytes::from(e))).collect(),
            cut: false,
        }
    }

    /// The same, with a header added.
    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The whole body, as the client should see it.
    pub(crate) fn body(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|(_, b)| b.to_vec()).collect()
    }
}

/// A completion as OpenAI sends one, with every field a client may read (and one more a
/// provider adds).
pub(crate) fn completion(text: &str) -> String {
    json!({
        "id": "chatcmpl-upstream-1", "object": "chat.completion", "created": 1_767_000_000,
        "model": "mock-model-2026-01-01", "system_fingerprint": "fp_upstream",
        "service_tier": "default",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null,
            "annotations": []}, "logprobs": {"content": [{"token": "x", "logprob": -0.1, "bytes": [120], "top_logprobs": []}]},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28,
            "prompt_tokens_details": {"cached_tokens": 16, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}},
        "provider_extra": {"region": "loopback"}
    })
    .to_string()
}

/// A tool-call completion.
pub(crate) fn tool_call_completion(id: &str, name: &str, arguments: &str) -> String {
    json!({
        "id": "chatcmpl-upstream-2", "object": "chat.completion", "created": 1_767_000_000,
        "model": "mock-model", "system_fingerprint": "fp_upstream",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}],
            "annotations": []}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
    })
    .to_string()
}

/// A streamed answer as OpenAI sends it: a role chunk, the text in `pieces`, a finish chunk,
/// a usage chunk (`choices: []`) when asked for, and `[DONE]`. Each event is one string.
pub(crate) fn chunks(pieces: &[&str], include_usage: bool) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let mut c = json!({"id": "chatcmpl-upstream-3", "object": "chat.completion.chunk", "created": 1_767_000_000,
            "model": "mock-model", "system_fingerprint": "fp_upstream",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        if include_usage {
            c["usage"] = Value::Null;
        }
        format!("data: {c}\n\n")
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    events.extend(pieces.iter().map(|p| chunk(json!({"content": p}), Value::Null)));
    events.push(chunk(json!({}), json!("stop")));
    if include_usage {
        let usage = json!({"id": "chatcmpl-upstream-3", "object": "chat.completion.chunk", "created": 1_767_000_000,
            "model": "mock-model", "system_fingerprint": "fp_upstream", "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                "prompt_tokens_details": {"cached_tokens": 8}}});
        events.push(format!("data: {usage}\n\n"));
    }
    events.push("data: [DONE]\n\n".into());
    events
}

/// What the upstream received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) body: Bytes,
    pub(crate) json: Value,
    pub(crate) headers: HeaderMap,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Canned>>,
    received: Mutex<Vec<Received>>,
    connections: AtomicUsize,
}

/// The upstream; it runs until the test's runtime ends.
pub(crate) struct Loopback {
    /// `http://127.0.0.1:PORT/v1`
    pub(crate) base_url: String,
    shared: Arc<Shared>,
}

struct Counting {
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
}

impl axum::serve::Listener for Counting {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((io, addr)) = self.listener.accept().await {
                self.shared.connections.fetch_add(1, Ordering::SeqCst);
                return (io, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

impl Loopback {
    /// Starts an upstream answering from `script`, then (script empty) "echo: <last user
    /// text>", as JSON or as a stream as the request asks.
    pub(crate) async fn start(script: Vec<Canned>) -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            ..Shared::default()
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .with_state(Arc::clone(&shared));
        let listener = Counting {
            listener,
            shared: Arc::clone(&shared),
        };
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            shared,
        }
    }

    /// Every request received, in order.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }

    /// The connections accepted so far.
    pub(crate) fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = json["stream"] == json!(true);
    let include_usage = json["stream_options"]["include_usage"] == json!(true);
    let last_user = json["messages"]
        .as_array()
        .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    shared
        .received
        .lock()
        .expect("lock")
        .push(Received { body, json, headers });
    let canned = shared.script.lock().expect("lock").pop_front();
    let canned = canned.unwrap_or_else(|| {
        let text = format!("echo: {last_user}");
        if stream {
            Canned::sse(chunks(&[&text], include_usage), Duration::ZERO)
        } else {
            Canned::json(200, &completion(&text))
        }
    });
    respond(canned)
}

async fn models() -> Response {
    respond(Canned::json(
        200,
        r#"{"object":"list","data":[{"id":"mock-model","object":"model","created":1,"owned_by":"loopback"}]}"#,
    ))
}

fn respond(canned: Canned) -> Response {
    let Canned {
        status,
        headers,
        chunks,
        cut,
    } = canned;
    let body = async_stream::stream! {
        for (delay, bytes) in chunks {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            yield Ok::<Bytes, std::io::Error>(bytes);
        }
        if cut {
            yield Err(std::io::Error::other("cut"));
        }
    };
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::from_u16(status).expect("a status");
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name, value.parse().expect("a header value"));
    }
    response
}
