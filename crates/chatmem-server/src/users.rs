//! Users' facts over HTTP: `…/v1/users/{user}/facts` and its fact routes, what a person in
//! charge of a user's facts reads and changes ([`chatmem::ChatMemory::facts`] and the calls
//! beside it). A user is the tenant's, as a conversation is ([`Tenant::user`]); a fact's
//! sources name conversations by the ids the tenant knows. Fact text is the user's: it is
//! never logged.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use chatmem::UserId;
use chatmem::facts::{Cause, Fact, FactChange, FactEdit, FactError, FactKey};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::auth::Tenant;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{JsonBody, respond};
use crate::openapi::{ForbiddenWrite, NotJson, StoreDown, Unauthorized};
use crate::recall::rfc3339;
use crate::state::{AppState, RequestId};

/// The stored id of the tenant's user `id`; `what` names it in errors (`user`, or the
/// `X-Chatmem-User` header): over the id limit is 413, otherwise invalid is 400, both naming it.
pub(crate) fn user_id(state: &AppState, tenant: &Tenant, id: &str, what: &str) -> Result<UserId, ApiError> {
    let max = state.config.limits.max_id_bytes;
    if id.len() > max {
        return Err(
            ApiError::too_large(format!("{what} is {} bytes long; the limit is {max}", id.len())).with_param(what),
        );
    }
    tenant
        .user(id)
        .map_err(|e| ApiError::invalid(format!("{what}: {e}")).with_param(what))
}

/// The user (and fact) a facts route's path names, for the caller's tenant. The tenant is
/// checked first (401), then the user (400 naming `user`, 413 over the id limit), then the
/// fact id (400 naming `fact`).
pub(crate) struct UserPath {
    user: UserId,
    fact: Option<u64>,
    tenant: Tenant,
}

impl FromRequestParts<AppState> for UserPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let tenant = Tenant::from_request_parts(parts, state).await?;
        let id = parts.extensions.get::<RequestId>().cloned();
        let named = |e: ApiError| match &id {
            Some(id) => e.with_request_id(&id.0),
            None => e,
        };
        let params = match Path::<HashMap<String, String>>::from_request_parts(parts, state).await {
            Ok(Path(params)) => params,
            Err(e) => {
                return Err(named(
                    ApiError::invalid(format!("the path cannot be read: {}", e.body_text())).with_param("user"),
                ));
            }
        };
        let user = user_id(state, &tenant, params.get("user").map_or("", String::as_str), "user").map_err(named)?;
        let fact = match params.get("fact") {
            None => None,
            Some(f) => Some(parse_fact_id(f).map_err(named)?),
        };
        Ok(Self { user, fact, tenant })
    }
}

/// A fact id of a path: a whole number from 1, as the routes give them.
pub(crate) fn parse_fact_id(text: &str) -> Result<u64, ApiError> {
    Some(text)
        .filter(|t| !t.is_empty() && t.len() <= 20 && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|&id| id > 0)
        .ok_or_else(|| ApiError::invalid("`fact` must be a fact id, a whole number from 1").with_param("fact"))
}

/// Refused when the store keeps no facts: the facts routes have nothing to read or change.
pub(crate) fn facts_kept(state: &AppState) -> Result<(), ApiError> {
    if state.memory.store().keeps_facts() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "this server's store keeps no users' facts (the in-memory, SQLite, PostgreSQL, MySQL and Redis stores do)",
        ))
    }
}

/// A memory error of a facts call as the client sees it: a refusal by the facts' rules names
/// the rule (404 for an unknown fact, 400 for a text that cannot be a fact's, 409
/// `fact_refused` for a change the user's other facts leave no room for); the rest as every
/// route answers a memory error.
pub(crate) fn facts_error(e: chatmem::Error) -> ApiError {
    let chatmem::Error::FactRefused { source, .. } = &e else {
        return ApiError::from(e);
    };
    match source {
        FactError::UnknownFact(id) => ApiError::not_found(format!("no fact {id} (for this user)")),
        FactError::Text(text) => ApiError::invalid(text.to_string()).with_param("text"),
        FactError::KeyTaken { .. } => {
            ApiError::new(StatusCode::CONFLICT, ErrorCode::FactRefused, source.to_string()).with_param("key")
        }
        _ => ApiError::new(StatusCode::CONFLICT, ErrorCode::FactRefused, source.to_string()),
    }
}

