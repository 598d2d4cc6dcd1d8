//! The route templates: the router's paths, the `route` label of the request metrics, and
//! the paths `/openapi.json` documents.

pub(crate) const HEALTHZ: &str = "/healthz";
pub(crate) const METRICS: &str = "/metrics";
pub(crate) const OPENAPI: &str = "/openapi.json";
pub(crate) const MODELS: &str = "/v1/models";
pub(crate) const COMPLETIONS: &str = "/v1/chat/completions";
pub(crate) const CONVERSATIONS: &str = "/v1/conversations";
// `{id}` is one path segment: a `/` in an id is sent as `%2F` (axum percent-decodes the
// segment), so no id can be mistaken for another route.
pub(crate) const CONVERSATION: &str = "/v1/conversations/{id}";
pub(crate) const MESSAGES: &str = "/v1/conversations/{id}/messages";
pub(crate) const HISTORY: &str = "/v1/conversations/{id}/history";
/// The prompt dry run: what the next model call would be sent.
pub(crate) const PROMPT: &str = "/v1/conversations/{id}/prompt";
/// What recall finds for a question, and why.
pub(crate) const RECALL: &str = "/v1/conversations/{id}/recall";
/// A user's facts (`{user}` one path segment, as `{id}`).
pub(crate) const FACTS: &str = "/v1/users/{user}/facts";
pub(crate) const FACT: &str = "/v1/users/{user}/facts/{fact}";
pub(crate) const FACT_HISTORY: &str = "/v1/users/{user}/facts/{fact}/history";
/// The memory inspector's pages (`ui/`).
pub(crate) const UI: &str = "/ui";
pub(crate) const UI_CONVERSATION: &str = "/ui/conversations/{id}";
/// A user's facts (`{user}` one path segment, as the API's), a fact's history, and the list
/// page's form that opens them (`?user=`).
pub(crate) const UI_USERS: &str = "/ui/users";
pub(crate) const UI_FACTS: &str = "/ui/users/{user}/facts";
pub(crate) const UI_FACT: &str = "/ui/users/{user}/facts/{fact}";
pub(crate) const UI_FACT_HISTORY: &str = "/ui/users/{user}/facts/{fact}/history";
pub(crate) const UI_SIGN_IN: &str = "/ui/sign-in";
pub(crate) const UI_SIGN_OUT: &str = "/ui/sign-out";
pub(crate) const UI_STYLE: &str = "/ui/assets/ui.css";
pub(crate) const UI_SCRIPT: &str = "/ui/assets/ui.js";
/// The inspector's templates: web pages and their assets, outside the API's description.
#[cfg(test)]
pub(crate) const PAGES: [&str; 10] = [
    UI,
    UI_CONVERSATION,
    UI_USERS,
    UI_FACTS,
    UI_FACT,
    UI_FACT_HISTORY,
    UI_SIGN_IN,
    UI_SIGN_OUT,
    UI_STYLE,
    UI_SCRIPT,
];
/// Every template the router serves.
pub(crate) const ALL: [&str; 24] = [
    HEALTHZ,
    METRICS,
    OPENAPI,
    MODELS,
    COMPLETIONS,
    CONVERSATIONS,
    CONVERSATION,
    MESSAGES,
    HISTORY,
    PROMPT,
    RECALL,
    FACTS,
    FACT,
    FACT_HISTORY,
    UI,
    UI_CONVERSATION,
    UI_USERS,
    UI_FACTS,
    UI_FACT,
    UI_FACT_HISTORY,
    UI_SIGN_IN,
    UI_SIGN_OUT,
    UI_STYLE,
    UI_SCRIPT,
];
/// Any path no route serves.
pub(crate) const UNMATCHED: &str = "unmatched";
