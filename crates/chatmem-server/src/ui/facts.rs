//! A user's facts in the inspector. `GET /ui/users/{user}/facts`: what is kept of the user, in
//! the order a turn sends it, each fact with the messages it was read from (links into their
//! conversations' pages) and its history, and the message a turn sends them in.
//! `GET …/facts/{fact}/history`: what happened to one fact, as
//! `GET /v1/users/{user}/facts/{fact}/history` answers it. A conversation does not name its
//! user, so the list page opens a user's facts by id (`GET /ui/users?user=`).
//!
//! User and fact ids are checked by the API's facts routes' own functions (`users.rs`), for
//! the viewer's tenant: another tenant's user is a user with no facts. Deleting a fact is
//! `DELETE /ui/users/{user}/facts/{fact}` from the page's script, for a token that may write,
//! as deleting a conversation is.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chatmem::facts::{
    Cause, ChangeKind, EvictionReason, Fact, FactChange, FactKey, FactSet, FactSource, RenderedFacts, render,
    render_order,
};
use chatmem::store::StoredFacts;
use maud::{Markup, html};
use percent_encoding::utf8_percent_encode;
use serde::Deserialize;

use super::page::{SEGMENT, Shown, Viewer, conversation_path, layout, text_block, when};
use super::{error_page, html, viewer, viewing};
use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::{ApiQuery, respond};
use crate::route;
use crate::state::{AppState, RequestId};
use crate::users::{facts_error, facts_kept, parse_fact_id, user_id};

/// The inspector's path of user `user`'s facts (the id as the tenant knows it).
pub(super) fn facts_path(user: &str) -> String {
    format!("/ui/users/{}/facts", utf8_percent_encode(user, SEGMENT))
}

/// The path of `user`'s fact `fact` (its `DELETE`).
fn fact_path(user: &str, fact: u64) -> String {
    format!("{}/{fact}", facts_path(user))
}

/// The path of the history page of `user`'s fact `fact`.
fn history_path(user: &str, fact: u64) -> String {
    format!("{}/{fact}/history", facts_path(user))
}

/// The link to a fact's source: its conversation's page, at the history page that begins
/// with the message, scrolled to it.
fn source_href(conversation: &str, seq: u64) -> String {
    format!(
        "{}?from={}#m{seq}",
        conversation_path(conversation),
        seq.saturating_sub(1)
    )
}

/// A path that cannot be read (a segment that is not UTF-8), naming `user` as the API does.
fn path_error(e: &PathRejection) -> ApiError {
    ApiError::invalid(format!("the path cannot be read: {}", e.body_text())).with_param("user")
}

/// The query of `GET /ui/users`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OpenQuery {
    #[serde(default)]
    user: String,
}