/// One fact, as the routes answer it (and `chatmem facts` prints it: one shape for both).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Fact)]
pub struct FactBody {
    /// Its id, unique among the user's facts (current and past) and never given again.
    id: u64,
    /// What is known, one line.
    text: String,
    /// What it is about (`home.city`): a newer fact with the same key supersedes it; null when
    /// it has none.
    key: Option<String>,
    /// The messages it was read from, oldest first (none for a fact added by hand).
    sources: Vec<SourceBody>,
    /// When it was made, RFC 3339.
    created: Option<String>,
    /// When it last changed in any way, RFC 3339.
    updated: Option<String>,
    /// When it was last said to hold, RFC 3339: the least recently confirmed unpinned fact is
    /// the first to leave when the user's facts pass their bounds.
    confirmed: Option<String>,
    /// Pinned: it never leaves by the bounds, and is written first.
    pinned: bool,
}

/// A message a fact was read from.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = FactSource)]
pub struct SourceBody {
    /// The conversation id, as the tenant knows it.
    conversation: String,
    /// The message's sequence number in it (as in `…/history`).
    seq: u64,
}

impl FactBody {
    /// `fact` as `tenant` sees it: its sources' conversations named by the tenant's ids (a
    /// source of another tenant, which cannot be, is left out).
    pub fn of(fact: &Fact, tenant: &Tenant) -> Self {
        Self {
            id: fact.id,
            text: fact.text.clone(),
            key: fact.key.as_ref().map(|k| k.as_str().to_owned()),
            sources: fact
                .sources
                .iter()
                .filter_map(|s| {
                    tenant.client_id(&s.conversation).map(|c| SourceBody {
                        conversation: c.to_owned(),
                        seq: s.seq,
                    })
                })
                .collect(),
            created: rfc3339(fact.created_micros),
            updated: rfc3339(fact.updated_micros),
            confirmed: rfc3339(fact.confirmed_micros),
            pinned: fact.pinned,
        }
    }
}

/// The answer of `GET /v1/users/{user}/facts`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Facts)]
pub struct FactsBody {
    /// The user's current facts, in the order a turn sends them: pinned first, then those with
    /// a key by key, then the others oldest first.
    facts: Vec<FactBody>,
    /// The version of the user's facts: 0 for a user with none yet, bumped by every change.
    version: u64,
}

/// The answer of `GET …/facts/{fact}/history`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = FactHistory)]
pub struct HistoryBody {
    /// What happened to the fact, oldest first.
    #[schema(value_type = Vec<FactChangeSchema>)]
    history: Vec<Value>,
}

impl FactsBody {
    /// A user's facts as `tenant` sees them, in the order a turn sends them.
    pub fn of(stored: &chatmem::store::StoredFacts, tenant: &Tenant) -> Self {
        Self {
            facts: chatmem::facts::render_order(&stored.set)
                .into_iter()
                .map(|f| FactBody::of(f, tenant))
                .collect(),
            version: stored.version,
        }
    }
}

impl HistoryBody {
    /// A fact's history as `tenant` sees it, oldest first.
    pub fn of(history: &[FactChange], tenant: &Tenant) -> Self {
        Self {
            history: history.iter().map(|c| change_json(c, tenant)).collect(),
        }
    }
}

/// One entry of a fact's history: what happened to it, when and why. `kind` says which other
/// fields it has.
#[derive(utoipa::ToSchema)]
#[schema(as = FactChange)]
#[expect(dead_code, reason = "it only describes a history entry in the OpenAPI document")]
pub(crate) struct FactChangeSchema {
    /// The fact it happened to.
    fact: u64,
    /// `added`, `confirmed`, `superseded`, `edited`, `pinned`, `unpinned` or `evicted`.
    kind: String,
    /// When, RFC 3339.
    when: Option<String>,
    /// What caused it: `{"by": "hand"}` (a person, through the API) or `{"by": "extraction",
    /// "conversation": id}` (the facts model's reading of that conversation).
    #[schema(value_type = Object)]
    cause: Value,
    /// The fact's text right after it (`added`, `superseded`, `edited`, `evicted`).
    text: Option<String>,
    /// Its key right after it (`added`, `edited`; `confirmed` when it took one).
    key: Option<String>,
    /// `added`: the fact it replaced (same key).
    supersedes: Option<u64>,
    /// `superseded`: the fact that replaced it.
    by: Option<u64>,
    /// `confirmed`: the messages that said it this time.
    sources: Option<Vec<SourceBody>>,
    /// `evicted`: the bound it left for, `too_many_facts` or `too_many_tokens`.
    reason: Option<String>,
}

