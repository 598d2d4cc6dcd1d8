//! `GET /openapi.json`: the API described by utoipa from the code. Request and response
//! bodies are the types the handlers (de)serialize, derived; the error body is the one
//! [`ApiError`](crate::ApiError) writes. The chat completion's request and answer are
//! OpenAI's, which the server passes through rather than (de)serializes: their schemas are
//! declared in `schemas.rs`. The paths are declared on the handlers themselves
//! (`#[utoipa::path]`); a test checks them against the router, and
//! `tests/server/observability.rs` runs `openapi-spec-validator` on the document.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

// The handlers' path descriptions, listed unqualified (a qualified one would be tagged with
// its module's path).
use crate::completions::{__path_chat_completions, __path_models};
use crate::config::ServerConfig;
use crate::error::ErrorBody;
use crate::policy::PolicySchema;
use crate::recall::{__path_get_recall, HitBody, OutcomeSchema, RecallBody};
use crate::routes::{
    __path_delete_conversation, __path_get_history, __path_get_messages, __path_healthz, __path_list, __path_metrics,
    __path_post_messages, __path_post_prompt,
};
use crate::routes::{
    ClearedBody, ConversationPage, Health, HistoryBody, PostMessages, PromptBody, PromptRequest, RecalledBody,
    WindowBody,
};
use crate::schemas::{
    ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatMessage, MessageSchema, ModelList,
};
use crate::state::AppState;
use crate::users::{
    __path_add_fact, __path_delete_fact, __path_fact_history, __path_forget_user, __path_list_facts, __path_patch_fact,
};
use crate::users::{
    AddFact, FactBody, FactChangeSchema, FactsBody, HistoryBody as FactHistoryBody, PatchFact, SourceBody,
};

/// Declares an error answer that several routes share: a type a route's `responses(...)` lists
/// by name, so the status and its description are written once. Each is the one
/// [`ErrorBody`]; none is ever built (a handler answers with [`ApiError`](crate::ApiError)).
macro_rules! shared_error_answers {
    ($($(#[$doc:meta])* $name:ident = $status:literal, $description:literal;)+) => {$(
        $(#[$doc])*
        #[derive(utoipa::IntoResponses)]
        #[response(status = $status, description = $description)]
        #[expect(dead_code, reason = "it only describes an answer in the OpenAPI document")]
        pub(crate) struct $name(ErrorBody);
    )+};
}

shared_error_answers! {
    /// No valid bearer token, on a server with `--auth`.
    Unauthorized = 401, "with `--auth`, no valid bearer token";
    /// A write the server refuses to take from this caller.
    ForbiddenWrite = 403, "a Host or Origin the server does not answer to, or a read-only token (`read_only_token`)";
    /// The conversation of the path does not exist.
    NoConversation = 404, "no such conversation (for this tenant)";
    /// The id of the path is over the id limit.
    IdTooLong = 413, "an id over the id limit";
    /// A `POST` body that is not declared JSON.
    NotJson = 415, "the body is not declared JSON";
    /// The store is down or slow.
    StoreDown = 503, "the store does not answer";
    /// The upstream model is slow.
    UpstreamTimeout = 504, "the upstream did not answer within the upstream timeout";
}

/// `GET /openapi.json`: this API as OpenAPI 3.1.
#[utoipa::path(get, operation_id = "openapi_json", path = "/openapi.json", security(()),
    responses((status = 200, description = "this document", content_type = "application/json", body = Object)))]
pub(crate) async fn serve(State(state): State<AppState>) -> Response {
    Json(document(&state.config)).into_response()
}

/// The document as a server of `config` answers: [`derived`], with what the derives cannot say
/// laid over it (`openapi_schemas.rs`: ids, messages by role, policies, within this server's
/// limits).
pub(crate) fn document(config: &ServerConfig) -> serde_json::Value {
    // The document is plain data: serializing it cannot fail.
    let mut doc = serde_json::to_value(derived(config.auth.is_some())).unwrap_or_default();
    crate::openapi_schemas::declare(&mut doc, config);
    doc
}

