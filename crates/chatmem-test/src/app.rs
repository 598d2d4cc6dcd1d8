//! The server's router driven in process: each request goes through
//! `tower::ServiceExt::oneshot`, with no socket, so a test pays for the handlers and the
//! middleware it checks and not for TCP. Tests of the listener itself (slow clients, body
//! timeouts, connection limits, a browser) use [`crate::loopback`] or `chatmem_server::serve`.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use futures_util::StreamExt as _;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::Value;
use tower::ServiceExt as _;

/// A router (e.g. `chatmem_server::app(memory, config)`) and the requests sent to it, each
/// with the `authorization` header this handle carries (none for [`App::new`]).
#[derive(Clone, Debug)]
pub struct App {
    router: Router,
    authorization: Option<HeaderValue>,
}

/// An answer read to its end: status, headers and body.
#[derive(Debug)]
pub struct Answer {
    /// The status line's code.
    pub status: StatusCode,
    /// The headers, as the router wrote them.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON; panics (a test failure) when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("a JSON body ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value as text, if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The one error shape's `code`, after checking the rest of the shape: a non-empty
    /// `message`, the 16-character `request_id` that the `x-request-id` header repeats.
    pub fn error_code(&self) -> String {
        let body = self.json();
        let error = &body["error"];
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
        let id = error["request_id"].as_str().unwrap_or_default();
        assert_eq!(id.len(), 16, "{body}");
        assert_eq!(self.header("x-request-id"), Some(id), "{body}");
        error["code"]
            .as_str()
            .unwrap_or_else(|| panic!("an error code: {body}"))
            .to_owned()
    }
}

impl App {
    /// The harness for `router`, sending no `authorization` header.
    pub fn new(router: Router) -> Self {
        Self {
            router,
            authorization: None,
        }
    }

    /// This app, as the bearer of `token`: every request carries `authorization: Bearer token`.
    pub fn as_bearer(&self, token: &str) -> Self {
        self.with_authorization(&format!("Bearer {token}"))
    }

    /// This app with `value`, as it is (a malformed one included), as every request's
    /// `authorization` header.
    pub fn with_authorization(&self, value: &str) -> Self {
        Self {
            router: self.router.clone(),
            authorization: Some(HeaderValue::from_str(value).expect("a header value")),
        }
    }

    /// Sends `request` (with this handle's `authorization` unless it has its own) and reads
    /// the whole answer.
    pub async fn send(&self, request: Request<Body>) -> Answer {
        let (parts, body) = self.respond(request).await;
        let body = axum::body::to_bytes(body, usize::MAX).await.expect("a body");
        Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// Sends `request` and returns the status, the headers and the body's chunks as they
    /// come, for a streamed (SSE) answer read while it is written.
    pub async fn stream(
        &self,
        request: Request<Body>,
    ) -> (StatusCode, HeaderMap, impl futures_util::Stream<Item = Bytes> + Unpin) {
        let (parts, body) = self.respond(request).await;
        let chunks = body.into_data_stream().map(|chunk| chunk.expect("a body chunk"));
        (parts.status, parts.headers, chunks)
    }

    /// The router's answer to `request`, its head and its unread body.
    async fn respond(&self, mut request: Request<Body>) -> (axum::http::response::Parts, Body) {
        if let Some(value) = &self.authorization {
            request.headers_mut().entry(AUTHORIZATION).or_insert(value.clone());
        }
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        response.into_parts()
    }

    /// `GET uri`.
    pub async fn get(&self, uri: &str) -> Answer {
        self.send(request(Method::GET, uri, Body::empty())).await
    }

    /// `DELETE uri`.
    pub async fn delete(&self, uri: &str) -> Answer {
        self.send(request(Method::DELETE, uri, Body::empty())).await
    }

    /// `POST uri` with the JSON `body`.
    pub async fn post_json(&self, uri: &str, body: &Value) -> Answer {
        self.send_json(Method::POST, uri, body).await
    }

    /// `method uri` with the JSON `body`.
    pub async fn send_json(&self, method: Method, uri: &str, body: &Value) -> Answer {
        self.send(json_request(method, uri, body)).await
    }
}

/// What a client percent-encodes in a URI it is given: controls, space and every byte of a
/// non-ASCII character (`%` stays, so an encoded URI goes through as it is).
const CLIENT_ENCODES: &AsciiSet = &CONTROLS.add(b' ');

/// A request for `method` and `uri` with `body` and no headers. `uri` is sent as an HTTP client
/// sends it: non-ASCII characters and spaces percent-encoded as UTF-8, and nothing else
/// changed (`..` segments included, which clients normalise away and a raw request can send).
pub fn request(method: Method, uri: &str, body: Body) -> Request<Body> {
    let uri = utf8_percent_encode(uri, CLIENT_ENCODES).to_string();
    Request::builder()
        .method(method)
        .uri(&uri)
        .body(body)
        .unwrap_or_else(|e| panic!("a valid method and uri ({uri}): {e}"))
}

/// A request for `method` and `uri` with the JSON `body` and its `content-type`.
pub fn json_request(method: Method, uri: &str, body: &Value) -> Request<Body> {
    let mut r = request(method, uri, Body::from(body.to_string()));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
