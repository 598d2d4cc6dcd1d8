//! The window: which messages the model sees with each call, and so which a commit keeps.
//!
//! # The contract
//! The window is the system message (if any) first, followed by the longest run of the
//! newest non-system messages such that:
//! - **budget**: [`Budget::Messages`]: system + run ≤ `max`; [`Budget::Tokens`]:
//!   [`PER_LIST`] + tokens(system) + tokens(run) ≤ `max`. The system
//!   message counts but is never evicted; if it alone fills the budget the run is empty.
//! - **turn boundary**: with [`TurnBoundary::User`] (default) the run starts on a user
//!   message, or on an assistant message that opens the conversation (the first message
//!   stored after the system message: a greeting sent before the first question stays in the
//!   window with the turn that follows it, until the budget evicts them); with
//!   [`TurnBoundary::PairSafe`] on any message that is not a tool result.
//! - **tool pairing**: the run holds no tool result whose call is outside it, and no
//!   assistant tool call left unanswered while a later user message exists.
//!
//! Damaged data (a tool result whose call is missing, a call not answered before the next
//! user or assistant message) is [repaired](repair) first by leaving the offending messages
//! out; a call still awaiting results at the very end of the conversation is legitimate and
//! stays.
//! Messages are never split, so a window may hold fewer messages than the budget allows.
//!
//! # Where each part is
//! - [`WindowPolicy`] (with [`Budget`] and [`TurnBoundary`]): the settings the rule reads.
//! - `window/select.rs`: the rule itself, pure: [`repair`], [`select`], and the budget the
//!   system message and the summary take.
//! - `window/loaded.rs`: [`LoadedWindow`], a loaded conversation and the
//!   window chosen from it, the recount of stale token counts
//!   ([`StoredMessage::count_holds_for`](crate::store::StoredMessage::count_holds_for)) and
//!   [block eviction](crate::BlockEviction); the rule run over a loaded log and a turn's new
//!   messages in place.
//! - `window/clear.rs`: [clearing](crate::ClearToolResults) old tool results from the
//!   prompt, pure: which uses a window sends as placeholders, in blocks.
//! - `window/plan.rs`: a turn's plan, the window and the [`Commit`](crate::store::Commit)
//!   that keeps it, made from one run of the rule.
//!
//! ```
//! use chatmem::Message;
//! use chatmem::store::StoredMessage;
//! use chatmem::WindowPolicy;
//! use chatmem::window::select;
//!
//! let msgs: Vec<StoredMessage> = ["u1", "a1", "u2", "a2", "u3"]
//!     .iter()
//!     .enumerate()
//!     .map(|(i, t)| {
//!         let m = if t.starts_with('u') { Message::user(*t) } else { Message::assistant(*t) };
//!         StoredMessage::new(i as u64 + 1, 1, m)
//!     })
//!     .collect();
//! // Two messages fit, but [a2, u3] would start on an answer: the window is [u3].
//! let sel = select(&msgs, None, &WindowPolicy::messages(2), &chatmem::Heuristic);
//! assert_eq!(sel.indices, vec![4]);
//! assert_eq!(sel.start, 4);
//! # Ok::<(), chatmem::Error>(())
//! ```

mod clear;
pub(crate) mod loaded;
mod plan;
mod select;

pub use crate::policy::DEFAULT_MAX_MESSAGES;
#[cfg(doc)]
use crate::policy::{Budget, TurnBoundary, WindowPolicy};
#[cfg(doc)]
use crate::tokens::PER_LIST;
pub use clear::{CLEARED_ARGUMENTS, Cleared, cleared_placeholder};
pub(crate) use loaded::{Chosen, LoadedWindow};
pub(crate) use plan::{Plan, Settings, plan};
pub use select::{Selection, repair, select};
pub(crate) use select::{is_plain, select_known, select_plain, system_slot};
