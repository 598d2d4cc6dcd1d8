//! The one mock OpenAI upstream of the tests: a loopback server speaking the chat-completions
//! protocol (JSON and SSE) and `GET /v1/models`, answering from a per-test script, then from a
//! fallback, and recording every request as it came (bytes, JSON in its key order, headers).
//!
//! Two scripts share it. [`Reply`] is what a model answers (text, reasoning, tool calls, an
//! error status, a delay, a stream that hangs), rendered as JSON or as SSE chunks as the
//! request asks; [`Canned`] is a response byte for byte (status, headers, body chunks with
//! delays, or a connection cut mid-body), with [`completion`], [`tool_call_completion`] and
//! [`chunks`] building OpenAI's own bodies with every field a client may read.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chatmem_openai::{OpenAiModel, OpenAiModelBuilder};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::loopback::{self, Served};

/// The API key [`MockUpstream::start`] expects and [`MockUpstream::model`] sends.
pub const TEST_KEY: &str = "test-key";

/// A text answer.
pub fn text(s: &str) -> Reply {
    Reply::Text(s.to_string())
}

/// One scripted answer. Text, reasoning and tool-call answers come as plain JSON or as SSE
/// chunks, whichever the request asked for (`"stream": true`).
#[derive(Debug, Clone)]
pub enum Reply {
    /// An answer with this text.
    Text(String),
    /// An answer with reasoning text (DeepSeek's `reasoning_content`) and text.
    Reasoning {
        /// The reasoning text.
        reasoning: &'static str,
        /// The answer's text.
        content: &'static str,
    },
    /// A tool-call answer: (id, function name, arguments).
    ToolCalls(Vec<(&'static str, &'static str, &'static str)>),
    /// An HTTP error with an OpenAI-style error body.
    Status(u16),
    /// The same reply after a delay (before any byte is sent).
    Slow(Duration, Box<Reply>),
    /// SSE: these text pieces, then the connection stays open without `[DONE]`.
    StreamThenHang(Vec<&'static str>),
    /// This response, byte for byte.
    Canned(Canned),
}

/// One canned response: status, headers and the body in chunks, each sent after its delay;
/// with `cut`, the connection breaks after the chunks instead of ending the body.
#[derive(Debug, Clone)]
pub struct Canned {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: Vec<(&'static str, String)>,
    /// The body: each chunk sent after its delay.
    pub chunks: Vec<(Duration, Bytes)>,
    /// Whether the connection breaks after the chunks.
    pub cut: bool,
}

impl Canned {
    /// A JSON body with `status`.
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".into())],
            chunks: vec![(Duration::ZERO, Bytes::from(body.to_owned()))],
            cut: false,
        }
    }

    /// Server-sent events, each chunk after `gap`.
    pub fn sse(events: Vec<String>, gap: Duration) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "text/event-stream; charset=utf-8".into())],
            chunks: events.into_iter().map(|e| (gap, Bytes::from(e))).collect(),
            cut: false,
        }
    }

    /// The same, with a header added.
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The whole body, as the client should see it.
    pub fn body(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|(_, b)| b.to_vec()).collect()
    }
}

