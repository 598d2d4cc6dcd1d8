//! [`app`]: the router, its shared state, and what every request goes through (a request id,
//! a log span and line, the request metrics, the edge rules of `edges.rs`, the body limit).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, patch, post};
use chatmem::{ChatMemory, Store};
use http_body::Body as _;
use tracing::Instrument;

use crate::completions;
use crate::config::ServerConfig;
use crate::edges::{self, Edges};
use crate::error::ErrorCode;
use crate::metered_store::MeteredStore;
use crate::metrics::Metrics;
use crate::route;
use crate::routes;
use crate::state::AppState;
use crate::state::RequestId;
use crate::users;

/// The server's router over `memory`, ready for [`serve`](crate::serve()) or for tests to
/// drive with `tower::ServiceExt::oneshot`. Its store calls are counted in `config.metrics`
/// and each is bounded by `config.limits.store_timeout`; a summarizer's late summaries finish
/// on tokio and their outcomes are counted too. Call it within a tokio runtime.
pub fn app(memory: ChatMemory<Arc<dyn Store>>, config: ServerConfig) -> Router {
    let body_limit = config.limits.max_body_bytes;
    let limits = config.limits;
    let metered: Arc<dyn Store> = Arc::new(MeteredStore::new(
        Arc::clone(memory.store()),
        config.metrics.clone(),
        config.limits.store_timeout,
    ));
    let metrics = config.metrics.clone();
    // Vectors are written through the metered store too, and every embedding call counted.
    let embeddings = memory.embeddings().cloned().map(|e| {
        let metrics = metrics.clone();
        e.observe(move |event| metrics.embedding(event))
    });
    // The extractor's background commits go through the metered store too.
    let extractor = memory.fact_extractor().cloned();
    if let Some(extractor) = &extractor {
        metrics.follow_extractions(extractor.clone());
    }
    let memory = memory
        .with_store(metered)
        .with_embeddings(embeddings)
        .with_fact_extractor(extractor);
    let memory = with_summaries_on_tokio(memory, &metrics);
    let edges = Arc::new(Edges::new(&config));
    let cors = edges::cors(&config);
    let state = AppState {
        memory: Arc::new(memory),
        upstream: crate::upstream::pool(&config),
        config: Arc::new(config),
        sessions: Arc::default(),
    };
    let router = Router::new()
        .route(route::HEALTHZ, get(routes::healthz))
        .route(route::METRICS, get(routes::metrics))
        .route(route::OPENAPI, get(crate::openapi::serve))
        .route(route::MODELS, get(completions::models))
        .route(route::CONVERSATIONS, get(routes::list))
        .route(route::COMPLETIONS, post(completions::chat_completions))
        .route(route::MESSAGES, get(routes::get_messages).post(routes::post_messages))
        .route(route::HISTORY, get(routes::get_history))
        .route(route::PROMPT, post(routes::post_prompt))
        .route(route::RECALL, get(crate::recall::get_recall))
        .route(route::CONVERSATION, delete(routes::delete_conversation))
        .route(
            route::FACTS,
            get(users::list_facts).post(users::add_fact).delete(users::forget_user),
        )
        .route(route::FACT, patch(users::patch_fact).delete(users::delete_fact))
        .route(route::FACT_HISTORY, get(users::fact_history))
        .merge(crate::ui::routes())
        // On every route's handlers, not on the fallbacks: set before the method-not-allowed
        // fallback, which replaces the routes' default one, so a wrong method is answered
        // 405 without the content-type rule.
        .route_layer(middleware::from_fn(edges::require_json))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            limits,
            crate::request_limits::refuse_oversized,
        ));
    // Inside the edge rules: only the origins they let through get CORS answers.
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router
        .layer(middleware::from_fn(close_if_unread))
        .layer(middleware::from_fn_with_state(edges, edges::guard))
        .layer(middleware::from_fn_with_state(metrics, observe))
        .layer(middleware::from_fn(request_id))
        .with_state(state)
}

