//! `GET /openapi.json`: the API described by utoipa from the code. Request and response
//! bodies are the types the handlers (de)serialize, derived; the error body is the one
//! [`ApiError`](crate::ApiError) writes. The chat completion's request and answer are
//! OpenAI's, which the server passes through rather than (de)serializes: their schemas are
//! declared in `schemas.rs`. The paths are declared here, one per operation (the handlers of the
//! chat completion are not this file's); a test checks them against the router, and
//! `tests/observability.rs` runs `openapi-spec-validator` on the document.

use axum::Json;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::policy::PolicySchema;
use crate::routes::{ConversationPage, Health, HistoryBody, PostMessages, WindowBody};
use crate::schemas::{
    ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatMessage, MessageSchema, ModelList,
};

/// The document, built once per request (it is small and requests for it are rare).
pub(crate) async fn serve() -> Response {
    Json(ApiDoc::openapi()).into_response()
}

/// The OpenAPI document of the server.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "chatmem",
        description = "Conversation memory over HTTP: windows per conversation over any chatmem store, and an OpenAI-compatible chat-completions endpoint that adds memory."
    ),
    paths(
        healthz,
        metrics,
        openapi_json,
        list_conversations,
        get_messages,
        post_messages,
        get_history,
        delete_conversation,
        chat_completions,
        models
    ),
    components(schemas(
        ErrorBody,
        MessageSchema,
        WindowBody,
        HistoryBody,
        ConversationPage,
        Health,
        PostMessages,
        PolicySchema,
        ChatCompletionRequest,
        ChatMessage,
        ChatCompletion,
        ChatCompletionChunk,
        ModelList
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub(crate) struct ApiDoc;

/// The bearer token of `--auth` (each token speaks for one tenant); without `--auth` none.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

// The operations. Every response says what it means; the error bodies are `ErrorBody`.

#[utoipa::path(get, path = "/healthz", security(()),
    responses((status = 200, description = "the store answers", body = Health),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn healthz() {}

#[utoipa::path(get, path = "/metrics",
    responses((status = 200, description = "requests by route template, method and status, latency histograms, commits, version conflicts, store and upstream errors, summaries; as OpenMetrics 1.0.0 when the `Accept` header prefers `application/openmetrics-text` (as Prometheus's does), otherwise (no `Accept`, `*/*`, `text/plain`) as Prometheus's text format 0.0.4 (`Vary: Accept`)",
               content((String = "text/plain"), (String = "application/openmetrics-text"))),
              (status = 401, description = "with `--auth`, no valid bearer token (a scraper without one uses `--metrics-listen`)", body = ErrorBody)))]
#[allow(dead_code)]
fn metrics() {}

#[utoipa::path(get, path = "/openapi.json", security(()),
    responses((status = 200, description = "this document", content_type = "application/json", body = Object)))]
#[allow(dead_code)]
fn openapi_json() {}

#[utoipa::path(get, path = "/v1/conversations",
    params(("cursor" = Option<String>, Query, description = "the last id of the previous page"),
           ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "1 to 1000 (default 100)")),
    responses((status = 200, description = "a page of the tenant's conversation ids", body = ConversationPage),
              (status = 400, description = "an invalid `limit` or `cursor`, or an unknown parameter", body = ErrorBody),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 413, description = "a `cursor` over the id limit", body = ErrorBody),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn list_conversations() {}

#[utoipa::path(get, path = "/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`"), PolicySchema),
    responses((status = 200, description = "the window the model sees", body = WindowBody),
              (status = 400, description = "an invalid id or policy, named", body = ErrorBody),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 404, description = "no such conversation (for this tenant)", body = ErrorBody),
              (status = 413, description = "an id over the id limit", body = ErrorBody),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn get_messages() {}

#[utoipa::path(post, path = "/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`")),
    request_body = PostMessages,
    responses((status = 200, description = "committed atomically; the window after the commit", body = WindowBody),
              (status = 400, description = "an invalid id, body or policy; the message names the field", body = ErrorBody),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 403, description = "a Host or Origin the server does not answer to, or a read-only token (`read_only_token`)", body = ErrorBody),
              (status = 408, description = "the body did not arrive within the body timeout", body = ErrorBody),
              (status = 409, description = "too many concurrent writers to the conversation; retry", body = ErrorBody),
              (status = 413, description = "over a limit (body, messages per request, text per message, id)", body = ErrorBody),
              (status = 415, description = "the body is not declared JSON", body = ErrorBody),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn post_messages() {}

#[utoipa::path(get, path = "/v1/conversations/{id}/history",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`"),
           ("cursor" = Option<String>, Query, description = "the previous page's `next_cursor`"),
           ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "1 to 1000 messages (default 100); a page also ends once it holds about the body limit's bytes of text")),
    responses((status = 200, description = "one page of everything stored, oldest first", body = HistoryBody),
              (status = 400, description = "an invalid id, `limit` or `cursor`", body = ErrorBody),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 404, description = "no such conversation (for this tenant)", body = ErrorBody),
              (status = 413, description = "an id over the id limit", body = ErrorBody),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn get_history() {}