/// A history entry as JSON: the core's change (its `kind` and fields), with `fact`, `when`
/// and `cause`, conversations named as the tenant knows them.
fn change_json(change: &FactChange, tenant: &Tenant) -> Value {
    let mut entry = serde_json::to_value(&change.kind).unwrap_or_default();
    let cause = match &change.cause {
        Cause::Extraction { conversation } => serde_json::json!({
            "by": "extraction",
            "conversation": tenant.client_id(conversation),
        }),
        _ => serde_json::json!({"by": "hand"}),
    };
    if let Some(map) = entry.as_object_mut() {
        if let Some(Value::Array(sources)) = map.get_mut("sources") {
            for source in sources {
                let client = source["conversation"]
                    .as_str()
                    .and_then(|c| chatmem::ConversationId::new(c).ok())
                    .and_then(|c| tenant.client_id(&c).map(str::to_owned));
                source["conversation"] = client.map_or(Value::Null, Value::String);
            }
        }
        map.insert("fact".into(), change.fact.into());
        map.insert("when".into(), rfc3339(change.at_micros).into());
        map.insert("cause".into(), cause);
    }
    entry
}

/// A key of a body: valid, or 400 naming `key`.
fn fact_key(key: Option<String>) -> Result<Option<FactKey>, ApiError> {
    key.map(|k| FactKey::new(k).map_err(|e| ApiError::invalid(format!("`key`: {e}")).with_param("key")))
        .transpose()
}

/// `GET /v1/users/{user}/facts`: the user's current facts and their version.
#[utoipa::path(get, operation_id = "list_facts", path = "/v1/users/{user}/facts",
    params(("user" = String, Path, description = "the user id, one path segment: a `/` in it is sent as `%2F`")),
    responses((status = 200, description = "the user's current facts (none for a user never seen)", body = FactsBody),
              (status = 400, description = "an invalid user id (`param` is `user`), or a store that keeps no facts", body = ErrorBody),
              (status = 413, description = "a user id over the id limit", body = ErrorBody),
              Unauthorized, StoreDown))]
pub(crate) async fn list_facts(
    State(state): State<AppState>,
    rid: RequestId,
    UserPath { user, tenant, .. }: UserPath,
) -> Response {
    let result = async {
        facts_kept(&state)?;
        let stored = state.memory.facts(&user).await.map_err(facts_error)?;
        Ok(Json(FactsBody::of(&stored, &tenant)).into_response())
    }
    .await;
    respond(&rid, result)
}

/// The body of `POST /v1/users/{user}/facts`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddFact {
    /// The fact, one line (at most the server's fact text limit, 500 bytes by default). A text
    /// the same as a current fact's (case, spacing and punctuation aside) confirms that fact.
    #[schema(min_length = 1)]
    text: String,
    /// What it is about: words of lowercase letters, digits, `_` and `-` joined by dots
    /// (`home.city`); the current fact with this key is superseded (kept in its history).
    #[serde(default)]
    #[schema(nullable = true)]
    key: Option<String>,
}

/// `POST /v1/users/{user}/facts`: adds a fact by hand; the fact the text is now in.
#[utoipa::path(post, operation_id = "add_fact", path = "/v1/users/{user}/facts",
    params(("user" = String, Path, description = "the user id, one path segment: a `/` in it is sent as `%2F`")),
    request_body = AddFact,
    responses((status = 201, description = "the fact the text is now in (a new one, or the current fact it confirmed)", body = FactBody),
              (status = 400, description = "an invalid user id, body, text or key (`param` names it), or a store that keeps no facts", body = ErrorBody),
              (status = 408, description = "the body did not arrive within the body timeout", body = ErrorBody),
              (status = 409, description = "`fact_refused`: the pinned facts leave no room for it; or `contention`: too many concurrent writers, retry", body = ErrorBody),
              (status = 413, description = "a user id over the id limit, or a body over the body limit", body = ErrorBody),
              Unauthorized, ForbiddenWrite, NotJson, StoreDown))]
