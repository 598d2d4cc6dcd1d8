//! The advisor's [`Error`].

use chatmem::ModelError;

use crate::turn::TurnResponse;

/// What went wrong in a turn. Whatever the variant, memory holds either the whole turn or
/// none of it, except for the user message stored early in [`WriteMode::Eager`](crate::WriteMode::Eager).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The turn request was malformed (no message, or a system message not in first place).
    /// Nothing was loaded or called.
    #[error("invalid turn: {0}")]
    InvalidRequest(String),
    /// Loading the conversation (or the user's facts) failed; the model was not called.
    #[error("loading conversation memory failed")]
    Load(#[source] chatmem::Error),
    /// The model call failed. Memory is unchanged (in eager mode it holds the user message).
    #[error(transparent)]
    Model(ModelError),
    /// Writing to memory failed.
    ///
    /// When the model had answered, `response` holds the whole turn (the answer and every
    /// message that should have been stored) but memory does **not**: the commit is atomic,
    /// so nothing of the turn was written (in eager mode the user message was written
    /// before the call and stays). The caller may show the answer and store the turn later
    /// with `memory().add(id, response.messages)`, or drop it and let the user retry.
    /// `response` is `None` when the early write of eager mode failed, before the model was
    /// called.
    #[error("committing the turn to memory failed")]
    Commit {
        /// The memory error.
        #[source]
        source: chatmem::Error,
        /// The model's answer, when there was one.
        response: Option<Box<TurnResponse>>,
    },
    /// The model kept asking for tools: it still asked after `rounds` rounds of tool calls.
    /// Nothing of the turn was committed.
    #[error("the model still asked for tools after {rounds} rounds")]
    ToolLoopExceeded {
        /// The configured maximum number of tool rounds.
        rounds: usize,
    },
}

impl Error {
    /// The model error, for [`Error::Model`].
    pub fn model_error(&self) -> Option<&ModelError> {
        match self {
            Error::Model(e) => Some(e),
            _ => None,
        }
    }

    /// Whether trying the same turn again later may succeed: the model's
    /// ([`ModelError::is_transient`]) or memory's ([`chatmem::Error::is_transient`]) rule.
    ///
    /// ```
    /// use chatmem::{ModelError, ModelErrorKind};
    /// use chatmem_advisor::Error;
    /// assert!(Error::Model(ModelError::new(ModelErrorKind::RateLimited, "429")).is_transient());
    /// assert!(!Error::InvalidRequest("no message".into()).is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Model(e) => e.is_transient(),
            Error::Load(e) | Error::Commit { source: e, .. } => e.is_transient(),
            _ => false,
        }
    }
}