/// The derived document: a bearer token required only when the server has `--auth`.
fn derived(auth: bool) -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    if !auth {
        doc.security = None;
        if let Some(components) = doc.components.as_mut() {
            components.security_schemes.clear();
        }
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                op.security = None;
                // Without auth no request is refused for its token.
                op.responses.responses.remove("401");
            }
        }
    }
    doc
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
        serve,
        list,
        get_messages,
        post_messages,
        post_prompt,
        get_recall,
        get_history,
        delete_conversation,
        list_facts,
        add_fact,
        patch_fact,
        delete_fact,
        fact_history,
        forget_user,
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
        PromptRequest,
        PromptBody,
        ClearedBody,
        RecalledBody,
        RecallBody,
        HitBody,
        OutcomeSchema,
        PolicySchema,
        FactsBody,
        FactBody,
        SourceBody,
        FactHistoryBody,
        FactChangeSchema,
        AddFact,
        PatchFact,
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

    /// A bearer token is required, and a 401 documented, exactly when the server has `--auth`;
    /// the document itself never needs one.
    #[test]
    fn security_follows_auth() {
        for auth in [false, true] {
            let doc = serde_json::to_value(derived(auth)).expect("the document serializes");
            assert_eq!(doc["security"].is_array(), auth, "{auth}: {}", doc["security"]);
            assert_eq!(doc["components"]["securitySchemes"]["bearer"].is_object(), auth);
            let list = &doc["paths"]["/v1/conversations"]["get"]["responses"];
            assert_eq!(list["401"].is_object(), auth, "{auth}");
            let itself = &doc["paths"]["/openapi.json"]["get"];
            assert!(itself["responses"]["401"].is_null());
        }
    }

    /// The policy's enums are declared with the names the core parses.
    #[test]
    fn the_policy_enums_are_the_cores_names() {
        let doc = serde_json::to_value(ApiDoc::openapi()).expect("the document serializes");
        for (schema, parse) in [
            (
                "Tokenizer",
                (|n: &str| n.parse::<chatmem::Tokenizer>().is_ok()) as fn(&str) -> bool,
            ),
            ("Boundary", |n: &str| n.parse::<chatmem::TurnBoundary>().is_ok()),
        ] {
            let names = doc["components"]["schemas"][schema]["enum"]
                .as_array()
                .expect("an enum");
            assert!(!names.is_empty());
            for name in names {
                assert!(parse(name.as_str().expect("a name")), "{schema}: {name}");
            }
        }
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
            clear_tool_results: Some(chatmem::ClearSpec {
                keep: Some(1),
                trigger_tokens: Some(1),
                clear_at_least_tokens: Some(1),
                exclude_tools: Some(vec!["t".into()]),
                clear_inputs: Some(true),
            }),
        };
        let spec = serde_json::to_value(full).expect("a spec serializes");
        let names =
            |v: &serde_json::Value| -> BTreeSet<String> { v.as_object().expect("an object").keys().cloned().collect() };
        let clear = names(&spec["clear_tool_results"]);
        let spec = names(&spec);
        for doc in [
            serde_json::to_value(ApiDoc::openapi()).expect("the document serializes"),
            crate::openapi::document(&crate::ServerConfig::default()),
        ] {
            let schemas = &doc["components"]["schemas"];
            assert_eq!(names(&schemas["Policy"]["properties"]), spec);
            assert_eq!(names(&schemas["ClearToolResults"]["properties"]), clear);
            let query = doc["paths"]["/v1/conversations/{id}/messages"]["get"]["parameters"]
                .as_array()
                .expect("parameters");
            let params: BTreeSet<String> = query
                .iter()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            // In a query clearing's fields are flat: `clear_tool_results.keep`.
            let flat: BTreeSet<String> = spec
                .iter()
                .filter(|n| *n != "clear_tool_results")
                .cloned()
                .chain(clear.iter().map(|n| format!("clear_tool_results.{n}")))
                .collect();
            assert_eq!(params, flat);
        }
    }
}
