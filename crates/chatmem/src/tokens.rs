//! The token formula: what a message and a list of messages cost, on top of the tokens of
//! the strings they carry (counted by a [`TokenCounter`](crate::TokenCounter)).
//!
//! # The formula
//! A message costs [`PER_MESSAGE`] (3) tokens plus the tokens of every string it carries:
//! its role, its content text (or each text part; each image part costs [`PER_IMAGE`] = 85),
//! its `name` plus [`PER_NAME`] (1), its `tool_call_id`, and each tool call's function name
//! and arguments. Reasoning text and metadata are never sent to a model and cost nothing.
//! A list of messages costs the sum plus [`PER_LIST`] (3) for the reply's priming.
//!
//! Counts are computed once, when a message is added to memory, and stored beside it, so a
//! turn tokenizes only its new messages.

/// Tokens every message costs on top of its strings.
pub const PER_MESSAGE: usize = 3;
/// Tokens a message list costs on top of its messages.
pub const PER_LIST: usize = 3;
/// Extra tokens for a message's `name`.
pub const PER_NAME: usize = 1;
/// Tokens an image part costs.
pub const PER_IMAGE: usize = 85;
