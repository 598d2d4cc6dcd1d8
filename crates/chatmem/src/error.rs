//! The crate's error types: [`Error`] for memory operations, [`StoreError`] for backends.

use std::fmt;

use crate::facts::{FactError, UserId};
use crate::id::{ConversationId, InvalidConversationId};

/// A `Result` with chatmem's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a chatmem operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A conversation id was rejected.
    #[error(transparent)]
    InvalidConversationId(#[from] InvalidConversationId),
    /// JSON input was not a valid array of messages; `path` names the message and field
    /// (`[3].tool_calls[0].id`), or `input` when the whole input was wrong.
    #[error("invalid message at {path}: {reason}")]
    InvalidMessages {
        /// Where: `[index]` and field path, or `input`.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// A window policy or memory setting was out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A store operation on one conversation failed. Names the conversation unless the
    /// store's error already does (each fact is printed once down the chain).
    #[error("{}", store_failed(id, source))]
    Store {
        /// The conversation.
        id: ConversationId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A store operation on one user's [facts](crate::facts) failed (a load, a commit, a
    /// history read, forgetting the user), or the store keeps no facts. Names the user unless
    /// the store's error already does (each fact is printed once down the chain).
    #[error("{}", facts_failed(user, source))]
    Facts {
        /// The user.
        user: UserId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A change by hand to a user's facts broke one of the facts' rules (an unknown fact, a
    /// text that cannot be a fact's, a key another fact has, a pin past the bounds): nothing
    /// was written.
    #[error("the facts of user {user:?} were not changed")]
    FactRefused {
        /// The user.
        user: UserId,
        /// The rule, and the fact.
        #[source]
        source: FactError,
    },
    /// A store operation not tied to one conversation (listing, purging) failed.
    #[error("store failed")]
    StoreGlobal(#[source] StoreError),
    /// A batch is larger than one commit may carry (see
    /// [`ChatMemoryBuilder::max_batch`](crate::ChatMemoryBuilder::max_batch)): nothing was
    /// written. Large histories are imported in several batches.
    #[error(
        "a batch of {messages} messages ({bytes} bytes) is over the limit of {max_messages} messages and {max_bytes} bytes per commit; nothing was written. Import a large history in several batches of at most {max_messages} messages, oldest first"
    )]
    BatchTooLarge {
        /// Messages in the batch.
        messages: usize,
        /// Bytes of text in the batch ([`Message::payload_len`](crate::Message::payload_len)).
        bytes: usize,
        /// The message limit.
        max_messages: usize,
        /// The byte limit.
        max_bytes: usize,
    },
    /// Other writers kept committing to the conversation; the commit was retried and gave up.
    #[error("gave up committing to conversation {id:?} after {attempts} conflicting concurrent writes")]
    TooMuchContention {
        /// The conversation.
        id: ConversationId,
        /// How many attempts were made.
        attempts: u32,
    },
}

fn store_failed(id: &ConversationId, source: &StoreError) -> String {
    if source.conversation().is_some() {
        "store failed".into()
    } else {
        format!("store failed for conversation {id:?}")
    }
}

fn facts_failed(user: &UserId, source: &StoreError) -> String {
    if source.user().is_some() {
        "store failed for a user's facts".into()
    } else {
        format!("store failed for the facts of user {user:?}")
    }
}

impl Error {
    /// The store error behind this error, if any.
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            Error::Store { source, .. } | Error::Facts { source, .. } | Error::StoreGlobal(source) => Some(source),
            _ => None,
        }
    }

    /// Whether trying the same operation again later may succeed: the store lost a version
    /// check or did not answer ([`StoreError::is_transient`]), or other writers kept winning
    /// ([`Error::TooMuchContention`]). Bad input, configuration, corrupt data and oversized
    /// batches fail the same way every time. Every front end (the advisor, the server's
    /// 409/503 answers) asks this rather than deriving its own rule.
    ///
    /// ```
    /// use chatmem::{ConversationId, Error};
    /// use chatmem::store::{StoreError, StoreErrorKind};
    /// let id = ConversationId::new("c1")?;
    /// let down = Error::Store {
    ///     id: id.clone(),
    ///     source: StoreError::new(StoreErrorKind::Unavailable, "connecting"),
    /// };
    /// assert!(down.is_transient());
    /// assert!(Error::TooMuchContention { id, attempts: 8 }.is_transient());
    /// assert!(!Error::InvalidConfig("max_messages must be at least 1".into()).is_transient());
    /// # Ok::<(), chatmem::InvalidConversationId>(())
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            Error::TooMuchContention { .. } => true,
            _ => self.store_error().is_some_and(StoreError::is_transient),
        }
    }
}