/// `GET /ui/users?user=…`: the list page's form; a redirect to the user's facts page, or the
/// error page of an id the facts routes refuse.
pub(super) async fn open(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    query: Result<ApiQuery<OpenQuery>, ApiError>,
) -> Response {
    let result = (|| {
        let ApiQuery(OpenQuery { user }) = query?;
        let tenant = viewer(&state, &headers)?;
        user_id(&state, &tenant, &user, "user")?;
        // Percent-encoded, the path is ASCII: always a header value.
        let location = HeaderValue::from_str(&facts_path(&user))
            .map_err(|_| ApiError::invalid("user: the id cannot be a page's path").with_param("user"))?;
        Ok((StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response())
    })();
    result.unwrap_or_else(|e| error_page(&rid, e))
}

/// `GET /ui/users/{user}/facts`: the user's current facts (none for a user never seen).
pub(super) async fn facts(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    user: Result<Path<String>, PathRejection>,
) -> Response {
    let Path(user) = match user {
        Ok(user) => user,
        Err(e) => return error_page(&rid, path_error(&e)),
    };
    let result = async {
        let tenant = viewer(&state, &headers)?;
        let stored_user = user_id(&state, &tenant, &user, "user")?;
        facts_kept(&state)?;
        let stored = state.memory.facts(&stored_user).await.map_err(facts_error)?;
        // As a turn renders them, within the facts budget alone (a token window may leave less).
        let sent = state.memory.facts_settings().map(|settings| Sent {
            budget: settings.token_budget(),
            rendered: render(&stored.set, settings.token_budget(), state.memory.counter().as_ref()),
        });
        let shown = FactsPage {
            user: &user,
            stored: &stored,
            sent: sent.as_ref(),
            tenant: &tenant,
            can_write: tenant.can_write(),
        };
        Ok(html(StatusCode::OK, facts_page(viewing(&state, &tenant), &shown)))
    }
    .await;
    result.unwrap_or_else(|e| error_page(&rid, e))
}

/// `GET /ui/users/{user}/facts/{fact}/history`: what happened to the fact, oldest first (404
/// for a fact never made, or deleted).
pub(super) async fn history(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let Path((user, fact)) = match path {
        Ok(path) => path,
        Err(e) => return error_page(&rid, path_error(&e)),
    };
    let result = async {
        let tenant = viewer(&state, &headers)?;
        let stored_user = user_id(&state, &tenant, &user, "user")?;
        let id = parse_fact_id(&fact)?;
        facts_kept(&state)?;
        let history = state.memory.fact_history(&stored_user, id).await.map_err(facts_error)?;
        // Every fact made has its `added` entry until it is deleted.
        if history.is_empty() {
            return Err(ApiError::not_found(format!("no fact {id} (for this user)")));
        }
        let stored = state.memory.facts(&stored_user).await.map_err(facts_error)?;
        let markup = history_page(viewing(&state, &tenant), &user, id, &stored.set, &history, &tenant);
        Ok(html(StatusCode::OK, markup))
    }
    .await;
    result.unwrap_or_else(|e| error_page(&rid, e))
}

/// `DELETE /ui/users/{user}/facts/{fact}`: the page's delete button; 204, or the API's error
/// JSON (the script shows its message). As the API's delete: the fact goes with its history
/// and the facts it superseded.
pub(super) async fn delete(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let result = async {
        let Path((user, fact)) = path.map_err(|e| path_error(&e))?;
        let tenant = viewer(&state, &headers)?;
        tenant.check_write()?;
        let stored_user = user_id(&state, &tenant, &user, "user")?;
        let id = parse_fact_id(&fact)?;
        facts_kept(&state)?;
        let deleted = state.memory.delete_fact(&stored_user, id).await.map_err(facts_error)?;
        tracing::debug!(deleted = deleted.len(), "fact deleted");
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    respond(&rid, result)
}

/// What the facts page says of a fact read from no message.
const BY_HAND: &str = "Read from no message (added by hand).";

/// What a turn sends of the user's facts: the message they are rendered in, within the
/// server's facts budget.
struct Sent {
    budget: usize,
    /// `None`: nothing to send (no facts, or none fits).
    rendered: Option<RenderedFacts>,
}

/// What the facts page shows.
struct FactsPage<'a> {
    /// The user id as the tenant knows it.
    user: &'a str,
    stored: &'a StoredFacts,
    /// `None`: the server sends no facts with its turns.
    sent: Option<&'a Sent>,
    tenant: &'a Tenant,
    can_write: bool,
}

fn facts_page(viewer: Viewer<'_>, shown: &FactsPage<'_>) -> Markup {
    let order = render_order(&shown.stored.set);
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" { a href=(route::UI) { "Conversations" } " / " }
        h1 { "Facts of user " code.id { (Shown(shown.user)) } }
        p.facts {
            (order.len()) @if order.len() == 1 { " current fact" } @else { " current facts" }
            " · version " (shown.stored.version)
        }
        (sent_section(shown.sent, order.is_empty()))
        section.fact-list aria-labelledby="facts-title" {
            h2 #facts-title { "Current facts" }
            p.note { "In the order a turn sends them: pinned first, then those with a key, by key, then the others, oldest first." }
            @if order.is_empty() {
                p.empty { "No facts are kept for this user." }
            } @else {
                ol.fact-list {
                    @for fact in &order {
                        li { (fact_markup(fact, shown)) }
                    }
                }
            }
        }
    };
    layout(&format!("Facts of user {}", shown.user), Some(viewer), body)
}

