//! `GET /openapi.json`: the API described by utoipa from the code. Request and response
//! bodies are the types the handlers (de)serialize, derived; the error body is the one
//! [`ApiError`](crate::ApiError) writes. The paths are declared here, one per operation,
//! because one handler serves several of them (`…/messages` and `…/history` share the
//! conversation route, since ids may hold `/`); a test checks them against the router.

use axum::Json;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::error::ErrorBody;
use crate::policy::PolicySchema;
use crate::routes::{ConversationPage, Health, HistoryBody, PostMessages, WindowBody};

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
    components(schemas(ErrorBody, MessageSchema, WindowBody, HistoryBody, ConversationPage, Health, PostMessages, PolicySchema)),
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

/// A message in OpenAI's Chat Completions shape plus chatmem's own fields, as
/// `chatmem::Message`'s hand-written JSON codec reads and writes it (a test checks the field
/// names against it).
#[derive(ToSchema)]
#[schema(as = Message)]
#[allow(dead_code)] // a schema only: the real type is chatmem::Message
pub(crate) struct MessageSchema {
    role: RoleSchema,
    /// Text, or a list of content parts (`{"type": "text", "text"}`, `{"type": "image_url",
    /// "image_url": {"url"}}`, ...); absent or null on an assistant message with tool calls.
    #[schema(value_type = Object)]
    content: Option<serde_json::Value>,
    /// The participant's name.
    name: Option<String>,
    /// An assistant's tool calls: `{"id", "type": "function", "function": {"name", "arguments"}}`.
    #[schema(value_type = Vec<Object>)]
    tool_calls: Option<Vec<serde_json::Value>>,
    /// A tool result's call id.
    tool_call_id: Option<String>,
    /// Reasoning text (DeepSeek's); kept in memory, never sent to a model.
    reasoning_content: Option<String>,
    /// A tool result that reports a failure.
    is_error: Option<bool>,
    /// Application data kept with the message, never sent to a model.
    #[schema(value_type = Object)]
    metadata: Option<serde_json::Value>,
}

/// Who wrote a message.
#[derive(ToSchema)]
#[schema(as = Role)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: the real type is chatmem::Role
enum RoleSchema {
    System,
    User,
    Assistant,
    Tool,
}

#[utoipa::path(get, path = "/healthz", security(()),
    responses((status = 200, description = "the store answers", body = Health),
              (status = 503, description = "the store does not answer", body = ErrorBody)))]
#[allow(dead_code)]
fn healthz() {}

#[utoipa::path(get, path = "/metrics",
    responses((status = 200, description = "OpenMetrics text (Prometheus scrapes it): requests by route template and status, latency histograms, commits, version conflicts, store and upstream errors", content_type = "application/openmetrics-text", body = String),
              (status = 401, body = ErrorBody)))]
#[allow(dead_code)]
fn metrics() {}

#[utoipa::path(get, path = "/openapi.json", security(()),
    responses((status = 200, description = "this document", content_type = "application/json", body = Object)))]
#[allow(dead_code)]
fn openapi_json() {}

#[utoipa::path(get, path = "/v1/conversations",
    params(("cursor" = Option<String>, Query, description = "the last id of the previous page"),
           ("limit" = Option<usize>, Query, description = "1 to 1000 (default 100)")),
    responses((status = 200, body = ConversationPage),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
#[allow(dead_code)]
fn list_conversations() {}

#[utoipa::path(get, path = "/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "the conversation id (may hold `/`)"), PolicySchema),
    responses((status = 200, description = "the window the model sees", body = WindowBody),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
#[allow(dead_code)]
fn get_messages() {}

#[utoipa::path(post, path = "/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "the conversation id (may hold `/`)")),
    request_body = PostMessages,
    responses((status = 200, description = "committed atomically; the window after the commit", body = WindowBody),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 403, description = "a Host or Origin the server does not answer to", body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
              (status = 415, description = "the body is not declared JSON", body = ErrorBody),
              (status = 503, body = ErrorBody)))]
#[allow(dead_code)]
fn post_messages() {}

#[utoipa::path(get, path = "/v1/conversations/{id}/history",
    params(("id" = String, Path, description = "the conversation id (may hold `/`)"),
           ("cursor" = Option<String>, Query, description = "the previous page's `next_cursor`"),
           ("limit" = Option<usize>, Query, description = "1 to 1000 messages (default 100); a page also ends once it holds about the body limit's bytes of text")),
    responses((status = 200, description = "one page of everything stored, oldest first", body = HistoryBody),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
#[allow(dead_code)]
fn get_history() {}

#[utoipa::path(delete, path = "/v1/conversations/{id}",
    params(("id" = String, Path, description = "the conversation id (may hold `/`)")),
    responses((status = 204, description = "deleted"),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[allow(dead_code)]
fn delete_conversation() {}

#[utoipa::path(post, path = "/v1/chat/completions",
    params(("X-Chatmem-Conversation" = String, Header, description = "the conversation whose memory the call uses")),
    request_body(content = Object, description = "OpenAI's chat-completion request; `messages` are the turn's new messages"),
    responses((status = 200, description = "OpenAI's chat completion, or with `\"stream\": true` its server-sent events", body = Object),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 403, description = "a Host or Origin the server does not answer to", body = ErrorBody),
              (status = 413, body = ErrorBody),
              (status = 415, description = "the body is not declared JSON", body = ErrorBody),
              (status = 502, description = "the upstream model failed", body = ErrorBody),
              (status = 503, description = "no upstream is configured", body = ErrorBody)))]
#[allow(dead_code)]
fn chat_completions() {}

#[utoipa::path(get, path = "/v1/models",
    responses((status = 200, description = "the upstream's `GET /models` answer, as it came", body = Object),
              (status = 401, body = ErrorBody),
              (status = 502, description = "the upstream failed; the message names its status", body = ErrorBody),
              (status = 503, description = "no upstream is configured", body = ErrorBody)))]
#[allow(dead_code)]
fn models() {}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::app::route;

    /// The router is built from `app::route`'s templates; each one is documented, and
    /// nothing else is.
    #[test]
    fn every_route_template_is_documented() {
        let doc = ApiDoc::openapi();
        let documented: BTreeSet<&str> = doc.paths.paths.keys().map(String::as_str).collect();
        let served = BTreeSet::from([
            route::HEALTHZ,
            route::METRICS,
            route::OPENAPI,
            route::MODELS,
            route::COMPLETIONS,
            route::CONVERSATIONS,
            route::CONVERSATION,
            route::MESSAGES,
            route::HISTORY,
        ]);
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
