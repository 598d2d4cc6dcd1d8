//! [`app`]: the router, its shared state, and what every request goes through (a request id,
//! the body limit, a log span).

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use chatmem::{ChatMemory, Store};
use tracing::Instrument;

use crate::completions;
use crate::config::ServerConfig;
use crate::routes;

/// What the handlers share: the memory (store and policy) and the configuration.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) memory: Arc<ChatMemory<Arc<dyn Store>>>,
    pub(crate) config: Arc<ServerConfig>,
}

/// The id of one request, in its extensions, its log span and its response.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) String);

/// The server's router over `memory`, ready for `axum::serve` or for tests to drive with
/// `tower::ServiceExt::oneshot`.
pub fn app(memory: ChatMemory<Arc<dyn Store>>, config: ServerConfig) -> Router {
    let body_limit = config.limits.max_body_bytes;
    let state = AppState {
        memory: Arc::new(memory),
        config: Arc::new(config),
    };
    Router::new()
        .route("/healthz", get(routes::healthz))
        .route("/v1/conversations", get(routes::list))
        .route("/v1/chat/completions", post(completions::chat_completions))
        .route(
            "/v1/conversations/{*rest}",
            get(routes::get_conversation)
                .post(routes::post_conversation)
                .delete(routes::delete_conversation),
        )
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn(request_id))
        .with_state(state)
}

/// Gives the request an id, runs it inside a span naming it, and returns the id as
/// `x-request-id`.
async fn request_id(mut request: Request, next: Next) -> Response {
    let id = format!("{:016x}", fastrand::u64(..));
    request.extensions_mut().insert(RequestId(id.clone()));
    let span =
        tracing::info_span!("request", request_id = %id, method = %request.method(), path = %request.uri().path());
    let mut response = next.run(request).instrument(span.clone()).await;
    span.in_scope(|| tracing::debug!(status = response.status().as_u16(), "answered"));
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}