/// The message a turn sends the facts in, or why there is none.
fn sent_section(sent: Option<&Sent>, no_facts: bool) -> Markup {
    html! {
        section.sent aria-labelledby="sent-title" {
            h2 #sent-title { "What a turn sends" }
            @match sent {
                None => p.note {
                    "This server sends no facts with its turns (" code { "chatmem serve --facts" } " turns it on): they are kept, and sent by a server that does."
                },
                Some(Sent { budget, rendered: None }) => p.empty {
                    @if no_facts { "Nothing: the user has no facts." }
                    @else { "Nothing: no fact fits within the facts budget of " (budget) " tokens." }
                },
                Some(Sent { budget, rendered: Some(rendered) }) => {
                    p.note {
                        "One user message right after the system message, in every turn begun for this user ("
                        code { "X-Chatmem-User" } ", or a request's " code { "user" } "): "
                        (rendered.tokens) " tokens of the facts budget of " (budget)
                        " (under a token window, a turn may fit fewer facts in what its budget leaves)."
                    }
                    (text_block("text facts-sent", &rendered.message.text().unwrap_or_default()))
                }
            }
        }
    }
}

/// Whether fact `id` is in the message a turn sends (`None`: the server sends none).
fn in_message(sent: Option<&Sent>, id: u64) -> Option<bool> {
    sent.map(|s| s.rendered.as_ref().is_some_and(|r| r.included.contains(&id)))
}

/// One current fact: its id, key, pin, text, times, sources and history link.
fn fact_markup(fact: &Fact, shown: &FactsPage<'_>) -> Markup {
    let pinned = if fact.pinned { " pinned" } else { "" };
    html! {
        article class={ "fact" (pinned) } id={ "f" (fact.id) } {
            header {
                span.seq { "#" (fact.id) }
                @if let Some(key) = &fact.key { span.key { "key " code { (key.as_str()) } } }
                @if fact.pinned { span.pin { "pinned: never leaves by the bounds" } }
                @match in_message(shown.sent, fact.id) {
                    Some(true) => span.place { "sent with turns" },
                    Some(false) => span.place { "left out: over the facts budget" },
                    None => {},
                }
            }
            div.text { (Shown(&fact.text)) }
            dl.times {
                dt { "Created" } dd { (when(fact.created_micros)) }
                dt { "Updated" } dd { (when(fact.updated_micros)) }
                dt { "Confirmed" } dd { (when(fact.confirmed_micros)) }
            }
            (sources_markup(&fact.sources, shown.tenant, "Read from", Some(BY_HAND)))
            p.actions {
                a href=(history_path(shown.user, fact.id)) { "History of #" (fact.id) }
                @if shown.can_write {
                    " "
                    button.danger type="button" data-delete-fact=(fact_path(shown.user, fact.id)) data-fact=(fact.id) { "Delete…" }
                }
            }
        }
    }
}

/// Sources as links to their messages, after `words`; conversations named as the tenant knows
/// them (a source of another tenant, which cannot be, is left out, as the API leaves it out).
/// No sources: `none`, if given.
fn sources_markup(sources: &[FactSource], tenant: &Tenant, words: &str, none: Option<&str>) -> Markup {
    let links: Vec<(&str, u64)> = sources
        .iter()
        .filter_map(|s| tenant.client_id(&s.conversation).map(|c| (c, s.seq)))
        .collect();
    html! {
        @if links.is_empty() {
            @if let Some(none) = none { p.sources.note { (none) } }
        } @else {
            div.sources {
                (words) ":"
                ul {
                    @for (conversation, seq) in links {
                        li { a href=(source_href(conversation, seq)) { "conversation " code { (Shown(conversation)) } ", message #" (seq) } }
                    }
                }
            }
        }
    }
}

/// The conversation a change's cause names, as the tenant knows it.
fn cause_markup(cause: &Cause, tenant: &Tenant) -> Markup {
    match cause {
        Cause::Extraction { conversation } => match tenant.client_id(conversation) {
            Some(id) => html! { "read from " a href=(conversation_path(id)) { "conversation " code { (Shown(id)) } } },
            None => html! { "read from a conversation" },
        },
        _ => html! { "by hand" },
    }
}

fn reason_words(reason: EvictionReason) -> &'static str {
    match reason {
        EvictionReason::TooManyFacts => "too many facts (too_many_facts)",
        EvictionReason::TooManyTokens => "too many tokens (too_many_tokens)",
        _ => "a bound",
    }
}

fn key_words(key: Option<&FactKey>) -> Markup {
    match key {
        Some(key) => html! { "key " code { (key.as_str()) } },
        None => html! { "no key" },
    }
}