pub(crate) async fn add_fact(
    State(state): State<AppState>,
    rid: RequestId,
    UserPath { user, tenant, .. }: UserPath,
    JsonBody(AddFact { text, key }): JsonBody<AddFact>,
) -> Response {
    let result = async {
        tenant.check_write()?;
        facts_kept(&state)?;
        let key = fact_key(key)?;
        let fact = state.memory.add_fact(&user, &text, key).await.map_err(facts_error)?;
        tracing::debug!(fact = fact.id, "fact added");
        Ok((StatusCode::CREATED, Json(FactBody::of(&fact, &tenant))).into_response())
    }
    .await;
    respond(&rid, result)
}

/// A field that may be given as null: `Some(None)`, unlike a field left out (`None`).
fn given<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The body of `PATCH /v1/users/{user}/facts/{fact}`: what to change (a field left out is
/// left as it is).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchFact {
    /// The new text, one line.
    #[serde(default)]
    #[schema(min_length = 1)]
    text: Option<String>,
    /// The new key; null removes it.
    #[serde(default, deserialize_with = "given")]
    #[schema(value_type = Option<String>, nullable = true)]
    key: Option<Option<String>>,
    /// Pin (true) or unpin (false): a pinned fact never leaves by the bounds.
    #[serde(default)]
    pinned: Option<bool>,
}

/// `PATCH /v1/users/{user}/facts/{fact}`: changes a fact's text or key, then pins or unpins
/// it; the fact as it is now. The edit and the pin are committed one after the other: when
/// the pin is refused, the edit stays.
#[utoipa::path(patch, operation_id = "patch_fact", path = "/v1/users/{user}/facts/{fact}",
    params(("user" = String, Path, description = "the user id, one path segment: a `/` in it is sent as `%2F`"),
           ("fact" = u64, Path, minimum = 1, description = "the fact id")),
    request_body = PatchFact,
    responses((status = 200, description = "the fact as it is now", body = FactBody),
              (status = 400, description = "an invalid user id, fact id, body, text or key (`param` names it), a body that changes nothing, or a store that keeps no facts", body = ErrorBody),
              (status = 404, description = "no such current fact (for this user)", body = ErrorBody),
              (status = 408, description = "the body did not arrive within the body timeout", body = ErrorBody),
              (status = 409, description = "`fact_refused`: a key another fact has, a pin past the bounds (too many pinned facts, or too many of their tokens), or no room left for the fact; or `contention`: retry", body = ErrorBody),
              (status = 413, description = "a user id over the id limit, or a body over the body limit", body = ErrorBody),
              Unauthorized, ForbiddenWrite, NotJson, StoreDown))]
pub(crate) async fn patch_fact(
    State(state): State<AppState>,
    rid: RequestId,
    UserPath { user, fact, tenant }: UserPath,
    JsonBody(PatchFact { text, key, pinned }): JsonBody<PatchFact>,
) -> Response {
    let result = async {
        tenant.check_write()?;
        facts_kept(&state)?;
        let id = fact.ok_or_else(|| ApiError::invalid("no fact id").with_param("fact"))?;
        if text.is_none() && key.is_none() && pinned.is_none() {
            return Err(ApiError::invalid(
                "give `text`, `key` or `pinned`: the body changes nothing",
            ));
        }
        let key = key.map(fact_key).transpose()?;
        // The edit and the pin in one commit: a refused pin leaves the text as it was.
        let fact = state
            .memory
            .change_fact(&user, id, FactEdit { text, key }, pinned)
            .await
            .map_err(facts_error)?;
        tracing::debug!(fact = fact.id, "fact changed");
        Ok(Json(FactBody::of(&fact, &tenant)).into_response())
    }
    .await;
    respond(&rid, result)
}