/// The class of a [`StoreError`]: callers branch on this, not on the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// A version-checked commit lost to a concurrent writer; reload and retry.
    Conflict,
    /// The backend could not be reached or did not answer in time.
    Unavailable,
    /// Stored data could not be read (bad JSON, unknown role, ...).
    Corrupt,
    /// The database was written by a newer chatmem schema.
    SchemaTooNew,
    /// The caller asked for something the store cannot do.
    InvalidInput,
    /// Anything else.
    Other,
}

/// An error from a [`Store`](crate::Store) backend.
///
/// Carries a [`StoreErrorKind`], a short description, optionally the conversation or the user
/// whose [facts](crate::facts) it is about, and the driver's error as `source`. Its message
/// never repeats its source's: print the chain (each [`source`](std::error::Error::source) in
/// turn) to see everything once.
///
/// ```
/// use chatmem::store::{StoreError, StoreErrorKind};
/// let e = StoreError::new(StoreErrorKind::Unavailable, "connecting to redis://127.0.0.1:6379");
/// assert!(e.is_transient());
/// assert_eq!(e.to_string(), "store unavailable: connecting to redis://127.0.0.1:6379");
/// ```
#[derive(Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    about: Option<About>,
    context: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// What a [`StoreError`] is about: a store operation touches one conversation or one user's
/// facts, never both (and one field for either keeps the error small).
#[derive(Debug)]
enum About {
    Conversation(ConversationId),
    User(UserId),
}

impl StoreError {
    /// An error of `kind` with a short description (no user data in it: it may be logged).
    pub fn new(kind: StoreErrorKind, context: impl Into<String>) -> Self {
        Self {
            kind,
            about: None,
            context: context.into(),
            source: None,
        }
    }

