//! The server's router driven in process: each request goes through
//! `tower::ServiceExt::oneshot`, with no socket, so a test pays for the handlers and the
//! middleware it checks and not for TCP. Tests of the listener itself (slow clients, body
//! timeouts, connection limits, a browser) use [`crate::loopback`] or `chatmem_server::serve`.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use futures_util::StreamExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

/// A router (e.g. `chatmem_server::app(memory, config)`) and the requests sent to it.
#[derive(Clone, Debug)]
pub struct App {
    router: Router,
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
}

impl App {
    /// The harness for `router`.
    pub fn new(router: Router) -> Self {
        Self { router }
    }

    /// Sends `request` and reads the whole answer.
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
    async fn respond(&self, request: Request<Body>) -> (axum::http::response::Parts, Body) {
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        response.into_parts()
    }

    /// `GET uri`, with the `authorization` header `bearer` when given.
    pub async fn get(&self, uri: &str, bearer: Option<&str>) -> Answer {
        self.send(request(Method::GET, uri, bearer, Body::empty())).await
    }

    /// `POST uri` with the JSON `body`, with the `authorization` header `bearer` when given.
    pub async fn post_json(&self, uri: &str, bearer: Option<&str>, body: &Value) -> Answer {
        let mut r = request(Method::POST, uri, bearer, Body::from(body.to_string()));
        r.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        self.send(r).await
    }
}

/// A request for `method` and `uri` with `body`, and `authorization: bearer` when given.
pub fn request(method: Method, uri: &str, bearer: Option<&str>, body: Body) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(bearer) = bearer {
        builder = builder.header("authorization", bearer);
    }
    builder.body(body).expect("a valid method, uri and header")
}