/// A completion as OpenAI sends one, with every field a client may read (and one more a
/// provider adds).
pub fn completion(text: &str) -> String {
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

/// A tool-call completion as OpenAI sends one.
pub fn tool_call_completion(id: &str, name: &str, arguments: &str) -> String {
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
pub fn chunks(pieces: &[&str], include_usage: bool) -> Vec<String> {
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

/// `(role, content)` of each message of a request body; content is "" when absent.
///
/// # Panics
/// When the body has no `messages` array of messages with a role.
pub fn roles_and_texts(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .expect("a messages array")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().expect("a role").to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// What the upstream received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The body's bytes.
    pub body: Bytes,
    /// The body as JSON (`null` when it is not JSON).
    pub json: Value,
    /// The request's headers.
    pub headers: HeaderMap,
}

/// Answers a request when the script is empty.
pub type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    fallback: Responder,
    key: Option<&'static str>,
    embeddings: Mutex<Embeddings>,
    embedded: Mutex<Vec<Value>>,
}

/// How the upstream's `POST /v1/embeddings` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embeddings {
    /// A toy model: each text's characters (letters and digits, case folded) hashed into
    /// [`EMBEDDING_DIM`] counts, so texts sharing characters are similar (`那单` and `订单`
    /// share `单`) and texts sharing none are orthogonal.
    Characters,
    /// Never answers.
    Hang,
    /// Answers this HTTP status with an OpenAI-style error body.
    Status(u16),
    /// Answers 200 with a body that is not embeddings (`{"data": "garbage"}`).
    Garbage,
    /// Answers one vector fewer than the texts asked.
    Short,
}

pub use crate::embedders::{EMBEDDING_DIM, character_vector};

/// The upstream; it runs until the test's runtime ends.
#[derive(Debug)]
pub struct MockUpstream {
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
    served: Served,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("key", &self.key).finish_non_exhaustive()
    }
}

impl MockUpstream {
    /// An upstream that expects [`TEST_KEY`] (a request without it fails the test; `/v1/models`
    /// answers 401 to it) and answers from `script`, then (script empty) with the text
    /// "echo: <last user text>".
    pub async fn start(script: Vec<Reply>) -> Self {
        Self::launch(script, Arc::new(|r| Reply::Text(echo(r))), Some(TEST_KEY)).await
    }

    /// An upstream that expects [`TEST_KEY`] and answers every request with `responder`.
    pub async fn start_with(responder: Responder) -> Self {
        Self::launch(Vec::new(), responder, Some(TEST_KEY)).await
    }

    /// An upstream that takes any key and answers every request with `responder`.
    pub async fn answering(responder: Responder) -> Self {
        Self::launch(Vec::new(), responder, None).await
    }

    /// An upstream that takes any key and answers from `script`, then (script empty)
    /// "echo: <last user text>" as OpenAI would send it ([`completion`] or [`chunks`], as the
    /// request asks).
    pub async fn canned(script: Vec<Canned>) -> Self {
        let script = script.into_iter().map(Reply::Canned).collect();
        Self::launch(script, Arc::new(openai_echo), None).await
    }

    /// An upstream that takes any key and answers the after-sale scenario from what the
    /// request carries (see [`after_sale`]).
    pub async fn after_sale() -> Self {
        Self::answering(Arc::new(after_sale)).await
    }

    async fn launch(script: Vec<Reply>, fallback: Responder, key: Option<&'static str>) -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            received: Mutex::new(Vec::new()),
            fallback,
            key,
            embeddings: Mutex::new(Embeddings::Characters),
            embedded: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embed))
            .route("/v1/models", get(models))
            .with_state(Arc::clone(&shared));
        let served = loopback::serve(app).await;
        Self {
            base_url: format!("{}/v1", served.url()),
            served,
            shared,
        }
    }

    /// How `POST /v1/embeddings` answers from now on (default [`Embeddings::Characters`]).
    pub fn set_embeddings(&self, how: Embeddings) {
        *self.shared.embeddings.lock().expect("lock") = how;
    }

    /// Every embedding request body received, in arrival order (apart from
    /// [`requests`](MockUpstream::requests), which are the chat calls).
    pub fn embedding_requests(&self) -> Vec<Value> {
        self.shared.embedded.lock().expect("lock").clone()
    }

    /// An embedder pointed at this upstream: [`TEST_KEY`], model `mock-embedder`, no
    /// retries, a 5 s timeout.
    pub fn embedder(&self) -> chatmem_openai::OpenAiEmbedder {
        OpenAiModel::builder()
            .base_url(&self.base_url)
            .api_key(TEST_KEY)
            .model("mock-embedder")
            .timeout(Duration::from_secs(5))
            .max_retries(0)
            .build_embedder()
            .expect("a valid embedder")
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.script.lock().expect("lock").extend(replies);
    }

    /// Every request received, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }

    /// Every request body received so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.received().into_iter().map(|r| r.json).collect()
    }

    /// The last request body.
    ///
    /// # Panics
    /// When no request came.
    pub fn last_request(&self) -> Value {
        self.requests().last().cloned().expect("no request recorded")
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> usize {
        self.served.connections()
    }

    /// The client pointed at this upstream: [`TEST_KEY`], no retries, a 5 s timeout.
    pub fn model(&self) -> OpenAiModel {
        self.model_with(|b| b)
    }

    /// The client with more settings.
    ///
    /// # Panics
    /// When the settings do not build a client.
    pub fn model_with(&self, f: impl FnOnce(OpenAiModelBuilder) -> OpenAiModelBuilder) -> OpenAiModel {
        let b = OpenAiModel::builder()
            .base_url(&self.base_url)
            .api_key(TEST_KEY)
            .model("mock-model")
            .timeout(Duration::from_secs(5))
            .max_retries(0);
        f(b).build().expect("a valid client")
    }
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(key) = shared.key {
        assert_eq!(
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()),
            Some(format!("Bearer {key}").as_str()),
            "the client must send its key"
        );
    }
    shared.received.lock().expect("lock").push(Received {
        body,
        json: request.clone(),
        headers,
    });
    let reply = shared.script.lock().expect("lock").pop_front();
    let reply = reply.unwrap_or_else(|| (shared.fallback)(&request));
    answer(reply, request["stream"] == json!(true)).await
}

