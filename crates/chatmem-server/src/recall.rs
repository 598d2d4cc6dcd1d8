//! Recall over HTTP: `GET /v1/conversations/{id}/recall`, what recall finds for a question
//! among the messages that left a conversation's window and why each was or was not recalled
//! ([`chatmem::ChatMemory::recall`]); the one lookup the route and the inspector share
//! ([`find`]); and what a turn's recall was, for the dry run and the door ([`TurnRecall`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chatmem::recall::{Considered, Recalled};
use chatmem::{ChatMemory, ConversationId, Message, Store, Turn};
use serde::Deserialize;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiQuery, Conversation, respond};
use crate::openapi::{NoConversation, StoreDown, Unauthorized};
use crate::state::{AppState, RequestId};

/// How many messages the route considers recalling when neither the request nor the server's
/// recall settings say.
pub(crate) const DEFAULT_K: usize = 5;

/// The `k` a lookup uses when the request gives none: the memory's, else [`DEFAULT_K`].
pub(crate) fn default_k(memory: &ChatMemory<Arc<dyn Store>>) -> usize {
    memory.recall_settings().map_or(DEFAULT_K, |r| r.k())
}

/// What recall finds for `query` in conversation `key`, at most `k` recalled; `None` when the
/// conversation does not exist. Over a store that does not search nothing was ever indexed, so
/// nothing is found (and the store is not asked to search, which it cannot).
pub(crate) async fn find(
    memory: &ChatMemory<Arc<dyn Store>>,
    key: &ConversationId,
    query: &str,
    k: usize,
) -> Result<Option<Recalled>, ApiError> {
    if !memory.store().searches() {
        let exists = memory.load(key).await?.snapshot().exists();
        return Ok(exists.then(Recalled::default));
    }
    Ok(memory.recall(key, query, k).await?)
}

/// The query of `GET …/recall`. Both are read as text so that an error names the parameter.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecallQuery {
    q: Option<String>,
    k: Option<String>,
}

impl RecallQuery {
    /// The question and `k`, checked: `q` given and not empty, within the body limit (a
    /// question is never larger than a request may be); `k` from 1 to
    /// [`MAX_RECALL_K`](chatmem::recall::MAX_RECALL_K).
    fn checked(self, max_bytes: usize, default_k: usize) -> Result<(String, usize), ApiError> {
        let max_k = chatmem::recall::MAX_RECALL_K;
        let k = match self.k {
            None => default_k,
            Some(k) => Some(k)
                .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|k| k.parse::<usize>().ok())
                .filter(|k| (1..=max_k).contains(k))
                .ok_or_else(|| {
                    ApiError::invalid(format!("`k` must be a whole number from 1 to {max_k}")).with_param("k")
                })?,
        };
        let q = self
            .q
            .ok_or_else(|| ApiError::invalid("`q` is required: the question to recall for").with_param("q"))?;
        if q.is_empty() {
            return Err(ApiError::invalid("`q` is empty: give the question to recall for").with_param("q"));
        }
        if q.len() > max_bytes {
            return Err(ApiError::too_large(format!(
                "`q` is {} bytes long; the limit is {max_bytes} (the body limit)",
                q.len()
            ))
            .with_param("q"));
        }
        Ok((q, k))
    }
}

/// The answer of `GET …/recall`.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Recall)]
pub(crate) struct RecallBody<'a> {
    /// The conversation id, as the client gave it.
    conversation: &'a str,
    /// Whether this server's turns recall (the OpenAI door and the prompt dry run send what
    /// recall finds); when not, the hits are what recall finds among the messages committed
    /// while it was on: usually none.
    enabled: bool,
    /// At most this many messages are recalled (the request's `k`, else the server's).
    #[schema(minimum = 1, maximum = 100)]
    k: usize,
    /// Every message the search found, best first (by BM25 score; ties: the newer first),
    /// each with what a turn asking this question would do with it.
    hits: Vec<HitBody<'a>>,
    /// The one user message the recalled messages are sent in, just before the question,
    /// under the recall heading, oldest first; null when nothing would be recalled.
    #[schema(value_type = Option<crate::schemas::MessageSchema>)]
    injected: Option<&'a Message>,
    /// The tokens of `injected`, by the server's counter (0 when nothing would be recalled).
    injected_tokens: usize,
}

/// One message a recall search found.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = RecallHit)]
pub(crate) struct HitBody<'a> {
    /// Its sequence number (as in `…/history`).
    seq: u64,
    /// Its role.
    #[schema(value_type = String, example = "user")]
    role: &'static str,
    /// Its text (every text part), null when it has none (an assistant's tool calls alone).
    content: Option<String>,
    /// The message, as the other routes return messages.
    #[schema(value_type = crate::schemas::MessageSchema)]
    message: &'a Message,
    /// Its BM25 score for the question (rounded to 6 decimals, as stores order by it).
    #[schema(minimum = 0)]
    score: f64,
    /// Its score made comparable across questions, from 0 to 1: what the server's relevance
    /// floor applies to.
    #[schema(minimum = 0, maximum = 1)]
    relevance: f64,
    /// Its place among the hits by words, from 1; null when only its vector found it.
    #[schema(minimum = 1)]
    lexical_rank: Option<usize>,
    /// Its place among the hits by vector, from 1 (null without embeddings, or when its
    /// vector was not among the nearest).
    #[schema(minimum = 1)]
    vector_rank: Option<usize>,
    /// Its vector's cosine similarity with the question's, from -1 to 1 (null as
    /// `vector_rank`): what the similarity floor applies to.
    #[schema(minimum = -1, maximum = 1)]
    similarity: Option<f64>,
    /// Its reciprocal-rank-fusion score over both rankings: what orders the hits.
    #[schema(minimum = 0)]
    fused: f64,
    /// When the commit that wrote it landed, as RFC 3339 (null when the store did not record it).
    at: Option<String>,
    /// What a turn would do with it.
    #[schema(value_type = OutcomeSchema)]
    outcome: &'static str,
}

