//! chatmem's memory over HTTP, for applications in any language: a REST API over any
//! [`chatmem::Store`], with bearer-token tenants, request limits and one JSON error shape.
//!
//! It is for: teams that want chatmem's windows, stores and commit guarantees without writing
//! Rust, and OpenAI clients that get memory by changing their base URL and adding one header.
//! It is not: a store (it uses one); nor the window rules (the [`chatmem::ChatMemory`] it is
//! given holds the policy, and a request's `"policy"` is the core's [`chatmem::PolicySpec`]
//! laid over it); nor a model client (the chat completion passes the client's request through
//! to the upstream with `chatmem-openai`'s `passthrough`, and reads the answer with it). It
//! speaks OpenAI's JSON to its own clients (the chat completion's answer and stream events).
//!
//! `chatmem serve` runs it. The API (JSON; errors are
//! `{"error": {"code", "message", "type", "param", "request_id"}}`, OpenAI's error object plus
//! the request id, `code` an [`ErrorCode`]):
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/conversations/{id}/messages` with `{"messages": [...]}` (and optionally `"policy": {"max_messages": N}` or `{"max_tokens": N, "tokenizer": "cl100k"}`, with `"evict_to"` and `"boundary"`: a `chatmem::PolicySpec`) | the batch committed atomically; `{"conversation", "messages"}` with the window after it |
//! | `GET /v1/conversations/{id}/messages` (optionally `?max_messages=N`, `?max_tokens=N&tokenizer=…`, `&evict_to=N`, `&boundary=pair-safe`) | the window the model sees (404 for an unknown conversation) |
//! | `GET /v1/conversations/{id}/history?cursor=…&limit=…` | a page of everything stored, `{"conversation", "messages", "next_cursor"}` (404 for an unknown conversation) |
//! | `POST /v1/conversations/{id}/prompt` with `{"messages": [...]}` | a dry run: what the next model call would be sent, as the door sends it (recalled messages included), `{"conversation", "messages", "tokens", "already_stored", "cleared", "recalled"}`; nothing committed |
//! | `GET /v1/conversations/{id}/recall?q=…&k=N` | what recall finds for the question among the messages that left the window, `{"conversation", "enabled", "k", "hits", "injected", "injected_tokens"}`, each hit with its score, relevance, rank and outcome (404 for an unknown conversation) |
//! | `DELETE /v1/conversations/{id}` | 204, or 404 |
//! | `GET /v1/conversations?cursor=…&limit=…` | `{"conversations": [...], "next_cursor"}` |
//! | `GET`, `POST`, `DELETE /v1/users/{user}/facts`; `PATCH`, `DELETE /v1/users/{user}/facts/{fact}`; `GET …/{fact}/history` | a user's facts, read and changed by hand (`{"facts", "version"}`, the fact, 204; 404 for an unknown fact, 409 `fact_refused` for a change the facts' rules refuse) |
//! | `GET /healthz` | 200 when the store answers, 503 otherwise |
//! | `GET /metrics` | [`Metrics`] as Prometheus text 0.0.4, or OpenMetrics when `Accept` prefers it (bearer token as every route; [`metrics_app`] serves it without one on a second listener) |
//! | `GET /openapi.json` | this API as OpenAPI 3.1, generated from the code |
//! | `GET /v1/models` | the upstream's model list, as it came (502 naming the upstream's status when it fails) |
//! | `GET /ui`, `GET /ui/conversations/{id}` | the memory inspector: web pages showing a conversation's history with the window the model sees marked (`ui/`; sign-in cookie with `--auth`) |
//! | `POST /v1/chat/completions` with header `X-Chatmem-Conversation: {id}` (and optionally `X-Chatmem-User: {user}`: the turn is sent with the user's facts) | OpenAI's chat completion from the upstream model, the client's request passed through with `messages` replaced by the conversation's window and the new messages, the answer (JSON, or SSE with `"stream": true`) passed back as it came; the turn is committed once the answer is complete |
//!
//! `{id}` is one path segment, percent-decoded: an id may hold `/`, sent as `%2F`
//! (`/v1/conversations/a%2Fb/messages` is conversation `a/b`; `/v1/conversations/a/b/messages`
//! is no route), and any text a [`chatmem::ConversationId`] allows. Every response carries an
//! `x-request-id` header, and every log line of a request its id; message text is never logged.
//!
//! ```
//! use std::sync::Arc;
//! use chatmem::{ChatMemory, InMemoryStore, Store};
//! use chatmem_server::{ServerConfig, app};
//!
//! let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
//! let router = app(ChatMemory::new(store), ServerConfig::default());
//! # let _ = router;
//! ```

mod app;
mod auth;
mod completions;
mod config;
mod edges;
mod error;
mod extract;
mod metered_store;
mod metrics;
mod openapi;
mod openapi_schemas;
mod policy;
mod recall;
mod request_limits;
mod route;
mod routes;
mod schemas;
mod serve;
mod state;
mod ui;
mod unreadable;
mod upstream;
mod users;

pub use crate::app::app;
pub use crate::auth::{Auth, AuthError, DEFAULT_MAX_ID_BYTES, MAX_TENANT_BYTES, Tenant, bearer_token};
pub use crate::config::{Limits, PolicyCaps, ServerConfig, Upstream};
pub use crate::error::{ApiError, ErrorCode};
pub use crate::extract::{CONVERSATION_HEADER, USER_HEADER};
pub use crate::metrics::{Metrics, metrics_app};
pub use crate::serve::{ServeOptions, serve};
pub use crate::state::AppState;
pub use crate::users::{FactBody, FactsBody, HistoryBody, SourceBody};