/// `memory` with its summarizer's late calls spawned on tokio and their outcomes counted.
fn with_summaries_on_tokio(memory: ChatMemory<Arc<dyn Store>>, metrics: &Metrics) -> ChatMemory<Arc<dyn Store>> {
    let metrics = metrics.clone();
    let changed = memory.clone().map_summarizer(|s| {
        s.spawn_with(|call| {
            tokio::spawn(call);
        })
        .observe(move |outcome| metrics.summary(outcome))
    });
    // Spawner and observer leave the summarizer's bounds as they were, so this cannot fail.
    changed.unwrap_or(memory)
}

/// Gives the request an id, runs it inside a span naming it (its id, method, route template
/// and, once known, tenant: never the raw path, which holds conversation ids), logs one `info`
/// line when it is answered (status, latency in ms to the response's head), and returns the id
/// as `x-request-id`.
async fn request_id(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = format!("{:016x}", fastrand::u64(..));
    request.extensions_mut().insert(RequestId(id.clone()));
    let route = route_label(request.extensions().get::<MatchedPath>());
    let method = method_label(request.method());
    // `tenant` is recorded by `routes::tenant` when the server has auth.
    let span = tracing::info_span!("request", request_id = %id, method, route, tenant = tracing::field::Empty);
    let mut response = next.run(request).instrument(span.clone()).await;
    // Microseconds, in milliseconds: three decimals are enough.
    let latency_ms = started.elapsed().as_micros() as f64 / 1000.0;
    tracing::info!(parent: &span, status = response.status().as_u16(), latency_ms, "answered");
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// Answers `Connection: close` when the request's body was not read to its end: a request
/// refused before its body (a bad id, a wrong route, over a limit) leaves the rest of the
/// body on the connection, so hyper closes it after the answer, and the header tells the
/// client not to send its next request on it.
async fn close_if_unread(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    let tracked = Body::new(Tracked {
        inner: body,
        read: Arc::clone(&read),
    });
    let mut response = next.run(Request::from_parts(parts, tracked)).await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that says when it has been read to its end.
struct Tracked {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Counts the request by route template, method and status, and times it.
async fn observe(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_label(request.extensions().get::<MatchedPath>());
    let method = method_label(request.method());
    let response = next.run(request).await;
    metrics.request(route, method, response.status(), started.elapsed());
    if method == "POST"
        && (route == route::MESSAGES || route == route::COMPLETIONS)
        && let Some(code) = response.extensions().get::<ErrorCode>()
    {
        metrics.write_refused(route, code.as_str());
    }
    response
}

/// The route template of a request: the router's matched path (one of [`route::ALL`], as a
/// `'static` label), or `unmatched`. Never the raw path (ids are not labels).
fn route_label(matched: Option<&MatchedPath>) -> &'static str {
    matched
        .and_then(|m| route::ALL.into_iter().find(|t| *t == m.as_str()))
        .unwrap_or(route::UNMATCHED)
}

/// The method as a label; a method no route serves is `other`, so clients cannot add series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::any;
    use tower::ServiceExt;

    use super::*;

    /// Each template is its own label, whatever id the path holds; a path no route serves is
    /// `unmatched`.
    #[tokio::test]
    async fn requests_are_labelled_by_the_matched_template_not_the_path() {
        let mut router = Router::new();
        for template in route::ALL {
            router = router.route(
                template,
                any(|m: Option<MatchedPath>| async move { route_label(m.as_ref()) }),
            );
        }
        let router = router.fallback(|m: Option<MatchedPath>| async move { route_label(m.as_ref()) });
        for (path, label) in [
            ("/v1/conversations/u-42/messages", route::MESSAGES),
            ("/v1/conversations/a%2Fb%2Fmessages/history", route::HISTORY),
            ("/v1/conversations/user%2Fhistory", route::CONVERSATION),
            ("/v1/conversations/a/b/history", route::UNMATCHED),
            ("/v1/secret-id", route::UNMATCHED),
            ("/v1/models", route::MODELS),
        ] {
            let request = Request::builder().uri(path).body(Body::empty()).expect("a request");
            let response = router.clone().oneshot(request).await.expect("infallible");
            let body = axum::body::to_bytes(response.into_body(), 1024).await.expect("a body");
            assert_eq!(body, label.as_bytes(), "{path}");
        }
    }
}
