//! A real HTTP server on loopback speaking the OpenAI chat-completions protocol, answering
//! from a per-test script and recording every request body; `GET /v1/models` lists two models.

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
use chatmem_openai::OpenAiModel;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// A text answer.
pub(crate) fn text(s: &str) -> Reply {
    Reply::Text(s.to_string())
}

/// One scripted answer. Text, reasoning and tool-call answers come as plain JSON or as SSE
/// chunks, whichever the request asked for (`"stream": true`).
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// An answer with this text.
    Text(String),
    /// An answer with reasoning text (DeepSeek's `reasoning_content`) and text.
    Reasoning {
        reasoning: &'static str,
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
}

/// Answers a request when the script is empty (instead of echoing).
pub(crate) type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
    responder: Option<Responder>,
}

/// The server; it stops when the test's runtime ends.
pub(crate) struct MockServer {
    /// `http://127.0.0.1:PORT/v1`
    pub(crate) base_url: String,
    shared: Arc<Shared>,
}

impl MockServer {
    /// Starts a server on 127.0.0.1:0. With an empty script it echoes: "echo: <last user text>".
    pub(crate) async fn start(script: Vec<Reply>) -> Self {
        Self::start_shared(Shared {
            script: Mutex::new(script.into()),
            ..Shared::default()
        })
        .await
    }

    /// Starts a server that answers every request with `responder`.
    #[allow(dead_code)] // used by the CLI's tests, which share this module
    pub(crate) async fn start_with(responder: Responder) -> Self {
        Self::start_shared(Shared {
            responder: Some(responder),
            ..Shared::default()
        })
        .await
    }

    async fn start_shared(shared: Shared) -> Self {
        let shared = Arc::new(shared);
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            shared,
        }
    }

    /// Appends replies to the script.
    pub(crate) fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.script.lock().unwrap().extend(replies);
    }

    /// Every request body received so far, in arrival order.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The last request body.
    pub(crate) fn last_request(&self) -> Value {
        self.requests().last().cloned().expect("no request recorded")
    }

    /// The client pointed at this server: no retries, a 5 s timeout.
    pub(crate) fn model(&self) -> OpenAiModel {
        self.model_with(|b| b)
    }

    /// The client with more settings.
    pub(crate) fn model_with(
        &self,
        f: impl FnOnce(chatmem_openai::OpenAiModelBuilder) -> chatmem_openai::OpenAiModelBuilder,
    ) -> OpenAiModel {
        let b = OpenAiModel::builder()
            .base_url(&self.base_url)
            .api_key("test-key")
            .model("mock-model")
            .timeout(Duration::from_secs(5))
            .max_retries(0);
        f(b).build().unwrap()
    }
}

/// `(role, content)` of each message of a request body; content is "" when absent.
pub(crate) fn roles_and_texts(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()),
        Some("Bearer test-key"),
        "the client must send its key"
    );
    shared.requests.lock().unwrap().push(request.clone());
    let reply = shared.script.lock().unwrap().pop_front();
    let reply = reply.unwrap_or_else(|| match &shared.responder {
        Some(respond) => respond(&request),
        None => Reply::Text(echo(&request)),
    });
    answer(reply, request["stream"] == json!(true)).await
}

/// OpenAI's model list; 401 with OpenAI's error body for any key but the test's.
async fn models(headers: HeaderMap) -> Response {
    let key = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if key != Some("Bearer test-key") {
        let body = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    axum::Json(json!({"object": "list", "data": [
        {"id": "mock-model", "object": "model", "created": 1_700_000_000, "owned_by": "chatmem-test"},
        {"id": "mock-reasoner", "object": "model", "created": 1_700_000_000, "owned_by": "chatmem-test"},
    ]}))
    .into_response()
}

fn echo(request: &Value) -> String {
    let last_user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    format!("echo: {last_user}")
}

fn answer(reply: Reply, stream: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match reply {
            Reply::Slow(delay, inner) => {
                tokio::time::sleep(delay).await;
                answer(*inner, stream).await
            }
            Reply::Status(code) => {
                let status = StatusCode::from_u16(code).unwrap();
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
            Reply::Text(text) => completion(json!({"role": "assistant", "content": text}), "stop"),
            Reply::Reasoning { reasoning, content } => completion(
                json!({"role": "assistant", "content": content, "reasoning_content": reasoning}),
                "stop",
            ),
            Reply::ToolCalls(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                completion(
                    json!({"role": "assistant", "content": "", "tool_calls": calls}),
                    "tool_calls",
                )
            }
        }
    })
}

fn completion(message: Value, finish: &str) -> Response {
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
        .unwrap()
}
