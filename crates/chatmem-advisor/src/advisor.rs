//! [`MemoryAdvisor`]: the type and its settings, and the two ends of every turn — preparing
//! the prompt from memory and committing the answer. The turn itself lives in the submodules.

mod call;
mod conversation;
mod stream;
mod tool_loop;

use std::sync::Arc;

use chatmem::{ChatMemory, ChatModel, ConversationId, InMemoryStore, Message, Store, Turn, UserId};

pub use self::conversation::Conversation;
pub use self::stream::TurnStream;
use self::tool_loop::TurnLoop;
use crate::error::Error;
use crate::tools::ToolExecutor;
use crate::turn::{TurnRequest, TurnResponse};

/// The default number of tool rounds a turn may take.
pub const DEFAULT_MAX_TOOL_ROUNDS: usize = 8;

/// When the turn's new messages (the user message) are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// With the answer, in one batch, once the model succeeded (default): a failed call
    /// leaves memory exactly as it was.
    #[default]
    AfterSuccess,
    /// Before the model call, as Spring AI's `MessageChatMemoryAdvisor` does; the answer is
    /// committed after. A failed call leaves the user message stored without an answer; a
    /// retry of the same message does not store it twice (it equals the end of memory, so
    /// it is neither re-added nor sent twice).
    Eager,
}

/// A [`ChatModel`] with conversation memory, in the spirit of a tower layer: it holds the
/// inner model and a [`ChatMemory`], and each call names its conversation explicitly.
///
/// A turn ([`call`](MemoryAdvisor::call) or [`stream`](MemoryAdvisor::stream)):
/// 1. loads the conversation (one store round trip); a system message in the request
///    replaces the stored one if its text differs (committed with the turn);
/// 2. sends the system message, then the window, then the turn's new messages. The window
///    is the one memory will hold once the new messages are added, so the model never sees
///    more than the policy allows; new messages equal to the end of memory are not repeated.
///    With [recall](chatmem::ChatMemoryBuilder::recall), what the store finds for the new
///    user message among the messages that left the window (one more round trip) is sent
///    just before that message;
/// 3. calls the model, running the tool loop if a [`ToolExecutor`] is set (the memory is
///    prepended once; each round appends the tool calls and results);
/// 4. on success commits the whole turn — new messages, tool calls and results, answer —
///    as one atomic batch (retried against concurrent writers, so two turns on one
///    conversation both land, each contiguous);
/// 5. on failure commits nothing (see [`WriteMode::Eager`] for the alternative).
///
/// ```
/// use async_trait::async_trait;
/// use chatmem::{ChatMemory, ChatModel, ChatRequest, ChatResponse, ConversationId, Message, ModelError};
/// use chatmem_advisor::{MemoryAdvisor, TurnRequest};
///
/// /// Answers with the number of messages it was sent.
/// #[derive(Debug)]
/// struct Count;
///
/// #[async_trait]
/// impl ChatModel for Count {
///     async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
///         let n = request.messages.len().to_string();
///         Ok(ChatResponse { message: Message::assistant(n), usage: None, finish_reason: Some("stop".into()) })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let advisor = MemoryAdvisor::new(Count, ChatMemory::in_memory());
/// let id = ConversationId::new("app-user-42-aftersale")?;
/// let first = advisor.call(&id, TurnRequest::user("hi").with_system("be brief")).await?;
/// assert_eq!(first.text(), "2"); // system + user
/// let second = advisor.call(&id, TurnRequest::user("again")).await?;
/// assert_eq!(second.text(), "4"); // system + user + answer + user
/// assert_eq!(advisor.memory().get(&id).await?.len(), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct MemoryAdvisor<M, S = InMemoryStore> {
    model: M,
    memory: ChatMemory<S>,
    write_mode: WriteMode,
    max_tool_rounds: usize,
    executor: Option<Arc<dyn ToolExecutor>>,
}

/// What a turn sends first and what it will commit.
struct Prepared<'a, S> {
    /// The turn planned by the core: its new messages counted once, the loaded window as its
    /// base; its prompt is what each model call starts with.
    turn: Turn<'a, S>,
    /// The turn's new messages (for [`TurnResponse::messages`]).
    new: Vec<Message>,
}

/// What a turn commits once the model answered.
struct Answered<'a, S> {
    /// The whole turn: its new messages (unless already written in eager mode), then every
    /// message it generated.
    turn: Turn<'a, S>,
    /// What the caller gets.
    response: TurnResponse,
}

