//! Clearing old tool results from the prompt ([`ClearToolResults`]), as a pure function of
//! the window's messages, the settings and a token counter (which counts the placeholders).
//! Nothing is stored and nothing is kept between turns: the same messages give the same
//! prompt.
//!
//! # The rule
//! A *tool use* is a call and the result that answers it. The uses that may be cleared are
//! every use but the `keep` most recent, those of an excluded tool, and those whose result is
//! no longer than its placeholder. Walking them oldest first from the window's first message,
//! they fall into *blocks*: a block closes once its uses save at least `clear_at_least_tokens`
//! (each use is a block when that is 0); a block still open saves too little and is never
//! cleared. The prompt clears the fewest whole blocks, oldest first, that bring the window
//! within `trigger_tokens` (none while it fits uncleared; every closed block when even that is
//! not enough).
//!
//! The blocks start at the window's first message, which stays where it is until the window
//! is evicted; a new turn only adds uses after the others. So while the window start holds,
//! the blocks are the same from turn to turn and the cleared blocks only grow: the prompt's
//! beginning changes only when a block is cleared (or the window start moves), and a
//! provider's prompt cache serves every prompt in between.
//!
//! Under a token budget the window is chosen by what is sent: a start fits when its window,
//! with every closed block cleared, fits the budget (the trigger is never above it, so the
//! blocks the trigger then clears fit too). The window therefore grows into the room clearing
//! frees before anything is evicted.

use std::borrow::Borrow;
use std::collections::HashMap;

use crate::counter::TokenCounter;
use crate::message::{Body, Content, Message};
use crate::policy::{Budget, ClearToolResults};
use crate::stored_message::StoredMessage;

/// The arguments a cleared call is sent with, when its inputs are cleared too: an empty JSON
/// object, which every provider accepts as a call's arguments.
pub const CLEARED_ARGUMENTS: &str = "{}";

/// The content a cleared tool result is sent with: the tool, the call it answers and its size.
///
/// ```
/// assert_eq!(
///     chatmem::window::cleared_placeholder("get_order", "call_7", 1834),
///     "[cleared: get_order result for call call_7, 1834 tokens]"
/// );
/// ```
pub fn cleared_placeholder(tool: &str, call_id: &str, tokens: u32) -> String {
    format!("[cleared: {tool} result for call {call_id}, {tokens} tokens]")
}

/// What a prompt cleared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleared {
    /// Tool results sent as placeholders.
    pub results: usize,
    /// Calls sent with their arguments cleared.
    pub inputs: usize,
    /// The tokens the window would cost uncleared, less what it costs as sent.
    pub tokens_saved: u64,
}

impl Cleared {
    /// Whether nothing was cleared.
    pub fn is_empty(&self) -> bool {
        self.results == 0
    }
}

/// A use that may be cleared, by positions in the run of kept messages.
#[derive(Debug, Clone, Copy)]
struct Use {
    /// The assistant message that calls, and which of its calls.
    call: usize,
    call_index: usize,
    /// The result.
    result: usize,
    /// Tokens saved by the result's placeholder, and by the call's cleared arguments.
    result_saving: u32,
    input_saving: u32,
}

impl Use {
    fn saving(&self) -> u64 {
        u64::from(self.result_saving) + u64::from(self.input_saving)
    }
}

/// The uses of a run that may be cleared, oldest first, with what clearing each saves.
#[derive(Debug)]
pub(crate) struct Clearable {
    uses: Vec<Use>,
    block: u64,
    trigger: u64,
    clear_inputs: bool,
}

