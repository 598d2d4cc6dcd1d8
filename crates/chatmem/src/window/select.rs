//! The window rule itself, as pure functions over slices of stored messages: [`repair`]
//! leaves damaged tool pairs out, [`select`] chooses the window by the budget, the turn
//! boundary and the tool pairing, and [`system_slot`] is what the system message and the
//! summary take of the budget. No I/O, no state.

use std::borrow::Borrow;
use std::collections::HashMap;

use super::clear::{Clearable, Cleared};
use crate::counter::TokenCounter;
use crate::message::{Body, Message, Role};
use crate::stored_message::StoredMessage;
use crate::summary::{Summary, shown};
use crate::tokens::PER_LIST;

use crate::policy::{Budget, TurnBoundary, WindowPolicy};

/// The outcome of [`select`].
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Index of the first message inside the window; everything before it is evicted.
    /// Equal to the input's length when the run is empty.
    pub start: usize,
    /// Indices of the messages the model sees, in order (repaired messages left out).
    pub indices: Vec<usize>,
    /// What the model is sent instead of the stored message at an index of `indices`
    /// (a [cleared](crate::ClearToolResults) tool result, or a call whose arguments were
    /// cleared), by index, ascending. Empty without clearing.
    pub replaced: Vec<(usize, Message)>,
    /// What the window cleared.
    pub cleared: Cleared,
}

impl Selection {
    /// A window of `indices` as stored, starting at `start`.
    fn uncleared(start: usize, indices: Vec<usize>) -> Self {
        Self {
            start,
            indices,
            replaced: Vec::new(),
            cleared: Cleared::default(),
        }
    }

    /// What the model is sent for the message at `index`: its replacement, if it has one.
    pub fn replacement(&self, index: usize) -> Option<&Message> {
        self.replaced
            .binary_search_by_key(&index, |(i, _)| *i)
            .ok()
            .map(|at| &self.replaced[at].1)
    }
}

/// Marks which messages survive repair.
///
/// A tool call's results must follow it, with only other results of the same message in
/// between (as providers require). `false` marks: a tool result that answers no call of
/// the assistant message just before it (or answers one twice); an assistant message with
/// a call still unanswered when the next user or assistant message arrives, together with
/// the results of its other calls; and system messages, which are not part of the run.
/// Calls still awaiting results at the very end of the conversation are kept.
///
/// ```
/// use chatmem::{Message, ToolCall};
/// use chatmem::store::StoredMessage;
/// let msgs: Vec<StoredMessage> = vec![
///     Message::tool_result("gone", "orphan"),
///     Message::user("q"),
///     Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]),
///     Message::user("never answered: the call above is dropped"),
///     Message::assistant_tool_calls(vec![ToolCall::new("c2", "f", "{}")]), // pending, kept
/// ].into_iter().enumerate().map(|(i, m)| StoredMessage::new(i as u64, 1, m)).collect();
/// assert_eq!(chatmem::window::repair(&msgs), vec![false, true, false, true, true]);
/// ```
pub fn repair<M: Borrow<StoredMessage>>(messages: &[M]) -> Vec<bool> {
    /// The assistant message whose results are arriving: its index and, per call id, the
    /// index of the result that answered it.
    struct Group<'a> {
        assistant: usize,
        calls: Vec<(&'a str, Option<usize>)>,
    }
    fn close(group: Option<Group<'_>>, keep: &mut [bool]) {
        if let Some(g) = group
            && g.calls.iter().any(|(_, r)| r.is_none())
        {
            {
                keep[g.assistant] = false;
                for r in g.calls.iter().filter_map(|(_, r)| *r) {
                    keep[r] = false;
                }
            }
        }
    }
    let mut keep = vec![true; messages.len()];
    let mut group: Option<Group<'_>> = None;
    for (i, stored) in messages.iter().enumerate() {
        let m = &stored.borrow().message;
        match m.role() {
            Role::System | Role::Developer => keep[i] = false,
            Role::User | Role::Assistant => {
                close(group.take(), &mut keep);
                if !m.tool_calls().is_empty() {
                    group = Some(Group {
                        assistant: i,
                        calls: m.tool_calls().iter().map(|c| (c.id.as_str(), None)).collect(),
                    });
                }
            }
            Role::Tool => {
                let id = m.tool_call_id().unwrap_or_default();
                let slot = group
                    .as_mut()
                    .and_then(|g| g.calls.iter_mut().find(|(c, r)| *c == id && r.is_none()));
                match slot {
                    Some((_, answered)) => *answered = Some(i),
                    None => keep[i] = false,
                }
            }
        }
    }
    // A group still open at the very end awaits its results: legitimate, kept.
    keep
}

