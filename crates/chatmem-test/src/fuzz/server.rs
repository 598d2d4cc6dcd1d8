//! What the server promises for any request, asserted, with the router driven in-process
//! (`tower::ServiceExt::oneshot`, no socket): no panic and no 5xx; every refusal is the one
//! JSON error shape with a printable message and the request's id; the memory API accepts a
//! batch exactly when `chatmem::parse_messages` does and reads back what it answered; a path
//! id (one segment, `%2F` for a `/`) round-trips, and what was written under it is paged and
//! deleted under it; any method and hostile headers (`Host`, `Origin`, content type and length)
//! change an answer, never its shape; chat-completion bodies are parsed to the end (the upstream is a URL the
//! server cannot use, so a body that parses answers 503 `no_upstream`, the one 5xx allowed,
//! without any network).
//!
//! Used by the fuzz target `server_request` and by the server's `fuzz_smoke` tests.

use std::sync::Arc;

use arbitrary::{Result, Unstructured};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chatmem::{ChatMemory, ConversationId, InMemoryStore, Store};
use chatmem_server::{Auth, DEFAULT_MAX_ID_BYTES, MAX_TENANT_BYTES, ServerConfig, Upstream, app};
use percent_encoding::{NON_ALPHANUMERIC, percent_encode, utf8_percent_encode};
use serde_json::Value;
use tower::ServiceExt;

use super::json_gen;

const TOKEN: &str = "fuzz-token-0123456789";

/// A runtime for driving routers; one per process.
#[derive(Debug)]
pub struct Harness {
    runtime: tokio::runtime::Runtime,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A current-thread runtime with timers (the server times its store calls).
    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        Self { runtime }
    }

    /// One fuzz input: a request made from the bytes, sent to a fresh server.
    pub fn check_bytes(&self, data: &[u8]) {
        let mut u = Unstructured::new(data);
        let Ok(case) = Case::arbitrary(&mut u) else { return };
        self.runtime.block_on(case.check());
    }
}

/// A fresh server over an empty in-memory store; with `auth`, one token for a tenant with the
/// longest name.
fn server(auth: bool) -> Router {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let auth = auth.then(longest_tenant);
    let config = ServerConfig {
        auth,
        // The server cannot use this URL: a body that parses ends there (503), with no network.
        upstream: Some(Upstream {
            base_url: "ftp://upstream.invalid/v1".into(),
            api_key: None,
        }),
        ..ServerConfig::default()
    };
    app(ChatMemory::new(store), config)
}