/// A fact's history: each change with when, what caused it, the text before and after, and
/// what else it names (the fact it replaced or was replaced by, the messages that said it).
fn history_page(
    viewer: Viewer<'_>,
    user: &str,
    id: u64,
    set: &FactSet,
    history: &[FactChange],
    tenant: &Tenant,
) -> Markup {
    // The text before each change: a change records the text right after it.
    let before: Vec<Option<&str>> = history
        .iter()
        .scan(None, |last: &mut Option<&str>, change| {
            let was = *last;
            if let Some(text) = text_after(&change.kind) {
                *last = Some(text);
            }
            Some(was)
        })
        .collect();
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href=(route::UI) { "Conversations" } " / "
            a href=(facts_path(user)) { "Facts of user " code { (Shown(user)) } } " / "
        }
        h1 { "History of fact #" (id) }
        @match set.get(id) {
            Some(fact) => {
                p { "Current: " span.text { (Shown(&fact.text)) } }
                (sources_markup(&fact.sources, tenant, "Read from", None))
            },
            None => p.note { "No longer current: it was superseded or evicted (below). It is never sent again." },
        }
        table.history {
            caption.visually-hidden { "What happened to the fact, oldest first" }
            thead { tr {
                th scope="col" { "When" } th scope="col" { "Change" } th scope="col" { "Cause" }
                th scope="col" { "Text" } th scope="col" { "Details" }
            } }
            tbody {
                @for (change, before) in history.iter().zip(before) {
                    tr class={ "change " (change.kind.as_str()) } {
                        td data-label="When" { (when(change.at_micros)) }
                        td data-label="Change" { code { (change.kind.as_str()) } }
                        td data-label="Cause" { (cause_markup(&change.cause, tenant)) }
                        td data-label="Text" { (text_cell(&change.kind, before)) }
                        td data-label="Details" {
                            @match &change.kind {
                                ChangeKind::Added { key, supersedes, .. } => {
                                    (key_words(key.as_ref()))
                                    @if let Some(old) = supersedes { "; replaces " a href=(history_path(user, *old)) { "#" (old) } }
                                },
                                ChangeKind::Confirmed { sources, key } => {
                                    @if let Some(key) = key { "took " (key_words(Some(key))) }
                                    (sources_markup(sources, tenant, "Said again in", None))
                                },
                                ChangeKind::Superseded { by, .. } => {
                                    "replaced by " a href=(history_path(user, *by)) { "#" (by) } " (same key)"
                                    @if let Some(newer) = set.get(*by) { ", now: " span.text { (Shown(&newer.text)) } }
                                },
                                ChangeKind::Edited { key, .. } => (key_words(key.as_ref())),
                                ChangeKind::Pinned => "pinned: never leaves by the bounds",
                                ChangeKind::Unpinned => "unpinned",
                                ChangeKind::Evicted { reason, .. } => { "left for " (reason_words(*reason)) },
                                _ => "",
                            }
                        }
                    }
                }
            }
        }
    };
    layout(&format!("History of fact #{id}"), Some(viewer), body)
}

/// The fact's text right after a change, when the change records it.
fn text_after(kind: &ChangeKind) -> Option<&str> {
    match kind {
        ChangeKind::Added { text, .. }
        | ChangeKind::Edited { text, .. }
        | ChangeKind::Superseded { text, .. }
        | ChangeKind::Evicted { text, .. } => Some(text),
        _ => None,
    }
}

/// A change's text: what an edit changed it from and to, what it was made with, what it was
/// when it left.
fn text_cell(kind: &ChangeKind, before: Option<&str>) -> Markup {
    match (kind, before) {
        (ChangeKind::Added { text, .. }, _) => html! { "new: " span.text { (Shown(text)) } },
        (ChangeKind::Edited { text, .. }, Some(old)) if old != text => html! {
            "old: " span.text.old { (Shown(old)) } br;
            "new: " span.text { (Shown(text)) }
        },
        (
            ChangeKind::Edited { text, .. } | ChangeKind::Superseded { text, .. } | ChangeKind::Evicted { text, .. },
            _,
        ) => {
            html! { span.text { (Shown(text)) } }
        }
        _ => html! { "—" },
    }
}