    /// The same error with `source` as its cause.
    pub fn with_source(mut self, source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Stored data of conversation `id` could not be read; `what` names the record (for
    /// example `message seq 9 is not a valid message`). Every store reports unreadable data
    /// this way, so the message always names the conversation.
    ///
    /// ```
    /// use chatmem::ConversationId;
    /// use chatmem::store::{StoreError, StoreErrorKind};
    /// let e = StoreError::corrupt(&ConversationId::new("c1")?, "message seq 9 has no token count");
    /// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
    /// assert_eq!(e.to_string(), "stored data is corrupt: conversation \"c1\": message seq 9 has no token count");
    /// # Ok::<(), chatmem::InvalidConversationId>(())
    /// ```
    pub fn corrupt(id: &ConversationId, what: impl fmt::Display) -> Self {
        Self::new(StoreErrorKind::Corrupt, what.to_string()).for_conversation(id)
    }

    /// The same error, naming conversation `id` in its message (instead of a user, if it
    /// named one).
    pub fn for_conversation(mut self, id: &ConversationId) -> Self {
        self.about = Some(About::Conversation(id.clone()));
        self
    }

    /// The conversation the error names, if any.
    pub fn conversation(&self) -> Option<&ConversationId> {
        match &self.about {
            Some(About::Conversation(id)) => Some(id),
            _ => None,
        }
    }

    /// Stored facts of `user` could not be read; `what` names the record (for example
    /// `fact 3's row holds fact 4`), never what it holds. As
    /// [`corrupt`](StoreError::corrupt) does for a conversation, every store reports
    /// unreadable facts this way, so the message always names the user; the readers in
    /// [`store`](crate::store) (such as [`read_fact`](crate::store::read_fact)) build theirs
    /// with it.
    ///
    /// ```
    /// use chatmem::UserId;
    /// use chatmem::store::{StoreError, StoreErrorKind};
    /// let e = StoreError::facts_corrupt(&UserId::new("ada")?, "fact 3's row holds fact 4");
    /// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
    /// assert_eq!(e.to_string(), "stored data is corrupt: user \"ada\"'s facts: fact 3's row holds fact 4");
    /// # Ok::<(), chatmem::facts::InvalidUserId>(())
    /// ```
    pub fn facts_corrupt(user: &UserId, what: impl fmt::Display) -> Self {
        Self::new(StoreErrorKind::Corrupt, what.to_string()).for_user(user)
    }

    /// The same error, naming `user` (whose facts it is about) in its message (instead of a
    /// conversation, if it named one).
    pub fn for_user(mut self, user: &UserId) -> Self {
        self.about = Some(About::User(user.clone()));
        self
    }

    /// The user whose facts the error is about, if it names one.
    pub fn user(&self) -> Option<&UserId> {
        match &self.about {
            Some(About::User(user)) => Some(user),
            _ => None,
        }
    }

    /// A lost version check.
    pub fn conflict() -> Self {
        Self::new(StoreErrorKind::Conflict, "the conversation changed since it was loaded")
    }

    /// A lost version check of a user's [facts](crate::facts): the same kind as a
    /// conversation's ([`conflict`](StoreError::conflict)), so one retry rule serves both,
    /// saying what changed.
    ///
    /// ```
    /// use chatmem::store::StoreError;
    /// let e = StoreError::facts_conflict();
    /// assert!(e.is_conflict() && e.is_transient());
    /// assert_eq!(e.to_string(), "store conflict: the user's facts changed since they were loaded");
    /// ```
    pub fn facts_conflict() -> Self {
        Self::new(
            StoreErrorKind::Conflict,
            "the user's facts changed since they were loaded",
        )
    }

    /// The class of error.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// The description given when the error was made.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// Whether a commit lost a version check.
    pub fn is_conflict(&self) -> bool {
        self.kind == StoreErrorKind::Conflict
    }

    /// Whether trying again later may succeed (conflicts and outages).
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, StoreErrorKind::Conflict | StoreErrorKind::Unavailable)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            StoreErrorKind::Conflict => "store conflict",
            StoreErrorKind::Unavailable => "store unavailable",
            StoreErrorKind::Corrupt => "stored data is corrupt",
            StoreErrorKind::SchemaTooNew => "store schema is newer than this chatmem",
            StoreErrorKind::InvalidInput => "invalid store request",
            StoreErrorKind::Other => "store error",
        };
        match &self.about {
            Some(About::Conversation(id)) => write!(f, "{what}: conversation {id:?}: {}", self.context),
            Some(About::User(user)) => write!(f, "{what}: user {user:?}'s facts: {}", self.context),
            None => write!(f, "{what}: {}", self.context),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(kind: StoreErrorKind) -> StoreError {
        StoreError::new(kind, "test")
    }

    #[test]
    fn transient_errors_are_conflicts_outages_and_contention() {
        let id = ConversationId::new("c1").expect("a valid id");
        for (kind, transient) in [
            (StoreErrorKind::Conflict, true),
            (StoreErrorKind::Unavailable, true),
            (StoreErrorKind::Corrupt, false),
            (StoreErrorKind::SchemaTooNew, false),
            (StoreErrorKind::InvalidInput, false),
            (StoreErrorKind::Other, false),
        ] {
            assert_eq!(store(kind).is_transient(), transient, "{kind:?}");
            let on_one = Error::Store {
                id: id.clone(),
                source: store(kind),
            };
            assert_eq!(on_one.is_transient(), transient, "{kind:?}");
            assert_eq!(Error::StoreGlobal(store(kind)).is_transient(), transient, "{kind:?}");
            let on_facts = Error::Facts {
                user: UserId::new("u").expect("a valid user id"),
                source: store(kind),
            };
            assert_eq!(on_facts.is_transient(), transient, "{kind:?}");
        }
        assert!(
            Error::TooMuchContention {
                id: id.clone(),
                attempts: 3
            }
            .is_transient()
        );
        for permanent in [
            Error::InvalidConversationId(InvalidConversationId::Empty),
            Error::InvalidMessages {
                path: "[0].role".into(),
                reason: "unknown variant".into(),
            },
            Error::InvalidConfig("x".into()),
            Error::FactRefused {
                user: UserId::new("u").expect("a valid user id"),
                source: FactError::UnknownFact(1),
            },
            Error::BatchTooLarge {
                messages: 2,
                bytes: 2,
                max_messages: 1,
                max_bytes: 1,
            },
        ] {
            assert!(!permanent.is_transient(), "{permanent}");
        }
    }
}