impl<M: ChatModel, S: Store> MemoryAdvisor<M, S> {
    /// An advisor over `model` and `memory`, writing after success, with no tool executor.
    pub fn new(model: M, memory: ChatMemory<S>) -> Self {
        Self {
            model,
            memory,
            write_mode: WriteMode::default(),
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
            executor: None,
        }
    }

    /// Sets when new messages are written.
    pub fn with_write_mode(mut self, mode: WriteMode) -> Self {
        self.write_mode = mode;
        self
    }

    /// Runs tool calls with `executor`: the model is called again with the results until it
    /// answers without tool calls. Without an executor a tool-call answer ends the turn (and
    /// is committed); the caller may send the results as the next turn's messages.
    pub fn with_tool_executor(mut self, executor: impl ToolExecutor + 'static) -> Self {
        self.executor = Some(Arc::new(executor));
        self
    }

    /// How many rounds of tool calls a turn may run before failing with
    /// [`Error::ToolLoopExceeded`] (default [`DEFAULT_MAX_TOOL_ROUNDS`]).
    pub fn with_max_tool_rounds(mut self, rounds: usize) -> Self {
        self.max_tool_rounds = rounds;
        self
    }

    /// The inner model.
    pub fn get_ref(&self) -> &M {
        &self.model
    }

    /// The inner model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.model
    }

    /// The memory.
    pub fn memory(&self) -> &ChatMemory<S> {
        &self.memory
    }

    /// The write mode.
    pub fn write_mode(&self) -> WriteMode {
        self.write_mode
    }

    /// Drops the memory and returns the inner model.
    pub fn into_inner(self) -> M {
        self.model
    }

    /// The inner model and the memory.
    pub fn into_parts(self) -> (M, ChatMemory<S>) {
        (self.model, self.memory)
    }

    /// Starts a turn: [`prepare`](Self::prepare) (steps 1 and 2), then the tool loop, ready
    /// for its first request.
    async fn begin(&self, id: &ConversationId, request: TurnRequest) -> Result<TurnLoop<'_, S>, Error> {
        let TurnRequest {
            messages,
            tools,
            options,
            user,
        } = request;
        let prepared = self.prepare(id, user.as_ref(), messages).await?;
        Ok(TurnLoop::new(
            prepared,
            tools,
            options,
            self.executor.clone(),
            self.max_tool_rounds,
        ))
    }

    /// Steps 1 and 2: the request checked, the turn begun (which messages are new and the
    /// system message rule are the core turn's), and the eager write. A turn for a user is
    /// begun for them, with their facts.
    async fn prepare(
        &self,
        id: &ConversationId,
        user: Option<&UserId>,
        messages: Vec<Message>,
    ) -> Result<Prepared<'_, S>, Error> {
        chatmem::check_request(&messages).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let begun = match user {
            Some(user) => self.memory.begin_as(id, user).await,
            None => self.memory.begin(id).await,
        };
        let mut turn = begun.map_err(Error::Load)?;
        let skipped = turn.push_unstored(messages);
        // Before the eager write: a failed search leaves memory as it was.
        let recalled = turn.recall().await.map_err(Error::Load)?.injected().count();
        let new: Vec<Message> = turn.messages().filter(|m| !m.is_system()).cloned().collect();
        // No conversation id in these lines: ids are the application's data (a server logs
        // them for every tenant); the caller's span says which request this is.
        tracing::debug!(
            loaded = turn.loaded().snapshot().messages.len(),
            new = new.len(),
            already_stored = skipped,
            recalled,
            "turn prepared"
        );
        if self.write_mode == WriteMode::Eager && !turn.is_empty() {
            turn.checkpoint()
                .await
                .map_err(|source| Error::Commit { source, response: None })?;
        }
        Ok(Prepared { turn, new })
    }

    /// Step 4: one atomic commit of the whole turn.
    async fn finish(&self, answered: Answered<'_, S>) -> Result<TurnResponse, Error> {
        let Answered { turn, response } = answered;
        let count = turn.messages().count();
        match turn.commit().await {
            Ok(_) => {
                tracing::debug!(messages = count, rounds = response.rounds, "turn committed");
                Ok(response)
            }
            Err(source) => {
                tracing::warn!(messages = count, "turn answered but not committed");
                Err(Error::Commit {
                    source,
                    response: Some(Box::new(response)),
                })
            }
        }
    }
}