impl Clearable {
    /// The uses of `messages[kept[..]]` that `clear` may clear, their savings counted by
    /// `counter` (the placeholders; the arguments when inputs are cleared). Each message's own
    /// count is its cached one.
    pub(crate) fn new<M: Borrow<StoredMessage>>(
        messages: &[M],
        kept: &[usize],
        clear: &ClearToolResults,
        budget: Budget,
        counter: &dyn TokenCounter,
    ) -> Self {
        let at = |p: usize| messages[kept[p]].borrow();
        // Every use, in the order of its result: the newest `keep` are left out below.
        let mut all: Vec<(usize, usize, usize)> = Vec::new();
        let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
        for p in 0..kept.len() {
            let m = &at(p).message;
            for (i, call) in m.tool_calls().iter().enumerate() {
                calls.insert(call.id.as_str(), (p, i));
            }
            if let Some(id) = m.tool_call_id()
                && let Some(&(call, index)) = calls.get(id)
            {
                all.push((call, index, p));
            }
        }
        let clearable = all.len().saturating_sub(clear.keep());
        let mut uses: Vec<Use> = Vec::new();
        // What the cleared arguments of one assistant message save, capped at its count.
        let mut input_room: HashMap<usize, u32> = HashMap::new();
        for &(call, call_index, result) in &all[..clearable] {
            let assistant = at(call);
            let Some(tool_call) = assistant.message.tool_calls().get(call_index) else {
                continue;
            };
            if clear.excludes(&tool_call.name) {
                continue;
            }
            let stored = at(result);
            let sent = cleared_result(&stored.message, &tool_call.name, stored.tokens);
            let result_saving = stored.tokens.saturating_sub(count(counter, &sent));
            // A result no longer than its placeholder stays whole, and so do its call's inputs.
            if result_saving == 0 {
                continue;
            }
            let mut input_saving = 0;
            if clear.clears_inputs() && tool_call.arguments != CLEARED_ARGUMENTS {
                let room = input_room.entry(call).or_insert(assistant.tokens);
                let args = count_text(counter, &tool_call.arguments);
                let saving = args.saturating_sub(count_text(counter, CLEARED_ARGUMENTS)).min(*room);
                *room -= saving;
                input_saving = saving;
            }
            uses.push(Use {
                call,
                call_index,
                result,
                result_saving,
                input_saving,
            });
        }
        Self {
            uses,
            block: clear.block_tokens() as u64,
            trigger: clear.trigger_for(budget) as u64,
            clear_inputs: clear.clears_inputs(),
        }
    }

    /// Whether nothing can be cleared.
    pub(crate) fn is_empty(&self) -> bool {
        self.uses.is_empty()
    }

    /// What clearing every use saves, attributed to positions (the result's saving at the
    /// result, the arguments' at the call), as sums from each position `p` on (`len + 1`
    /// entries): for a window starting at `p` on a valid start, at least what its closed
    /// blocks save.
    pub(crate) fn savings_from(&self, len: usize) -> Vec<u64> {
        let mut at = vec![0u64; len + 1];
        for u in &self.uses {
            at[u.result] += u64::from(u.result_saving);
            at[u.call] += u64::from(u.input_saving);
        }
        for p in (0..len).rev() {
            at[p] += at[p + 1];
        }
        at
    }

    /// The uses inside a window starting at `p`: those whose call is at or after it.
    fn first_inside(&self, p: usize) -> usize {
        self.uses.partition_point(|u| u.call < p)
    }

    /// The closed blocks of a window starting at `p`: the index past each block's last use
    /// and what the blocks up to it save.
    fn blocks(&self, p: usize) -> impl Iterator<Item = (usize, u64)> + '_ {
        let first = self.first_inside(p);
        let mut total = 0u64;
        let mut open = 0u64;
        (first..self.uses.len()).filter_map(move |i| {
            open += self.uses[i].saving();
            (open >= self.block).then(|| {
                total += std::mem::take(&mut open);
                (i + 1, total)
            })
        })
    }

    /// What clearing every closed block of a window starting at `p` saves.
    pub(crate) fn most_saved(&self, p: usize) -> u64 {
        self.blocks(p).last().map_or(0, |(_, saved)| saved)
    }

    /// What a window starting at `p` clears, costing `uncleared` tokens as stored: the fewest
    /// closed blocks that bring it within the trigger (all of them when none do).
    fn clearing(&self, p: usize, uncleared: u64) -> (std::ops::Range<usize>, u64) {
        let first = self.first_inside(p);
        if uncleared <= self.trigger {
            return (first..first, 0);
        }
        let mut upto = (first, 0);
        for (end, saved) in self.blocks(p) {
            upto = (end, saved);
            if uncleared - saved.min(uncleared) <= self.trigger {
                break;
            }
        }
        (first..upto.0, upto.1)
    }

    /// The messages a window starting at `p` (costing `uncleared` tokens as stored) is sent
    /// instead of stored ones, by index in `messages`, ascending, and what that clears.
    pub(crate) fn apply<M: Borrow<StoredMessage>>(
        &self,
        messages: &[M],
        kept: &[usize],
        p: usize,
        uncleared: u64,
    ) -> (Vec<(usize, Message)>, Cleared) {
        let (range, saved) = self.clearing(p, uncleared);
        let uses = &self.uses[range];
        let mut replaced: Vec<(usize, Message)> = Vec::with_capacity(uses.len() * 2);
        let mut inputs = 0;
        // The copy of the assistant message whose calls are being cleared: its index in
        // `messages` and in `replaced` (the uses of one message are next to each other).
        let mut copy: Option<(usize, usize)> = None;
        for u in uses {
            let assistant = &messages[kept[u.call]].borrow().message;
            let Some(call) = assistant.tool_calls().get(u.call_index) else {
                continue;
            };
            if self.clear_inputs && u.input_saving > 0 {
                let index = kept[u.call];
                let at = match copy {
                    Some((i, at)) if i == index => at,
                    _ => {
                        replaced.push((index, Message::clone(assistant)));
                        copy = Some((index, replaced.len() - 1));
                        replaced.len() - 1
                    }
                };
                if let Body::Assistant { tool_calls, .. } = &mut replaced[at].1.body
                    && let Some(c) = tool_calls.get_mut(u.call_index)
                {
                    c.arguments = CLEARED_ARGUMENTS.to_owned();
                    inputs += 1;
                }
            }
            let stored = messages[kept[u.result]].borrow();
            replaced.push((
                kept[u.result],
                cleared_result(&stored.message, &call.name, stored.tokens),
            ));
        }
        replaced.sort_by_key(|(i, _)| *i);
        let cleared = Cleared {
            results: uses.len(),
            inputs,
            tokens_saved: saved,
        };
        (replaced, cleared)
    }
}