/// `DELETE /v1/users/{user}/facts/{fact}`: deletes the fact with its history, and the facts it
/// superseded with theirs; it is never sent again.
#[utoipa::path(delete, operation_id = "delete_fact", path = "/v1/users/{user}/facts/{fact}",
    params(("user" = String, Path, description = "the user id, one path segment: a `/` in it is sent as `%2F`"),
           ("fact" = u64, Path, minimum = 1, description = "the fact id")),
    responses((status = 204, description = "deleted, history included"),
              (status = 400, description = "an invalid user id or fact id (`param` names it), or a store that keeps no facts", body = ErrorBody),
              (status = 403, description = "a read-only token (`read_only_token`)", body = ErrorBody),
              (status = 404, description = "no such fact (for this user), current or past", body = ErrorBody),
              (status = 409, description = "too many concurrent writers (`contention`); retry", body = ErrorBody),
              (status = 413, description = "a user id over the id limit", body = ErrorBody),
              Unauthorized, StoreDown))]
pub(crate) async fn delete_fact(
    State(state): State<AppState>,
    rid: RequestId,
    UserPath { user, fact, tenant }: UserPath,
) -> Response {
    let result = async {
        tenant.check_write()?;
        facts_kept(&state)?;
        let id = fact.ok_or_else(|| ApiError::invalid("no fact id").with_param("fact"))?;
        let deleted = state.memory.delete_fact(&user, id).await.map_err(facts_error)?;
        tracing::debug!(deleted = deleted.len(), "fact deleted");
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    respond(&rid, result)
}

/// `GET /v1/users/{user}/facts/{fact}/history`: what happened to a fact, oldest first.
#[utoipa::path(get, operation_id = "fact_history", path = "/v1/users/{user}/facts/{fact}/history",
    params(("user" = String, Path, description = "the user id, one path segment: a `/` in it is sent as `%2F`"),
           ("fact" = u64, Path, minimum = 1, description = "the fact id")),
    responses((status = 200, description = "the fact's history, oldest first", body = HistoryBody),
              (status = 400, description = "an invalid user id or fact id (`param` names it), or a store that keeps no facts", body = ErrorBody),
              (status = 404, description = "no such fact (for this user): never made, or deleted", body = ErrorBody),
              (status = 413, description = "a user id over the id limit", body = ErrorBody),
              Unauthorized, StoreDown))]
pub(crate) async fn fact_history(
    State(state): State<AppState>,
    rid: RequestId,
    UserPath { user, fact, tenant }: UserPath,
) -> Response {
    let result = async {
        facts_kept(&state)?;
        let id = fact.ok_or_else(|| ApiError::invalid("no fact id").with_param("fact"))?;
        let history = state.memory.fact_history(&user, id).await.map_err(facts_error)?;
        // Every fact made has its `added` entry until it is deleted.
        if history.is_empty() {
            return Err(ApiError::not_found(format!("no fact {id} (for this user)")));
        }
        Ok(Json(HistoryBody::of(&history, &tenant)).into_response())
    }
    .await;
    respond(&rid, result)
}

/// `DELETE /v1/users/{user}/facts`: forgets everything kept of the user's facts (every fact,
/// every history entry); the user's conversations stay.
#[utoipa::path(delete, operation_id = "forget_user", path = "/v1/users/{user}/facts",
    params(("user" = String, Path, description = "the user id, one path segment: a `/` in it is sent as `%2F`")),
    responses((status = 204, description = "forgotten (also when nothing was kept)"),
              (status = 400, description = "an invalid user id (`param` is `user`), or a store that keeps no facts", body = ErrorBody),
              (status = 403, description = "a read-only token (`read_only_token`)", body = ErrorBody),
              (status = 413, description = "a user id over the id limit", body = ErrorBody),
              Unauthorized, StoreDown))]
pub(crate) async fn forget_user(
    State(state): State<AppState>,
    rid: RequestId,
    UserPath { user, tenant, .. }: UserPath,
) -> Response {
    let result = async {
        tenant.check_write()?;
        facts_kept(&state)?;
        let kept = state.memory.forget_user(&user).await.map_err(facts_error)?;
        tracing::debug!(kept, "user's facts forgotten");
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    respond(&rid, result)
}
