//! The inspector's HTML, written with maud: every value is escaped by the template engine, so
//! a message holding `<script>` is text on the page. No inline script or style (the pages'
//! Content-Security-Policy forbids both); the budget bar is SVG, sized by attributes.

use maud::{DOCTYPE, Markup, Render, html};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use chatmem::recall::{Considered, Outcome, Recalled};

use super::view::{BudgetBar, ConversationView, Piece, Row, Sent, Unit};
use crate::route;

/// What stays as is in a path segment (RFC 3986's unreserved characters); the rest, `/`
/// included, is percent-encoded, so every id is one segment.
pub(super) const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// Whether a page shows `c` as its escape rather than as itself: control characters (but
/// line breaks and tabs), and characters that are invisible or reorder the text around them
/// (`evil\u{202E}txt.exe` would read as another name), except the joiners that emoji and
/// several scripts need.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || (chatmem::printable::is_invisible_or_separator(c) && c != '\u{200C}' && c != '\u{200D}')
}

/// Text as a page shows it: escaped by maud, and each [`hidden`] character as the escape
/// editors write (`\u{202E}`), marked.
pub(super) struct Shown<'a>(pub(super) &'a str);

impl Render for Shown<'_> {
    fn render_to(&self, buffer: &mut String) {
        let mut rest = self.0;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| hidden(c)) {
            rest[..at].render_to(buffer);
            html! {
                span.hidden-char title="an invisible, reordering or control character" {
                    (format!("\\u{{{:04X}}}", u32::from(c)))
                }
            }
            .render_to(buffer);
            rest = &rest[at + c.len_utf8()..];
        }
        rest.render_to(buffer);
    }
}

/// A JSON text with each [`hidden`] character written as its JSON escape (`\u202e`): the
/// same JSON when copied, and visible on the page.
pub(crate) fn json_shown(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Text longer than this is folded: its start shown, the rest behind a disclosure.
const FOLD_BYTES: usize = 16 << 10;
/// How much of a folded text shows.
const FOLDED_START: usize = 4 << 10;

/// A message's text: [`Shown`], folded past [`FOLD_BYTES`] with its size.
pub(super) fn text_block(class: &str, text: &str) -> Markup {
    if text.len() <= FOLD_BYTES {
        return html! { div class=(class) { (Shown(text)) } };
    }
    let mut cut = FOLDED_START;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let (start, more) = text.split_at(cut);
    html! {
        div class=(class) { (Shown(start)) }
        details.more {
            summary { "…and " (more.len().div_ceil(1024)) " KiB more (" (text.len()) " bytes in all)" }
            div class=(class) { (Shown(more)) }
        }
    }
}

/// The inspector's path of conversation `id`.
pub(crate) fn conversation_path(id: &str) -> String {
    format!("/ui/conversations/{}", utf8_percent_encode(id, SEGMENT))
}

/// `value` percent-encoded for a query string.
pub(crate) fn query_value(value: &str) -> String {
    utf8_percent_encode(value, SEGMENT).to_string()
}

/// Who is looking: the tenant's name (empty without auth) and whether the server has auth
/// (then there is a sign-out button).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Viewer<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) signed_in: bool,
}

pub(super) fn layout(title: &str, viewer: Option<Viewer<'_>>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · chatmem" }
                link rel="stylesheet" href="/ui/assets/ui.css";
                script src="/ui/assets/ui.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/ui" { "chatmem" span.sub { " memory inspector" } }
                    @if let Some(viewer) = viewer {
                        @if !viewer.tenant.is_empty() {
                            span.tenant { "tenant " strong { (viewer.tenant) } }
                        }
                        @if viewer.signed_in {
                            button.link type="button" data-signout { "Sign out" }
                        }
                    }
                }
                main #main tabindex="-1" { (body) }
            }
        }
    }
}

/// One row of the conversation list.
#[derive(Debug, Clone)]
pub(crate) struct ListRow {
    pub(crate) id: String,
    pub(crate) written: u64,
    pub(crate) window_len: usize,
    pub(crate) budget: BudgetBar,
    /// The last commit, in µs since the epoch (0: before the store recorded it).
    pub(crate) updated_micros: i64,
    pub(crate) expires_micros: Option<i64>,
}