/// What became of a message a recall search found: `injected` (recalled into the prompt),
/// `below_threshold` (less relevant than the relevance floor), `past_k` (relevant, but `k`
/// more relevant messages were recalled), `over_budget` (relevant, but over the recall's token
/// budget), `without_its_call` (a tool result whose call was not found with it: a result
/// comes with its call or not at all).
#[derive(utoipa::ToSchema)]
#[schema(as = RecallOutcome)]
#[expect(dead_code, reason = "it only describes the outcome in the OpenAPI document")]
pub(crate) enum OutcomeSchema {
    #[schema(rename = "injected")]
    Injected,
    #[schema(rename = "below_threshold")]
    BelowThreshold,
    #[schema(rename = "past_k")]
    PastK,
    #[schema(rename = "over_budget")]
    OverBudget,
    #[schema(rename = "without_its_call")]
    WithoutItsCall,
}

/// A time in Unix microseconds as RFC 3339 UTC; `None` for 0 (not recorded).
pub(crate) fn rfc3339(micros: i64) -> Option<String> {
    let micros = u64::try_from(micros).ok().filter(|&m| m > 0)?;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros);
    Some(humantime::format_rfc3339_micros(at).to_string())
}

fn hit(c: &Considered) -> HitBody<'_> {
    HitBody {
        seq: c.seq,
        role: c.message.role().as_str(),
        content: c.message.text().map(|t| t.into_owned()),
        message: &c.message,
        score: chatmem::recall::rounded(c.score),
        relevance: c.relevance,
        lexical_rank: (c.lexical_rank > 0).then_some(c.lexical_rank),
        vector_rank: c.vector_rank,
        similarity: c.similarity,
        fused: chatmem::recall::rounded(c.fused),
        at: rfc3339(c.at_micros),
        outcome: c.outcome.as_str(),
    }
}

/// `GET /v1/conversations/{id}/recall`: what recall finds for `q` among the messages that
/// left the window, ranked, with what a turn would do with each. Reads only.
#[utoipa::path(get, path = "/v1/conversations/{id}/recall",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`"),
           ("q" = String, Query, min_length = 1, description = "the question, as a user would ask it (a turn's question is its new user message); at most the body limit's bytes"),
           ("k" = Option<usize>, Query, minimum = 1, maximum = 100, description = "at most this many messages recalled, 1 to 100 (default: the server's recall k, else 5)")),
    responses((status = 200, description = "every message the search found, best first, with what a turn would do with it", body = RecallBody),
              (status = 400, description = "an invalid id, a missing or empty `q`, a `k` outside 1 to 100, or an unknown parameter; the message names it", body = ErrorBody),
              (status = 413, description = "an id over the id limit, or a `q` over the body limit", body = ErrorBody),
              (status = 414, description = "a request URI over the server's URI limit (a long `q`)", body = ErrorBody),
              Unauthorized, NoConversation, StoreDown))]
pub(crate) async fn get_recall(
    State(state): State<AppState>,
    rid: RequestId,
    Conversation { id, key, .. }: Conversation,
    ApiQuery(query): ApiQuery<RecallQuery>,
) -> Response {
    let result = async {
        let (q, k) = query.checked(state.config.limits.max_body_bytes, default_k(&state.memory))?;
        let Some(found) = find(&state.memory, &key, &q, k).await? else {
            return Err(ApiError::not_found(format!("no conversation {id:?}")));
        };
        tracing::debug!(
            hits = found.considered.len(),
            injected = found.injected().count(),
            "recall looked up"
        );
        Ok(Json(RecallBody {
            conversation: &id,
            enabled: state.memory.recall_settings().is_some(),
            k,
            hits: found.considered.iter().map(hit).collect(),
            injected: found.message.as_ref(),
            injected_tokens: found.tokens,
        })
        .into_response())
    }
    .await;
    respond(&rid, result)
}

/// What one turn's recall was: whether it searched the store, and what it recalled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TurnRecall {
    /// Whether the turn asked the store (the memory recalls and its question has terms).
    pub(crate) searched: bool,
    /// The recalled messages' sequence numbers, oldest first.
    pub(crate) seqs: Vec<u64>,
    /// The tokens of the message they are sent in.
    pub(crate) tokens: usize,
}

/// Runs the turn's recall (as [`Turn::recall`]: a store round trip when the turn's memory
/// recalls, which `recalls` says), so that its prompt holds what recall found, and says what
/// it was.
pub(crate) async fn recall_for(
    turn: &mut Turn<'_, Arc<dyn Store>>,
    recalls: bool,
) -> Result<TurnRecall, chatmem::Error> {
    let recalled = turn.recall().await?;
    Ok(TurnRecall {
        searched: recalls && recalled.searched,
        seqs: recalled.injected().map(|c| c.seq).collect(),
        tokens: recalled.tokens,
    })
}