#[utoipa::path(delete, path = "/v1/conversations/{id}",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`")),
    responses((status = 204, description = "deleted: window, history and summary"),
              (status = 400, description = "an invalid id", body = ErrorBody),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 403, description = "a read-only token (`read_only_token`)", body = ErrorBody),
              (status = 404, description = "no such conversation (for this tenant)", body = ErrorBody),
              (status = 413, description = "an id over the id limit", body = ErrorBody),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn delete_conversation() {}

#[utoipa::path(post, path = "/v1/chat/completions",
    params(("X-Chatmem-Conversation" = String, Header, description = "the conversation whose memory the call uses (UTF-8; any id the REST routes take)")),
    request_body(content = ChatCompletionRequest, description = "OpenAI's chat-completion request"),
    responses((status = 200, description = "the upstream's chat completion, after the turn was committed; with `\"stream\": true`, server-sent events (`data: ` a `ChatCompletionChunk`, then `data: [DONE]`), the turn committed before `[DONE]`",
               content((ChatCompletion = "application/json"), (String = "text/event-stream"))),
              (status = 400, description = "an invalid request (the message names the field, e.g. `n` or `messages[0].role`), no conversation header, or the upstream's own 400 passed through", body = ErrorBody),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 403, description = "a Host or Origin the server does not answer to, or a read-only token (`read_only_token`)", body = ErrorBody),
              (status = 404, description = "the upstream's 404 (an unknown model), passed through", body = ErrorBody),
              (status = 409, description = "the upstream's 409, or too many concurrent writers to the conversation", body = ErrorBody),
              (status = 413, description = "over a limit (body, messages per request, text per message, id), or the upstream's 413", body = ErrorBody),
              (status = 415, description = "the body is not declared JSON", body = ErrorBody),
              (status = 422, description = "the upstream's 422, passed through", body = ErrorBody),
              (status = 429, description = "the upstream's rate limit, passed through with its `Retry-After`", body = ErrorBody,
               headers(("Retry-After" = String, description = "seconds (or a date) to wait, as the upstream said"))),
              (status = 502, description = "the upstream failed (a 5xx, its 401 or 403 about chatmem's key, or no connection); the message names its status, never its body", body = ErrorBody),
              (status = 503, description = "no upstream is configured, or the store does not answer", body = ErrorBody),
              (status = 504, description = "the upstream did not answer within the upstream timeout", body = ErrorBody)))]
#[allow(dead_code)]
fn chat_completions() {}

#[utoipa::path(get, path = "/v1/models",
    responses((status = 200, description = "the upstream's `GET /models` answer, as it came", body = ModelList),
              (status = 401, description = "with `--auth`, no valid bearer token", body = ErrorBody),
              (status = 502, description = "the upstream failed; the message names its status", body = ErrorBody),
              (status = 503, description = "no upstream is configured", body = ErrorBody),
              (status = 504, description = "the upstream did not answer within the upstream timeout", body = ErrorBody)))]
#[allow(dead_code)]
fn models() {}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::route;

    /// The router is built from `route`'s templates; each one but the inspector's pages
    /// is documented, and nothing else is.
    #[test]
    fn every_route_template_is_documented() {
        let doc = ApiDoc::openapi();
        let documented: BTreeSet<&str> = doc.paths.paths.keys().map(String::as_str).collect();
        let served: BTreeSet<&str> = route::ALL.into_iter().filter(|t| !route::PAGES.contains(t)).collect();
        assert_eq!(documented, served);
    }

    /// The documented policy has the fields of the core's `PolicySpec`, by their serde names.
    #[test]
    fn the_policy_schema_is_the_core_spec() {
        let full = chatmem::PolicySpec {
            max_messages: Some(1),
            max_tokens: Some(1),
            evict_to: Some(1),
            tokenizer: Some(chatmem::Tokenizer::Cl100k),
            boundary: Some(chatmem::TurnBoundary::User),
        };
        let spec = serde_json::to_value(full).expect("a spec serializes");
        let spec: BTreeSet<&str> = spec
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let doc = serde_json::to_value(ApiDoc::openapi()).expect("the document serializes");
        let schema = doc["components"]["schemas"]["Policy"]["properties"]
            .as_object()
            .expect("the Policy schema");
        let documented: BTreeSet<&str> = schema.keys().map(String::as_str).collect();
        assert_eq!(documented, spec);
        let query = doc["paths"]["/v1/conversations/{id}/messages"]["get"]["parameters"]
            .as_array()
            .expect("parameters");
        let params: BTreeSet<&str> = query
            .iter()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(params, spec);
    }
}
