//! Facts: what is known about a user, kept across that user's conversations.
//!
//! Facts belong to a [`UserId`] (a conversation names its user) within a tenant, and never
//! cross either.

mod user_id;

pub use user_id::{InvalidUserId, UserId};