/// What one request is.
#[derive(Debug)]
enum Target {
    /// `/v1/conversations/{id}{suffix}`, the id percent-encoded.
    Conversation { id: String, suffix: &'static str },
    /// `/v1/conversations/{bytes}{suffix}`, any bytes percent-encoded (not always UTF-8).
    ConversationBytes { bytes: Vec<u8>, suffix: &'static str },
    /// `POST /v1/chat/completions` with this conversation header.
    Completions { header: Option<String> },
    /// `/v1/conversations?{query}`.
    List { query: String },
    /// Any path.
    Raw { path: String },
}

#[derive(Debug)]
enum Payload {
    /// `{"messages": <generated>}` (or, for chat completions, with a `model` too).
    Messages(String),
    /// Any bytes.
    Raw(Vec<u8>),
}

#[derive(Debug)]
struct Case {
    auth: bool,
    authorization: Option<String>,
    method: Method,
    target: Target,
    payload: Payload,
    /// Headers set over the usual ones (a hostile `Host`, `Origin`, content type or length,
    /// anything): they may change the answer, never its shape.
    headers: Vec<(String, Vec<u8>)>,
}

/// Header names a hostile client plays with, beside arbitrary ones.
const HEADER_NAMES: &[&str] = &[
    "host",
    "origin",
    "content-type",
    "content-length",
    "transfer-encoding",
    "authorization",
    "x-chatmem-conversation",
    "access-control-request-method",
    "accept",
    "cookie",
];

/// Header values that mean something to the server's edges, beside arbitrary bytes.
const HEADER_VALUES: &[&str] = &[
    "evil.example",
    "localhost",
    "127.0.0.1:8080",
    "[::1]",
    "null",
    "https://evil.example",
    "http://localhost",
    "text/plain",
    "application/json; charset=utf-8",
    "application/merge-patch+json",
    "multipart/form-data; boundary=x",
    "99999999999",
    "0",
    "chunked",
    "Bearer fuzz-token-0123456789",
    "",
];

impl Case {
    fn arbitrary(u: &mut Unstructured<'_>) -> Result<Self> {
        let auth = u.ratio(1, 3)?;
        let authorization = match u.int_in_range(0..=3)? {
            0 => None,
            1 => Some(format!("Bearer {TOKEN}")),
            2 => Some("Bearer wrong".into()),
            _ => Some(u.arbitrary()?),
        };
        let mut method = u
            .choose(&[Method::GET, Method::POST, Method::DELETE, Method::PUT, Method::PATCH])?
            .clone();
        let target = match u.int_in_range(0..=5)? {
            0..=2 => Target::Conversation {
                id: if u.ratio(1, 2)? {
                    (*u.choose(&[
                        "a",
                        "a/b",
                        "..",
                        "%2F",
                        "it's \"quoted\"",
                        "订单-LC202610060018",
                        "messages",
                    ])?)
                    .into()
                } else {
                    u.arbitrary()?
                },
                suffix: u.choose(&["/messages", "/messages", "/history", "", "/", "/other"])?,
            },
            3 if u.ratio(1, 3)? => Target::ConversationBytes {
                bytes: u.arbitrary()?,
                suffix: u.choose(&["/messages", "/history", ""])?,
            },
            3 => Target::Completions {
                header: match u.int_in_range(0..=3)? {
                    0 => None,
                    1 => Some("c1".into()),
                    _ => Some(u.arbitrary()?),
                },
            },
            4 => Target::List { query: u.arbitrary()? },
            _ => Target::Raw { path: u.arbitrary()? },
        };
        let payload = if u.ratio(2, 3)? {
            Payload::Messages(json_gen::messages(u)?)
        } else {
            Payload::Raw(u.arbitrary()?)
        };
        // Drawn last, each behind a `bool` (false once the data runs out), so the inputs found
        // before these existed still decode to the requests they were.
        if u.arbitrary()? {
            method = match u.int_in_range(0..=2)? {
                0 => Method::OPTIONS,
                1 => Method::HEAD,
                _ => Method::from_bytes(u.arbitrary::<&[u8]>()?).unwrap_or(Method::TRACE),
            };
        }
        let mut headers = Vec::new();
        while headers.len() < 4 && u.arbitrary()? {
            let name = if u.ratio(3, 4)? {
                (*u.choose(HEADER_NAMES)?).to_owned()
            } else {
                u.arbitrary()?
            };
            let value = if u.ratio(2, 3)? {
                u.choose(HEADER_VALUES)?.as_bytes().to_vec()
            } else {
                u.arbitrary()?
            };
            headers.push((name, value));
        }
        Ok(Self {
            auth,
            authorization,
            method,
            target,
            payload,
            headers,
        })
    }

    fn uri(&self) -> String {
        match &self.target {
            Target::Conversation { id, suffix } => {
                format!(
                    "/v1/conversations/{}{suffix}",
                    utf8_percent_encode(id, NON_ALPHANUMERIC)
                )
            }
            Target::ConversationBytes { bytes, suffix } => {
                format!("/v1/conversations/{}{suffix}", percent_encode(bytes, NON_ALPHANUMERIC))
            }
            Target::Completions { .. } => "/v1/chat/completions".into(),
            Target::List { query } => format!("/v1/conversations?{query}"),
            Target::Raw { path } => path.clone(),
        }
    }

    fn body(&self) -> Vec<u8> {
        match (&self.payload, &self.target) {
            (Payload::Messages(m), Target::Completions { .. }) => format!(r#"{{"model":"m","messages":{m}}}"#).into(),
            (Payload::Messages(m), _) => format!(r#"{{"messages":{m}}}"#).into(),
            (Payload::Raw(bytes), _) => bytes.clone(),
        }
    }

    fn request(&self, method: Method, uri: &str, body: Vec<u8>) -> Option<Request<Body>> {
        let mut r = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json");
        if let Some(a) = &self.authorization {
            r = r.header("authorization", a.as_str());
        }
        if let Target::Completions { header: Some(h) } = &self.target {
            r = r.header("x-chatmem-conversation", h.as_str());
        }
        let mut request = r.body(Body::from(body)).ok()?;
        for (name, value) in &self.headers {
            // A name or value http cannot carry is not a request a client can send.
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).ok()?;
            let value = axum::http::HeaderValue::from_bytes(value).ok()?;
            request.headers_mut().insert(name, value);
        }
        Some(request)
    }

    /// The tenant's view is open: no auth, or the right token.
    fn authorized(&self) -> bool {
        !self.auth || self.authorization.as_deref() == Some(&format!("Bearer {TOKEN}"))
    }

    async fn check(self) {
        let router = server(self.auth);
        let uri = self.uri();
        let Some(request) = self.request(self.method.clone(), &uri, self.body()) else {
            return; // not a request http can carry (a bad URI or header)
        };
        let (status, body) = send(&router, request).await;
        if !self.headers.is_empty() || self.method == Method::HEAD {
            return; // the answer's shape was checked; what the headers change is theirs
        }
        let messages = match &self.payload {
            Payload::Messages(m) => Some(chatmem::parse_messages(m)),
            Payload::Raw(_) => None,
        };
        match &self.target {
            Target::Conversation {
                id,
                suffix: "/messages",
            } if self.method == Method::POST && self.authorized() && valid_id(id) => {
                let Some(parsed) = messages else { return };
                let accept = parsed.as_ref().is_ok_and(|m| !m.is_empty());
                assert_eq!(status == StatusCode::OK, accept, "{self:?}: {status} {body}");
                if !accept {
                    assert_eq!(status, StatusCode::BAD_REQUEST, "{self:?}: {body}");
                    assert!(
                        error_message(&body).contains("messages"),
                        "the error names the field: {body}"
                    );
                    return;
                }
                assert_eq!(body["conversation"].as_str(), Some(id.as_str()), "the id round-trips");
                // What the POST answered is what a read answers.
                let read = self
                    .request(Method::GET, &uri, Vec::new())
                    .expect("the same request reads");
                let (read_status, read_body) = send(&router, read).await;
                assert_eq!(read_status, StatusCode::OK, "{read_body}");
                assert_eq!(read_body, body);
                // The same id (one path segment, however odd) is paged and deleted too.
                let conversation = uri.strip_suffix("/messages").expect("a messages path");
                let history = self
                    .request(Method::GET, &format!("{conversation}/history"), Vec::new())
                    .expect("the same request pages");
                let (history_status, history_body) = send(&router, history).await;
                assert_eq!(history_status, StatusCode::OK, "{history_body}");
                assert_eq!(history_body["conversation"].as_str(), Some(id.as_str()));
                let delete = self
                    .request(Method::DELETE, conversation, Vec::new())
                    .expect("the same request deletes");
                let (deleted, _) = send(&router, delete).await;
                assert_eq!(deleted, StatusCode::NO_CONTENT, "{self:?}");
            }
            Target::Completions { header: Some(h) }
                if self.method == Method::POST && self.authorized() && valid_id(h) =>
            {
                let Some(parsed) = messages else { return };
                let message = error_message(&body);
                // A turn's messages: parsed, a system or developer message only first, one other.
                let takes = parsed.as_ref().is_ok_and(|m| chatmem::check_request(m).is_ok());
                // The proxy also reads what clients send back of an answer (`refusal`,
                // `annotations`, ...), which `parse_messages` refuses: then it may go on too.
                if takes || status == StatusCode::SERVICE_UNAVAILABLE {
                    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
                    assert!(message.contains("upstream model cannot be used"), "{message}");
                } else {
                    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
                    assert!(
                        message.starts_with("invalid chat completion request: field `messages"),
                        "{message}"
                    );
                }
            }
            _ => {}
        }
    }
}

/// One token, for a tenant whose name is the longest allowed: its keys leave the least room
/// for an id.
fn longest_tenant() -> Auth {
    let name = "a".repeat(MAX_TENANT_BYTES);
    Auth::from_toml(&format!("[[token]]\ntoken = \"{TOKEN}\"\ntenant = \"{name}\"\n")).expect("a valid auth file")
}

/// An id the server takes for every tenant: a valid conversation id within its default limit,
/// which leaves room for the longest tenant prefix (so the server, with or without auth, must
/// accept it).
fn valid_id(id: &str) -> bool {
    id.len() <= DEFAULT_MAX_ID_BYTES && ConversationId::new(id).is_ok()
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// Sends `request`; asserts what every answer has (a request id; no 5xx; the one error shape)
/// and returns the status and the JSON body (`null` for an empty one).
async fn send(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let head = request.method() == Method::HEAD;
    let preflight = request.method() == Method::OPTIONS;
    let response = router.clone().oneshot(request).await.expect("the router is infallible");
    let status = response.status();
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("every answer has an x-request-id");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    // The one 5xx: the upstream this server was given cannot be used.
    let no_upstream = status == StatusCode::SERVICE_UNAVAILABLE
        && serde_json::from_slice::<Value>(&bytes).is_ok_and(|b| b["error"]["code"] == "no_upstream");
    assert!(
        !status.is_server_error() || no_upstream,
        "{status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    // HEAD answers GET's head without its body; a CORS preflight has none either.
    if head || (status == StatusCode::OK && bytes.is_empty() && preflight) {
        return (status, Value::Null);
    }
    if status == StatusCode::NO_CONTENT {
        assert!(bytes.is_empty());
        return (status, Value::Null);
    }
    let body: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {:?}", String::from_utf8_lossy(&bytes)));
    if !status.is_success() {
        let error = &body["error"];
        assert!(error["code"].is_string(), "{status}: not the error shape: {body}");
        assert_eq!(error["request_id"].as_str(), Some(request_id.as_str()), "{body}");
        let message = error["message"].as_str().expect("a message");
        assert!(
            !message
                .chars()
                .any(|c| c.is_control() || chatmem::printable::is_invisible_or_separator(c)),
            "unprintable: {message:?}"
        );
    }
    (status, body)
}