/// The budget the system slot takes: the system message's tokens plus the summary's; `None`
/// when there is neither (see [`select`]).
pub(crate) fn system_slot(system: Option<&StoredMessage>, summary: Option<&Summary>) -> Option<u32> {
    let summary = shown(summary).map(|s| s.tokens);
    match (system.map(|s| s.tokens), summary) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// Chooses the window over `messages` (the conversation's non-system messages, oldest
/// first) given the system message's token count (`None` when there is none).
///
/// With [block eviction](WindowPolicy::evict_to) `messages` must begin at the stored window
/// start: while they all fit the budget the window keeps that start, otherwise the window is
/// the longest valid run within the low-water mark. With [clearing](WindowPolicy::with_clearing)
/// `messages` must begin there too (the blocks start at the window's first message), and
/// `counter` counts the placeholders; it is read for nothing else.
///
/// Runs in time linear in `messages.len()`, using only the cached token counts (with
/// clearing, linear per start tried; the first start that fits with everything clearable
/// cleared is usually the first one tried).
pub fn select<M: Borrow<StoredMessage>>(
    messages: &[M],
    system_tokens: Option<u32>,
    policy: &WindowPolicy,
    counter: &dyn TokenCounter,
) -> Selection {
    let plain = messages.iter().all(|m| is_plain(&m.borrow().message));
    select_known(messages, system_tokens, policy, counter, plain, true)
}

/// [`select`] when whether every message [is plain](is_plain) is already known (a loaded
/// window knows it without reading its messages), and whether the first message `opens` the
/// conversation (is its first, or the stored window start: see [`suits`]).
pub(crate) fn select_known<M: Borrow<StoredMessage>>(
    messages: &[M],
    system_tokens: Option<u32>,
    policy: &WindowPolicy,
    counter: &dyn TokenCounter,
    plain: bool,
    opens: bool,
) -> Selection {
    debug_assert_eq!(plain, messages.iter().all(|m| is_plain(&m.borrow().message)));
    if plain {
        let tail = tail_sums(messages.len(), |i| messages[i].borrow().tokens, policy);
        let start = select_plain(
            messages.len(),
            |i| messages[i].borrow(),
            tail,
            system_tokens,
            policy,
            opens,
        );
        return Selection::uncleared(start, (start..messages.len()).collect());
    }
    let keep = repair(messages);
    let mut kept: Vec<usize> = (0..messages.len()).filter(|&i| keep[i]).collect();
    let tail = tail_sums(kept.len(), |p| messages[kept[p]].borrow().tokens, policy);
    // While the whole run fits the trigger (and so the budget), nothing is cleared: the uses
    // are not even looked at.
    let whole = fixed_cost(system_tokens) + tail(0);
    let clearable = policy
        .clearing()
        .filter(|c| whole > c.trigger_for(policy.budget()) as u64)
        .map(|c| Clearable::new(messages, &kept, c, policy.budget(), counter))
        .filter(|c| !c.is_empty());
    let start = match &clearable {
        Some(c) if matches!(policy.budget(), Budget::Tokens(_)) => {
            first_fitting_cleared(messages, &kept, &tail, system_tokens, policy, opens, c)
        }
        _ => {
            let first = first_within(kept.len(), &tail, system_tokens, policy);
            first_valid_start(messages, &kept, first, policy.boundary(), opens)
        }
    };
    let Some(p) = start else {
        return Selection::uncleared(messages.len(), Vec::new());
    };
    let (replaced, cleared) = match &clearable {
        Some(c) => c.apply(messages, &kept, p, fixed_cost(system_tokens) + tail(p)),
        None => (Vec::new(), Cleared::default()),
    };
    // The sums borrow `kept`; done with them.
    drop(tail);
    // The window is `kept[p..]`: reuse `kept`'s allocation for it.
    kept.drain(..p);
    Selection {
        start: kept.first().copied().unwrap_or(messages.len()),
        indices: kept,
        replaced,
        cleared,
    }
}

/// What a window costs beyond its messages: the list's priming and the system slot.
fn fixed_cost(system_tokens: Option<u32>) -> u64 {
    PER_LIST as u64 + u64::from(system_tokens.unwrap_or(0))
}

/// The start of a window under a token budget with clearing (`c`): the first valid start whose
/// window fits once every closed block is cleared (the window as sent, not as stored). With
/// block eviction, the run's first valid start while its window fits the budget so, else the
/// first that fits the low-water mark.
fn first_fitting_cleared<M: Borrow<StoredMessage>>(
    messages: &[M],
    kept: &[usize],
    tail: &impl Fn(usize) -> u64,
    system_tokens: Option<u32>,
    policy: &WindowPolicy,
    opens: bool,
    c: &Clearable,
) -> Option<usize> {
    let Budget::Tokens(max) = policy.budget() else {
        return None;
    };
    let n = kept.len();
    let valid = valid_starts(messages, kept, policy.boundary(), opens);
    let fixed = fixed_cost(system_tokens);
    let fits = |p: usize, max: u64| fixed + tail(p) - c.most_saved(p).min(tail(p)) <= max;
    // What every clearable use saves from each position on: a window from a valid start `p`
    // saves at most this, so no start before the first whose lower bound fits can fit.
    let saved = c.savings_from(n);
    let first_fitting = |max: u64| -> Option<usize> {
        if fixed > max {
            return None;
        }
        // `tail(p) - saved[p]` never grows with `p` (each position adds its cost as sent).
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if fixed + tail(mid) - saved[mid].min(tail(mid)) <= max {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        (lo..n).find(|&p| valid[p] && fits(p, max))
    };
    let first = (0..n).find(|&p| valid[p]);
    match (policy.low_water(), first) {
        (Some(_), Some(q)) if fits(q, max as u64) => Some(q),
        (Some(low), _) => first_fitting(low as u64),
        (None, _) => first_fitting(max as u64),
    }
}

/// The token count of a run of `len` messages (counts `tokens(p)`) from position `p` on, as
/// a function of `p`, summed once; 0 everywhere when the budget counts messages (nothing
/// reads it, so nothing is summed).
fn tail_sums(len: usize, tokens: impl Fn(usize) -> u32, policy: &WindowPolicy) -> impl Fn(usize) -> u64 {
    let mut tail = Vec::new();
    if policy.counts_tokens() {
        tail = vec![0; len + 1];
        for p in (0..len).rev() {
            tail[p] = tail[p + 1] + u64::from(tokens(p));
        }
    }
    move |p| tail.get(p).copied().unwrap_or(0)
}

/// [`select`] over a run of `len` [plain](is_plain) messages, the `i`th given by `at(i)`
/// and the token count from position `p` on by `tail(p)`: repair drops none of them and no
/// tool-call pair constrains the start, so nothing is read but a few token sums and the
/// roles from where the budget allows. A planned turn's run is its loaded messages (whose
/// sums the loaded log keeps) followed by its new ones, read in place; `opens` as for
/// [`select_known`]. Returns where the window starts (`len`: empty); it is every message from
/// there on.
pub(crate) fn select_plain<'a>(
    len: usize,
    at: impl Fn(usize) -> &'a StoredMessage,
    tail: impl Fn(usize) -> u64,
    system_tokens: Option<u32>,
    policy: &WindowPolicy,
    opens: bool,
) -> usize {
    let first = first_within(len, tail, system_tokens, policy);
    (first..len)
        .find(|&i| suits(&at(i).message, policy.boundary(), opens && i == 0))
        .unwrap_or(len)
}

/// The earliest position of a run of `len` kept messages where the window may begin by the
/// budget: the run from there on (token count `tail(p)`) fits. With
/// [block eviction](WindowPolicy::evict_to) the run begins at the stored window start: while
/// all of it fits, the start stays; once it overflows, it moves until the window fits the
/// low-water mark.
fn first_within(len: usize, tail: impl Fn(usize) -> u64, system_tokens: Option<u32>, policy: &WindowPolicy) -> usize {
    let first = earliest_within_budget(len, &tail, system_tokens, policy.budget());
    match policy.low_water() {
        Some(low) if first > 0 => {
            let low = match policy.budget() {
                Budget::Messages(_) => Budget::Messages(low),
                Budget::Tokens(_) => Budget::Tokens(low),
            };
            earliest_within_budget(len, &tail, system_tokens, low)
        }
        _ => first,
    }
}

/// A user or assistant message without tool calls: [`repair`] always keeps it, and it opens or
/// closes no tool-call pair.
pub(crate) fn is_plain(m: &Message) -> bool {
    match &m.body {
        Body::User { .. } => true,
        Body::Assistant { tool_calls, .. } => tool_calls.is_empty(),
        Body::System { .. } | Body::Developer { .. } | Body::Tool { .. } => false,
    }
}

/// The smallest position `p` of a run of `len` kept messages such that the run from `p` on
/// (token count `tail(p)`, never growing with `p`) plus the system message fits the budget;
/// `len` when nothing fits. A binary search: a window of any length costs a few reads.
fn earliest_within_budget(
    len: usize,
    tail: &impl Fn(usize) -> u64,
    system_tokens: Option<u32>,
    budget: Budget,
) -> usize {
    match budget {
        Budget::Messages(max) => {
            let room = max.saturating_sub(usize::from(system_tokens.is_some()));
            len.saturating_sub(room)
        }
        Budget::Tokens(max) => {
            let fixed = fixed_cost(system_tokens);
            let max = max as u64;
            if fixed > max {
                return len;
            }
            // The run from `len` on is empty and fits: find the first position that does.
            let (mut lo, mut hi) = (0, len);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if fixed + tail(mid) <= max {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            lo
        }
    }
}

/// The first position `p >= from` in `kept` where the run may start: the message suits the
/// boundary (the first of `messages` as an opening one when `opens`) and no kept tool result
/// at or after it answers a call before it.
fn first_valid_start<M: Borrow<StoredMessage>>(
    messages: &[M],
    kept: &[usize],
    from: usize,
    boundary: TurnBoundary,
    opens: bool,
) -> Option<usize> {
    let valid = valid_starts(messages, kept, boundary, opens);
    (from..kept.len()).find(|&p| valid[p])
}

/// Whether the run may start at each position of `kept`: the message suits the boundary (the
/// first of `messages` as an opening one when `opens`) and no kept tool result at or after it
/// answers a call before it.
fn valid_starts<M: Borrow<StoredMessage>>(
    messages: &[M],
    kept: &[usize],
    boundary: TurnBoundary,
    opens: bool,
) -> Vec<bool> {
    let n = kept.len();
    // Positions inside (call, result] of some pair are not valid starts: a difference array
    // marks those intervals in one pass (allocated only when a kept result answers a call).
    let mut cuts: Vec<i64> = Vec::new();
    // Made at the first tool call: most windows have none.
    let mut call_pos: Option<HashMap<&str, usize>> = None;
    for (p, &i) in kept.iter().enumerate() {
        let m = &messages[i].borrow().message;
        for call in m.tool_calls() {
            call_pos.get_or_insert_with(HashMap::new).insert(call.id.as_str(), p);
        }
        if let Some(id) = m.tool_call_id()
            && let Some(&c) = call_pos.as_ref().and_then(|calls| calls.get(id))
        {
            if cuts.is_empty() {
                cuts = vec![0; n + 1];
            }
            cuts[c + 1] += 1;
            cuts[p + 1] -= 1;
        }
    }
    let mut inside = 0i64;
    (0..n)
        .map(|p| {
            inside += cuts.get(p).copied().unwrap_or(0);
            inside == 0 && suits(&messages[kept[p]].borrow().message, boundary, opens && kept[p] == 0)
        })
        .collect()
}

/// Whether a window may start on `m` by the boundary alone. `opening`: `m` opens the
/// conversation (its first message, or the stored window start, which was a valid start when
/// it was chosen): then an assistant message may start the window under the user boundary
/// too, so a greeting sent before the first user message stays in the window with the turn
/// that follows it, until the budget evicts them together.
fn suits(m: &Message, boundary: TurnBoundary, opening: bool) -> bool {
    match boundary {
        TurnBoundary::User => m.role() == Role::User || (opening && m.role() == Role::Assistant),
        TurnBoundary::PairSafe => m.role() != Role::Tool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    /// Builds messages from a compact notation: `U`, `A`, `T:id[,id]` (assistant calls),
    /// `R:id` (tool result).
    fn conv(spec: &str) -> Vec<StoredMessage> {
        spec.split_whitespace()
            .enumerate()
            .map(|(i, t)| {
                let m = match t.split_once(':') {
                    Some(("T", ids)) => {
                        Message::assistant_tool_calls(ids.split(',').map(|id| ToolCall::new(id, "f", "{}")).collect())
                    }
                    Some(("R", id)) => Message::tool_result(id, "ok"),
                    _ if t.starts_with('U') => Message::user(t),
                    _ if t.starts_with('A') => Message::assistant(t),
                    _ => panic!("bad spec {t}"),
                };
                StoredMessage::new(i as u64, 10, m)
            })
            .collect()
    }

    fn pick(spec: &str, sys: Option<u32>, policy: WindowPolicy) -> Vec<usize> {
        select(&conv(spec), sys, &policy, &crate::Heuristic).indices
    }

    fn msgs(n: usize) -> WindowPolicy {
        WindowPolicy::messages(n)
    }

    /// The plain path of `select` (no tool calls anywhere) starts where the general scan
    /// would, for every sequence of up to 8 user and assistant messages.
    #[test]
    fn the_plain_start_is_the_general_start() {
        for len in 0..=8u32 {
            for bits in 0..(1u32 << len) {
                let spec: Vec<&str> = (0..len).map(|i| if bits >> i & 1 == 1 { "U" } else { "A" }).collect();
                let msgs = conv(&spec.join(" "));
                let kept: Vec<usize> = (0..msgs.len()).collect();
                for (boundary, opens) in [TurnBoundary::User, TurnBoundary::PairSafe]
                    .into_iter()
                    .flat_map(|b| [(b, true), (b, false)])
                {
                    for max in 1..=9 {
                        let policy = WindowPolicy::messages(max).with_boundary(boundary);
                        let first =
                            earliest_within_budget(kept.len(), &|p| (kept.len() - p) as u64, None, policy.budget());
                        let general = first_valid_start(&msgs, &kept, first, boundary, opens);
                        let expected = general.map_or(msgs.len(), |p| kept[p]);
                        let plain = select_known(&msgs, None, &policy, &crate::Heuristic, true, opens).start;
                        assert_eq!(plain, expected, "{spec:?} {policy:?} opens {opens}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_system_slot_adds_the_summary_to_the_system_message() {
        let s = Summary::new("x", 3, &crate::Heuristic);
        let sys = StoredMessage::new(1, 10, Message::system("s"));
        assert_eq!(system_slot(None, None), None);
        assert_eq!(system_slot(Some(&sys), None), Some(10));
        assert_eq!(system_slot(None, Some(&s)), Some(s.tokens));
        assert_eq!(system_slot(Some(&sys), Some(&s)), Some(10 + s.tokens));
    }

    #[test]
    fn count_budget_includes_the_system_message() {
        assert_eq!(pick("U1 A1 U2 A2 U3 A3", Some(1), msgs(5)), vec![2, 3, 4, 5]);
        assert_eq!(pick("U1 A1 U2 A2 U3 A3", None, msgs(5)), vec![2, 3, 4, 5]);
        assert_eq!(pick("U1 A1 U2 A2 U3 A3", None, msgs(6)), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(pick("U1 A1 U2 A2 U3", None, msgs(2)), vec![4]);
        // The system message alone fills the budget: nothing else fits.
        assert_eq!(pick("U1 A1", Some(1), msgs(1)), Vec::<usize>::new());
        assert_eq!(select(&conv("U1 A1"), Some(1), &msgs(1), &crate::Heuristic).start, 2);
    }

    #[test]
    fn token_budget_counts_list_overhead_and_system() {
        // each message costs 10; PER_LIST 3
        assert_eq!(pick("U1 A1 U2 A2", None, WindowPolicy::tokens(43)), vec![0, 1, 2, 3]);
        assert_eq!(pick("U1 A1 U2 A2", None, WindowPolicy::tokens(42)), vec![2, 3]);
        assert_eq!(pick("U1 A1 U2 A2", Some(20), WindowPolicy::tokens(43)), vec![2, 3]);
        assert_eq!(
            pick("U1 A1 U2 A2", Some(41), WindowPolicy::tokens(43)),
            Vec::<usize>::new()
        );
        assert_eq!(pick("U1", Some(100), WindowPolicy::tokens(43)), Vec::<usize>::new());
    }

    #[test]
    fn user_boundary_never_starts_on_an_answer_or_tool_message() {
        // Budget 3 would start at T:a; the run moves forward to U2.
        assert_eq!(pick("U1 T:a R:a A1 U2 A2", None, msgs(4)), vec![4, 5]);
        assert_eq!(pick("U1 T:a R:a A1", None, msgs(3)), Vec::<usize>::new());
    }

    #[test]
    fn pair_safe_starts_on_anything_but_a_result_inside_a_pair() {
        let p = |n| msgs(n).with_boundary(TurnBoundary::PairSafe);
        assert_eq!(pick("U1 T:a R:a A1", None, p(3)), vec![1, 2, 3]);
        assert_eq!(pick("U1 T:a R:a A1", None, p(2)), vec![3]);
        // Two calls, two results: starting between them would orphan R:b.
        assert_eq!(pick("U1 T:a,b R:a R:b A1", None, p(3)), vec![4]);
        assert_eq!(pick("U1 T:a,b R:a R:b A1", None, p(4)), vec![1, 2, 3, 4]);
    }

    #[test]
    fn repair_drops_orphans_and_unanswered_calls() {
        // Orphan result at the start; call `b` answered only in part (`c` unanswered).
        let c = conv("R:x U1 T:b,c R:b U2 A2");
        assert_eq!(repair(&c), vec![false, true, false, false, true, true]);
        assert_eq!(pick("R:x U1 T:b,c R:b U2 A2", None, msgs(20)), vec![1, 4, 5]);
        // A duplicate answer is an orphan.
        assert_eq!(repair(&conv("U T:a R:a R:a A")), vec![true, true, true, false, true]);
        // A result arriving after the next user message does not pair across turns.
        assert_eq!(repair(&conv("U T:a U2 R:a")), vec![true, false, true, false]);
        // Nor after another assistant message: providers reject that order.
        assert_eq!(repair(&conv("U T:a A R:a")), vec![true, false, true, false]);
        assert_eq!(repair(&conv("U T:a,b R:b A")), vec![true, false, false, true]);
    }

    #[test]
    fn pending_call_at_the_end_stays() {
        assert_eq!(pick("U1 A1 U2 T:a", None, msgs(20)), vec![0, 1, 2, 3]);
        assert_eq!(pick("U1 A1 U2 T:a,b R:a", None, msgs(3)), vec![2, 3, 4]);
    }

    /// A conversation's opening assistant messages (a greeting before any user message) may
    /// start the window under the user boundary, and only they: a later answer never does.
    #[test]
    fn an_opening_greeting_stays_with_the_turn_that_follows_it() {
        let none = Vec::<usize>::new();
        assert_eq!(pick("A1", None, msgs(20)), vec![0]);
        assert_eq!(pick("A1 A2", None, msgs(20)), vec![0, 1]);
        assert_eq!(pick("A1 U1 A2", None, msgs(20)), vec![0, 1, 2]);
        assert_eq!(pick("A1 U1 A2", Some(5), msgs(4)), vec![0, 1, 2]);
        // The budget evicts the greeting like any message, on the next valid start.
        assert_eq!(pick("A1 U1 A2", None, msgs(2)), vec![1, 2]);
        assert_eq!(pick("A1 U1 A2", None, msgs(1)), none);
        assert_eq!(pick("A1 A2 U1 A3", None, msgs(3)), vec![2, 3]);
        // Only the first message opens: an answer inside the conversation does not.
        assert_eq!(pick("U1 A1 A2", None, msgs(2)), none);
        // A greeting that calls a tool opens with its results.
        assert_eq!(pick("T:a R:a U1", None, msgs(20)), vec![0, 1, 2]);
        // A result whose call is missing is left out, and opens nothing.
        assert_eq!(pick("R:x A1 U1", None, msgs(20)), vec![2]);
        // Run whose first message does not open the conversation (after an empty window):
        // under the user boundary, no user message means an empty run.
        let not_opening = |spec: &str, policy: WindowPolicy| {
            let c = conv(spec);
            let plain = c.iter().all(|m| is_plain(&m.message));
            select_known(&c, None, &policy, &crate::Heuristic, plain, false).indices
        };
        assert_eq!(not_opening("A1 A2", msgs(20)), none);
        assert_eq!(not_opening("A1 U1 A2", msgs(20)), vec![1, 2]);
        assert_eq!(
            not_opening("A1 A2", msgs(20).with_boundary(TurnBoundary::PairSafe)),
            vec![0, 1]
        );
    }

    #[test]
    fn system_messages_in_the_slice_are_ignored() {
        let mut c = conv("U1 A1");
        c.insert(1, StoredMessage::new(9, 10, Message::system("s")));
        assert_eq!(select(&c, None, &msgs(20), &crate::Heuristic).indices, vec![0, 2]);
    }
}