/// The tool result `m` as sent cleared: the same role, `tool_call_id`, error flag and name,
/// the placeholder as content, no metadata (which is never sent).
fn cleared_result(m: &Message, tool: &str, tokens: u32) -> Message {
    let (tool_call_id, is_error) = match &m.body {
        Body::Tool {
            tool_call_id, is_error, ..
        } => (tool_call_id.clone(), *is_error),
        _ => (String::new(), false),
    };
    Message {
        body: Body::Tool {
            content: Content::Text(cleared_placeholder(tool, &tool_call_id, tokens)),
            tool_call_id,
            is_error,
        },
        name: m.name.clone(),
        metadata: None,
    }
}

fn count(counter: &dyn TokenCounter, m: &Message) -> u32 {
    u32::try_from(counter.count_message(m)).unwrap_or(u32::MAX)
}

fn count_text(counter: &dyn TokenCounter, text: &str) -> u32 {
    u32::try_from(counter.count_text(text)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Heuristic;
    use crate::message::ToolCall;
    use crate::policy::WindowPolicy;
    use crate::window::select;

    /// A turn per tool: a user message, one call of the tool whose result is 400 bytes, an
    /// answer; counted by the heuristic.
    fn conv(tools: &[&str]) -> Vec<StoredMessage> {
        let mut out = Vec::new();
        for (t, tool) in tools.iter().enumerate() {
            let id = format!("c{t}");
            out.push(Message::user(format!("u{t}")));
            out.push(Message::assistant_tool_calls(vec![ToolCall::new(
                &id,
                *tool,
                "{\"q\":1}",
            )]));
            out.push(Message::tool_result(&id, "r".repeat(400)));
            out.push(Message::assistant(format!("a{t}")));
        }
        out.into_iter()
            .enumerate()
            .map(|(i, m)| StoredMessage::new(i as u64 + 1, count(&Heuristic, &m), m))
            .collect()
    }

    /// The window's tokens as stored.
    fn whole(msgs: &[StoredMessage]) -> usize {
        3 + msgs.iter().map(|m| m.tokens as usize).sum::<usize>()
    }

    fn cleared_calls(sel: &crate::window::Selection, msgs: &[StoredMessage]) -> Vec<String> {
        sel.replaced
            .iter()
            .filter_map(|(i, _)| msgs[*i].message.tool_call_id().map(str::to_owned))
            .collect()
    }

    fn saving(msgs: &[StoredMessage], result: usize, tool: &str) -> u64 {
        let m = &msgs[result];
        let sent = cleared_result(&m.message, tool, m.tokens);
        u64::from(m.tokens - count(&Heuristic, &sent))
    }

    #[test]
    fn the_fewest_whole_blocks_oldest_first_bring_the_window_within_the_trigger() {
        let msgs = conv(&["f"; 5]);
        let n = whole(&msgs);
        let saving = saving(&msgs, 2, "f");
        let policy = |trigger: usize, block: usize| {
            let clear = ClearToolResults::new(1)
                .unwrap()
                .trigger_tokens(trigger)
                .clear_at_least_tokens(block);
            WindowPolicy::tokens(2000).with_clearing(clear).unwrap()
        };
        // Within the trigger: nothing.
        let sel = select(&msgs, None, &policy(n, 0), &Heuristic);
        assert!(sel.cleared.is_empty() && sel.replaced.is_empty());
        // One token over: the oldest use alone.
        let sel = select(&msgs, None, &policy(n - 1, 0), &Heuristic);
        assert_eq!(cleared_calls(&sel, &msgs), ["c0"]);
        assert_eq!(sel.cleared.tokens_saved, saving);
        // Blocks of two uses: the same overflow clears the first block whole.
        let sel = select(&msgs, None, &policy(n - 1, saving as usize + 1), &Heuristic);
        assert_eq!(cleared_calls(&sel, &msgs), ["c0", "c1"]);
        // The newest use (keep 1) is never cleared, nor an open block: c0..c3 make two blocks.
        let block = saving as usize + 1;
        let sel = select(&msgs, None, &policy(block, block), &Heuristic);
        assert_eq!(cleared_calls(&sel, &msgs), ["c0", "c1", "c2", "c3"]);
        let block = 3 * saving as usize;
        let sel = select(&msgs, None, &policy(block, block), &Heuristic);
        assert_eq!(cleared_calls(&sel, &msgs), ["c0", "c1", "c2"]);
        assert_eq!(sel.cleared.results, 3);
        assert_eq!(sel.indices, (0..msgs.len()).collect::<Vec<_>>(), "every message stays");
    }

    #[test]
    fn excluded_tools_and_inputs() {
        let msgs = conv(&["get_policy", "get_order", "get_order"]);
        let clear = ClearToolResults::new(1)
            .unwrap()
            .trigger_tokens(0)
            .exclude_tool("get_policy")
            .clear_inputs(true);
        let policy = WindowPolicy::tokens(2000).with_clearing(clear).unwrap();
        let sel = select(&msgs, None, &policy, &Heuristic);
        assert_eq!(cleared_calls(&sel, &msgs), ["c1"]);
        // The call's copy, then the result: the assistant at 5, the result at 6.
        let indices: Vec<usize> = sel.replaced.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, [5, 6]);
        assert_eq!(sel.replaced[0].1.tool_calls()[0].arguments, CLEARED_ARGUMENTS);
        let placeholder = format!("[cleared: get_order result for call c1, {} tokens]", msgs[6].tokens);
        assert_eq!(sel.replaced[1].1.text().as_deref(), Some(placeholder.as_str()));
        assert_eq!(sel.cleared.inputs, 1);
        let sent: u64 = sel
            .indices
            .iter()
            .map(|&i| {
                sel.replacement(i)
                    .map_or(u64::from(msgs[i].tokens), |m| u64::from(count(&Heuristic, m)))
            })
            .sum();
        let stored: u64 = msgs.iter().map(|m| u64::from(m.tokens)).sum();
        // The result's placeholder and the arguments: `{"q":1}` is 2 tokens by the heuristic, `{}` 1.
        assert_eq!(stored - sent, sel.cleared.tokens_saved);
        assert_eq!(sel.cleared.tokens_saved, saving(&msgs, 6, "get_order") + 1);
    }

    #[test]
    fn under_a_token_budget_the_window_grows_into_what_clearing_frees() {
        let msgs = conv(&["f"; 6]);
        let turn = whole(&msgs[..4]) - 3;
        // Three turns and a half fit uncleared.
        let budget = 3 + turn * 7 / 2;
        let plain = select(&msgs, None, &WindowPolicy::tokens(budget), &Heuristic);
        assert_eq!(plain.indices.len(), 12, "3 turns fit uncleared");
        let clear = ClearToolResults::new(1).unwrap();
        let policy = WindowPolicy::tokens(budget).with_clearing(clear).unwrap();
        let cleared = select(&msgs, None, &policy, &Heuristic);
        assert_eq!(cleared.indices.len(), 24, "all 6 fit with results cleared");
        // The fewest: each saves `saving`, and 6 turns must lose 2.5 turns' tokens.
        let over = whole(&msgs) - budget;
        let fewest = over.div_ceil(saving(&msgs, 2, "f") as usize);
        assert_eq!(cleared.cleared.results, fewest);
        assert!(fewest < 5);
    }
}