/// OpenAI's `/v1/embeddings`, as [`Embeddings`] says.
async fn embed(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.embedded.lock().expect("lock").push(request.clone());
    let how = *shared.embeddings.lock().expect("lock");
    let texts: Vec<String> = match &request["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|t| t.as_str().unwrap_or_default().to_owned()).collect(),
        _ => Vec::new(),
    };
    match how {
        Embeddings::Hang => std::future::pending().await,
        Embeddings::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = json!({"error": {"message": "mock embedding failure", "type": "server_error", "code": null}});
            (status, axum::Json(body)).into_response()
        }
        Embeddings::Garbage => axum::Json(json!({"data": "garbage"})).into_response(),
        Embeddings::Characters | Embeddings::Short => {
            let n = if how == Embeddings::Short {
                texts.len().saturating_sub(1)
            } else {
                texts.len()
            };
            let data: Vec<Value> = texts[..n]
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": character_vector(t)}))
                .collect();
            axum::Json(json!({"object": "list", "data": data, "model": request["model"], "usage": {"prompt_tokens": 0, "total_tokens": 0}}))
                .into_response()
        }
    }
}

/// OpenAI's model list; with a key expected, 401 with OpenAI's error body for any other.
async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let key = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if let Some(expected) = shared.key
        && key != Some(format!("Bearer {expected}").as_str())
    {
        let body = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    axum::Json(json!({"object": "list", "data": [
        {"id": "mock-model", "object": "model", "created": 1_700_000_000, "owned_by": "chatmem-test"},
        {"id": "mock-reasoner", "object": "model", "created": 1_700_000_000, "owned_by": "chatmem-test"},
    ]}))
    .into_response()
}

/// The order number of the after-sale scenario.
pub const ORDER: &str = "LC202610060018";