/// A time in µs since the epoch as RFC 3339 UTC, to the second; 0 is "not recorded".
pub(super) fn when(micros: i64) -> String {
    match u64::try_from(micros) {
        Ok(micros) if micros > 0 => {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros);
            humantime::format_rfc3339_seconds(at).to_string()
        }
        _ => "not recorded".to_owned(),
    }
}

/// What is left of a TTL, to the second, from `now` (µs since the epoch).
fn left(expires: Option<i64>, now: i64) -> String {
    match expires {
        None => "never".to_owned(),
        Some(at) => {
            let secs = u64::try_from(at.saturating_sub(now) / 1_000_000).unwrap_or(0);
            format!(
                "in {}",
                humantime::format_duration(std::time::Duration::from_secs(secs))
            )
        }
    }
}

/// The conversation list: newest first from the cursor on, filtered by prefix; `now` in µs
/// since the epoch, for the TTLs.
pub(crate) fn list(viewer: Viewer<'_>, rows: &[ListRow], prefix: &str, next: Option<&str>, now: i64) -> Markup {
    let body = html! {
        h1 { "Conversations" }
        form.filter method="get" action="/ui" role="search" {
            label for="prefix" { "Id starts with" }
            input #prefix type="search" name="prefix" value=(prefix) autocomplete="off";
            button type="submit" { "Filter" }
        }
        // A conversation does not name its user: a user's facts are opened by their id.
        form.filter method="get" action=(route::UI_USERS) {
            label for="user" { "A user's facts, by user id" }
            input #user type="search" name="user" autocomplete="off" required;
            button type="submit" { "Show facts" }
        }
        @if rows.is_empty() {
            p.empty { "No conversation" @if !prefix.is_empty() { " starts with " code { (prefix) } } "." }
        } @else {
            table.conversations {
                caption.visually-hidden { "Conversations, the most recently written first" }
                thead { tr {
                    th scope="col" { "Id" } th scope="col" { "Messages written" } th scope="col" { "In the window" }
                    th scope="col" { "Budget used" } th scope="col" { "Last update" } th scope="col" { "Expires" }
                } }
                tbody {
                    @for row in rows {
                        tr {
                            th scope="row" data-label="Id" { a href=(conversation_path(&row.id)) { (Shown(&row.id)) } }
                            td data-label="Messages written" { (row.written) }
                            td data-label="In the window" { (row.window_len) }
                            td data-label="Budget used" { (row.budget.used()) " / " (row.budget.budget) " " (row.budget.unit) }
                            td data-label="Last update" { (when(row.updated_micros)) }
                            td data-label="Expires" { (left(row.expires_micros, now)) }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next {
            nav.pages aria-label="More conversations" {
                a rel="next" href={ "/ui?prefix=" (query_value(prefix)) "&cursor=" (query_value(next)) } { "Next page →" }
            }
        }
    };
    layout("Conversations", Some(viewer), body)
}

/// The history page's place in the conversation: the sequence numbers it shows, and the
/// `from` of the pages before and after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paging {
    pub(crate) first: Option<u64>,
    pub(crate) last: Option<u64>,
    pub(crate) earlier: Option<u64>,
    pub(crate) later: Option<u64>,
}

/// The conversation page's recall panel: the server's recall settings (the defaults when it
/// does not recall), the question asked and what recall found for it.
#[derive(Debug)]
pub(crate) struct RecallPanel {
    /// Whether the server's turns recall.
    pub(crate) enabled: bool,
    pub(crate) k: usize,
    pub(crate) floor: f64,
    pub(crate) budget: usize,
    /// The question ("": none asked).
    pub(crate) q: String,
    /// What recall found for it (`None`: nothing asked).
    pub(crate) found: Option<Recalled>,
    /// The history page the question was asked from, kept when it is asked again.
    pub(crate) from: Option<u64>,
}

/// How much of a hit's text the recall table shows.
const HIT_TEXT_CHARS: usize = 160;

/// One conversation: the system message pinned, the summary where the model sees it, the
/// budget, the prompt, what recall finds for a question, and a page of history with the
/// window marked.
pub(crate) fn conversation(
    viewer: Viewer<'_>,
    id: &str,
    view: &ConversationView,
    prompt: &str,
    recall: &RecallPanel,
    paging: Paging,
    can_write: bool,
) -> Markup {
    let path = conversation_path(id);
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" { a href="/ui" { "Conversations" } " / " }
        h1 { "Conversation " code.id { (Shown(id)) } }
        p.facts {
            (view.written) " messages written · " (view.window_len) " in the window"
            @if let Some(first) = view.window_first { " (from #" (first) ")" }
        }
        (budget_bar(&view.budget))
        @if let Some(eviction) = view.eviction {
            p.eviction {
                "Block eviction: the prompt begins as it does now for " strong { (eviction.headroom) " more " (view.budget.unit) }
                @match eviction.next_start {
                    Some(seq) => { "; then the window start moves to #" (seq) " or later." }
                    None => { "; then the window start moves past every message now stored." }
                }
            }
        }
        details.prompt {
            summary { "Show the prompt" }
            p { "The messages the next model call starts with, as the OpenAI door sends them (the new messages follow them)." }
            button type="button" data-copy="prompt-json" { "Copy" }
            pre #prompt-json { code { (prompt) } }
        }
        (recall_section(&path, recall, paging))
        @if can_write {
            p.actions {
                button.danger type="button" data-delete=(path) data-id=(id) { "Delete this conversation…" }
            }
        }
        section.pinned aria-label="What the model sees first" {
            @if let Some(system) = &view.system {
                h2 { "System message" span.note { " pinned: never evicted, always first" } }
                (message(system, "system"))
            }
            @if let Some(summary) = &view.summary {
                h2 { "Summary" span.note { " the model sees it after the system message" } }
                div.summary {
                    p.covers { "Covers messages #1–#" (summary.upto) " · " (summary.tokens) " tokens" }
                    (text_block("text", &summary.text))
                }
            }
        }
        section.history aria-labelledby="history-title" {
            h2 #history-title { "History" }
            p.legend {
                span.swatch.in-window {} " in the window " span.swatch.summarized {} " covered by the summary " span.swatch.evicted {} " evicted"
            }
            (pages(&path, paging))
            @for unit in &view.units { (unit_markup(unit)) }
            (pages(&path, paging))
        }
    };
    layout(&format!("Conversation {id}"), Some(viewer), body)
}

/// What recall would bring back for a question, and why each message found was or was not.
fn recall_section(path: &str, panel: &RecallPanel, paging: Paging) -> Markup {
    let on_page = |seq: u64| paging.first.is_some_and(|f| f <= seq) && paging.last.is_some_and(|l| seq <= l);
    html! {
        section.recall aria-labelledby="recall-title" {
            h2 #recall-title { "Recall" }
            p.note {
                @if panel.enabled {
                    "Each turn searches the messages that left the window for its new user message and sends the relevant ones just before it: up to "
                    (panel.k) ", at least " (format!("{:.2}", panel.floor)) " relevant, within " (panel.budget) " tokens."
                } @else {
                    "This server's turns do not recall (" code { "chatmem serve --recall K" } " turns it on): a question finds only messages committed while recall was on."
                }
            }
            form.filter method="get" action=(path) role="search" {
                label for="recall-q" { "Question" }
                input #recall-q type="search" name="q" value=(panel.q) autocomplete="off" required;
                @if let Some(from) = panel.from { input type="hidden" name="from" value=(from); }
                button type="submit" { "Show what recall finds" }
            }
            @if let Some(found) = &panel.found {
                @let recalled = found.injected().count();
                p.facts #recall-summary {
                    (found.considered.len()) " found · " (recalled) " recalled"
                    @if found.message.is_some() { " · " (found.tokens) " tokens" }
                }
                @if !found.considered.is_empty() {
                    table.recall {
                        caption.visually-hidden { "The messages the search found, the best first" }
                        thead { tr {
                            th scope="col" { "#" } th scope="col" { "Role" } th scope="col" { "Text" }
                            th scope="col" { "Rank" } th scope="col" { "Score" } th scope="col" { "Relevance" }
                            th scope="col" { "Similarity" } th scope="col" { "Fused" } th scope="col" { "Outcome" }
                        } }
                        tbody {
                            @for hit in &found.considered {
                                tr class={ "hit " (hit.outcome.as_str()) } {
                                    td.num data-label="#" {
                                        @if on_page(hit.seq) { a href={ "#m" (hit.seq) } { "#" (hit.seq) } } @else { "#" (hit.seq) }
                                    }
                                    td.num data-label="Role" { (hit.message.role().as_str()) }
                                    td data-label="Text" { (Shown(&hit_text(hit))) }
                                    td.num data-label="Rank" {
                                        @if hit.lexical_rank > 0 { (hit.lexical_rank) } @else { "—" }
                                        @if let Some(v) = hit.vector_rank { " · v" (v) }
                                    }
                                    td.num data-label="Score" { (format!("{:.3}", hit.score)) }
                                    td.num data-label="Relevance" { (format!("{:.2}", hit.relevance)) }
                                    td.num data-label="Similarity" {
                                        @match hit.similarity { Some(s) => (format!("{s:.3}")), None => "—" }
                                    }
                                    td.num data-label="Fused" { (format!("{:.4}", hit.fused)) }
                                    td data-label="Outcome" { code { (hit.outcome.as_str()) } " " (outcome_words(hit.outcome, panel)) }
                                }
                            }
                        }
                    }
                }
                @match &found.message {
                    Some(message) => {
                        details.recalled open {
                            summary { "What the model would be sent, just before the question (" (found.tokens) " tokens)" }
                            (text_block("text", &message.text().unwrap_or_default()))
                        }
                    }
                    None => p.empty { "Nothing would be recalled: the prompt is what it is without recall." },
                }
            }
        }
    }
}

/// A hit's text, cut to [`HIT_TEXT_CHARS`]; an assistant's calls when it has no text.
fn hit_text(hit: &Considered) -> String {
    let text = match hit.message.text() {
        Some(text) => text.into_owned(),
        None => hit
            .message
            .tool_calls()
            .iter()
            .map(|c| format!("calls {}({})", c.name, c.arguments))
            .collect::<Vec<_>>()
            .join(", "),
    };
    match text.char_indices().nth(HIT_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Why a hit was or was not recalled, in words, with the setting that decided it.
fn outcome_words(outcome: Outcome, panel: &RecallPanel) -> String {
    match outcome {
        Outcome::Injected => "sent just before the question".to_owned(),
        Outcome::BelowThreshold => format!("cut: less relevant than the floor ({:.2})", panel.floor),
        Outcome::PastK => format!("cut: k ({}) more relevant messages recalled", panel.k),
        Outcome::OverBudget => format!("cut: over the token budget ({})", panel.budget),
        Outcome::WithoutItsCall => "cut: a tool result whose call was not found with it".to_owned(),
        _ => "cut".to_owned(),
    }
}

fn pages(path: &str, paging: Paging) -> Markup {
    html! {
        nav.pages aria-label="History pages" {
            @if let Some(from) = paging.earlier { a rel="prev" href={ (path) "?from=" (from) } { "← Earlier" } }
            @if let (Some(first), Some(last)) = (paging.first, paging.last) { span { "#" (first) "–#" (last) } }
            @if let Some(from) = paging.later { a rel="next" href={ (path) "?from=" (from) } { "Later →" } }
        }
    }
}

fn budget_bar(bar: &BudgetBar) -> Markup {
    // Widths in thousandths of the budget (or of what is used, when that is more).
    let scale = bar.budget.max(bar.used()).max(1);
    let width = |n: u64| n * 1000 / scale;
    let parts = [
        ("system", bar.system),
        ("summary", bar.summary),
        ("window", bar.window),
        ("overhead", bar.overhead),
    ];
    let mut x = 0;
    let mut rects = Vec::new();
    for (class, n) in parts {
        let w = width(n);
        rects.push((class, x, w));
        x += w;
    }
    html! {
        figure.budget {
            figcaption {
                strong { (bar.used()) " / " (bar.budget) " " (bar.unit) }
                " used: system " (bar.system) ", summary " (bar.summary) ", window " (bar.window)
                @if bar.overhead > 0 { ", message list " (bar.overhead) }
            }
            svg viewBox="0 0 1000 24" preserveAspectRatio="none" role="img"
                aria-label={ (bar.used()) " of " (bar.budget) " " (bar.unit) " used" } {
                rect.track x="0" y="0" width="1000" height="24" {}
                @for (class, x, w) in rects {
                    rect class=(class) x=(x) y="0" width=(w) height="24" {}
                }
            }
        }
    }
}

fn unit_markup(unit: &Unit) -> Markup {
    if unit.rows.len() == 1 {
        return message(&unit.rows[0], &format!("m{}", unit.rows[0].seq));
    }
    html! {
        section.unit aria-label="A tool call with its results" {
            @for row in &unit.rows { (message(row, &format!("m{}", row.seq))) }
        }
    }
}

/// One message, its element's id `anchor` (`m<seq>`, or `system`).
fn message(row: &Row, anchor: &str) -> Markup {
    let (class, words) = row.place.label();
    let cleared = if row.sent.is_some() { " cleared" } else { "" };
    html! {
        article class={ "msg " (row.role) " " (class) (cleared) } id=(anchor) {
            header {
                // The system message's number is where it was last set: not a place in the log.
                @if row.role != "system" { span.seq { "#" (row.seq) } }
                span.role { (row.role) }
                @if let Some(name) = &row.name { span.name { (Shown(name)) } }
                span.tokens { (row.tokens) " tokens" }
                span.place { (words) @if row.sent.is_some() { ", cleared from the prompt" } }
            }
            @match &row.sent {
                Some(Sent::Placeholder(placeholder)) => {
                    p.sent { "Cleared from the prompt: the model is sent " code { (Shown(placeholder)) } }
                    details.original {
                        summary { "The stored result (" (row.tokens) " tokens)" }
                        (content(row))
                    }
                }
                _ => (content(row)),
            }
            @if row.sent == Some(Sent::NoArguments) {
                p.sent { "Cleared from the prompt: the calls' arguments are sent as " code { "{}" } }
            }
            @if !row.tool_calls.is_empty() {
                ul.calls {
                    @for (id, name, arguments) in &row.tool_calls {
                        li { "calls " code { (Shown(name)) } " with " code { (Shown(arguments)) } span.callid { " (" (Shown(id)) ")" } }
                    }
                }
            }
            @if let Some((id, is_error)) = &row.answers {
                p.answers { "result of call " code { (Shown(id)) } @if *is_error { strong { " (the tool failed)" } } }
            }
            @if let Some(reasoning) = &row.reasoning {
                details.reasoning {
                    summary { "Reasoning, never sent to the model" }
                    (text_block("text", reasoning))
                }
            }
        }
    }
}

/// A message's content pieces.
fn content(row: &Row) -> Markup {
    html! {
        @for piece in &row.content {
            @match piece {
                Piece::Text(text) => (text_block("text", text)),
                Piece::Image(url) => p.image { "image: " code { (url) } },
                Piece::Refusal(text) => { p.refusal { "refusal:" } (text_block("text refusal", text)) },
                Piece::Other(json) => pre.part { code { (json) } },
            }
        }
    }
}

/// The sign-in page of a server with auth.
pub(crate) fn sign_in(message: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Sign in" }
        p { "Paste a bearer token from the server's auth file. It is kept in a cookie for this site only, for 12 hours." }
        form #signin {
            label for="token" { "Token" }
            input #token type="password" name="token" autocomplete="current-password" required;
            button type="submit" { "Sign in" }
        }
        p #signin-error role="alert" { @if let Some(m) = message { (m) } }
    };
    layout("Sign in", None, body)
}

/// An error, as a page: the status, and the one error shape's code, message and request id.
pub(crate) fn error(status: u16, code: &str, message: &str, param: Option<&str>, request_id: &str) -> Markup {
    let body = html! {
        h1 { (status) " " (code) }
        p { (message) }
        @if let Some(param) = param { p.note { "Parameter " code.param { (param) } } }
        p.note { "Request id " code { (request_id) } }
        p { a href="/ui" { "Back to the conversations" } }
    };
    layout(code, None, body)
}