/// A model's answer in the after-sale scenario, from what the request carries: the order
/// number if the conversation holds it, a tool call when asked where an order is, the tool's
/// result after a tool message.
pub fn after_sale(body: &Value) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let knows_order = body["messages"].to_string().contains(ORDER);
    let message = if last["role"] == "tool" {
        json!({"role": "assistant", "content": format!("查询结果：{}", last["content"].as_str().unwrap_or(""))})
    } else if last["content"].to_string().contains("到哪了") {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_order_1", "type": "function",
            "function": {"name": "order_status", "arguments": format!("{{\"order\":\"{ORDER}\"}}")}
        }]})
    } else if last["content"].to_string().contains("能退吗") {
        let text = if knows_order {
            format!("订单 {ORDER} 未发货，可以退。")
        } else {
            "请提供订单号。".to_owned()
        };
        json!({"role": "assistant", "content": text})
    } else if knows_order {
        json!({"role": "assistant", "content": format!("已查到订单 {ORDER}，尚未发货。")})
    } else {
        json!({"role": "assistant", "content": "您好，请问有什么可以帮您？"})
    };
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    let completion = json!({
        "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    Reply::Canned(Canned::json(200, &completion.to_string()))
}

fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn echo(request: &Value) -> String {
    format!("echo: {}", last_user_text(request))
}

fn openai_echo(request: &Value) -> Reply {
    let text = echo(request);
    Reply::Canned(if request["stream"] == json!(true) {
        let include_usage = request["stream_options"]["include_usage"] == json!(true);
        Canned::sse(chunks(&[&text], include_usage), Duration::ZERO)
    } else {
        Canned::json(200, &completion(&text))
    })
}

fn answer(reply: Reply, stream: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match reply {
            Reply::Canned(canned) => respond(canned),
            Reply::Slow(delay, inner) => {
                tokio::time::sleep(delay).await;
                answer(*inner, stream).await
            }
            Reply::Status(code) => {
                let status = StatusCode::from_u16(code).expect("a status code");
                let body = json!({"error": {"message": format!("scripted {code}"), "type": "test_error", "param": null, "code": null}});
                (status, axum::Json(body)).into_response()
            }
            Reply::StreamThenHang(pieces) => {
                let chunks: Vec<Value> = pieces.iter().map(|p| chunk(json!({"content": p}), None)).collect();
                let head = futures_util::stream::iter(chunks.into_iter().map(|c| sse(&c)));
                sse_response(head.chain(futures_util::stream::pending()))
            }
            Reply::Text(text) if stream => sse_text(None, &text),
            Reply::Reasoning { reasoning, content } if stream => sse_text(Some(reasoning), content),
            Reply::ToolCalls(calls) if stream => {
                let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
                for (i, (id, name, args)) in calls.iter().enumerate() {
                    // Split each call over three chunks as providers do.
                    let (a, b) = args.split_at(args.len() / 2);
                    chunks.push(chunk(
                        json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                        None,
                    ));
                    chunks.push(chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": a}}]}),
                        None,
                    ));
                    chunks.push(chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}),
                        None,
                    ));
                }
                chunks.push(chunk(json!({}), Some("tool_calls")));
                sse_done(chunks)
            }
            Reply::Text(text) => short_completion(json!({"role": "assistant", "content": text}), "stop"),
            Reply::Reasoning { reasoning, content } => short_completion(
                json!({"role": "assistant", "content": content, "reasoning_content": reasoning}),
                "stop",
            ),
            Reply::ToolCalls(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                short_completion(
                    json!({"role": "assistant", "content": "", "tool_calls": calls}),
                    "tool_calls",
                )
            }
        }
    })
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

fn short_completion(message: Value, finish: &str) -> Response {
    axum::Json(json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "mock-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
    .into_response()
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
}

fn sse(v: &Value) -> Result<Bytes, Infallible> {
    Ok(Bytes::from(format!("data: {v}\n\n")))
}

/// Text (and reasoning) in pieces of three characters, then usage, then `[DONE]`.
fn sse_text(reasoning: Option<&str>, text: &str) -> Response {
    let pieces = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(3).map(|c| c.iter().collect()).collect()
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for r in reasoning.map(pieces).unwrap_or_default() {
        chunks.push(chunk(json!({"reasoning_content": r}), None));
    }
    for p in pieces(text) {
        chunks.push(chunk(json!({"content": p}), None));
    }
    chunks.push(chunk(json!({}), Some("stop")));
    sse_done(chunks)
}

fn sse_done(mut chunks: Vec<Value>) -> Response {
    chunks.push(
        json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
    );
    let events: Vec<Result<Bytes, Infallible>> = chunks
        .iter()
        .map(sse)
        .chain(std::iter::once(Ok(Bytes::from_static(b"data: [DONE]\n\n"))))
        .collect();
    // A short pause between events so deltas really arrive one by one.
    let paced = futures_util::stream::iter(events).then(|e| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        e
    });
    sse_response(paced)
}

fn sse_response(stream: impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("a valid response")
}
