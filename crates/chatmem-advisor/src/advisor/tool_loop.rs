//! The tool loop of a turn, written once: what each round sends, what an answer means, and
//! what the turn returns — whichever way the answers arrive.

use std::sync::Arc;

use chatmem::{ChatRequest, ChatResponse, Message, SamplingOptions, Store, ToolCall, ToolDefinition, Turn, Usage};

use super::{Answered, Prepared};
use crate::error::Error;
use crate::tools::{ToolExecutor, run_calls};
use crate::turn::{TurnResponse, add_usage};

/// A turn between [`prepare`](super::MemoryAdvisor::prepare) and
/// [`finish`](super::MemoryAdvisor::finish). A driver sends each [`request`](Self::request)
/// to the model, hands the answer to [`on_response`](Self::on_response), runs the tools it
/// asks for, and commits [`into_answered`](Self::into_answered) once it is done; only how
/// an answer is obtained (`complete`, or `stream` joined by a `DeltaAccumulator`) differs.
pub(super) struct TurnLoop<'a, S> {
    /// The turn as prepared: every request starts with its prompt. The generated messages
    /// join it (each counted once) when the turn is answered, so the prompt stays the one
    /// the first request sent.
    turn: Turn<'a, S>,
    /// The turn's new messages (for [`TurnResponse::messages`]).
    new: Vec<Message>,
    /// The model's messages and the tool results, in order: what each request sends after
    /// the prompt.
    generated: Vec<Message>,
    tools: Vec<ToolDefinition>,
    options: SamplingOptions,
    /// Summed over the answers so far.
    usage: Option<Usage>,
    /// Answers so far.
    rounds: usize,
    executor: Option<Arc<dyn ToolExecutor>>,
    max_tool_rounds: usize,
}

/// What a driver does after an answer.
pub(super) enum Step {
    /// Commit: the model gave its final answer (and why it stopped).
    Done(Message, Option<String>),
    /// Run these calls with [`TurnLoop::run_tools`], then send the next request.
    RunTools(Vec<ToolCall>),
}

impl<'a, S: Store> TurnLoop<'a, S> {
    /// The loop of a prepared turn, before its first request.
    pub(super) fn new(
        prepared: Prepared<'a, S>,
        tools: Vec<ToolDefinition>,
        options: SamplingOptions,
        executor: Option<Arc<dyn ToolExecutor>>,
        max_tool_rounds: usize,
    ) -> Self {
        let Prepared { turn, new } = prepared;
        Self {
            turn,
            new,
            generated: Vec::new(),
            tools,
            options,
            usage: None,
            rounds: 0,
            executor,
            max_tool_rounds,
        }
    }

    /// The next model call: the turn's prompt and every generated message, borrowed, with the
    /// turn's tools and options.
    pub(super) fn request(&self) -> ChatRequest<'_> {
        let mut messages = self.turn.prompt();
        messages.extend(&self.generated);
        tracing::trace!(prompt = messages.len(), round = self.rounds + 1, "model request");
        ChatRequest {
            messages,
            tools: self.tools.clone(),
            options: self.options.clone(),
        }
    }

    /// Records an answer (one round); decides whether the turn is done or tools must run.
    ///
    /// # Errors
    /// [`Error::ToolLoopExceeded`] when the model asks for tools once more than allowed.
    pub(super) fn on_response(&mut self, response: ChatResponse) -> Result<Step, Error> {
        self.rounds += 1;
        self.usage = add_usage(self.usage, response.usage);
        let calls = response.message.tool_calls().to_vec();
        self.generated.push(response.message.clone());
        // Without an executor a tool-call answer is the final answer: the caller runs the tools.
        if calls.is_empty() || self.executor.is_none() {
            return Ok(Step::Done(response.message, response.finish_reason));
        }
        if self.rounds > self.max_tool_rounds {
            return Err(Error::ToolLoopExceeded {
                rounds: self.max_tool_rounds,
            });
        }
        Ok(Step::RunTools(calls))
    }

    /// Runs `calls` and adds their results to the prompt and the turn; returns the results.
    pub(super) async fn run_tools(&mut self, calls: &[ToolCall]) -> &[Message] {
        let results = match &self.executor {
            Some(executor) => run_calls(executor.as_ref(), calls).await,
            None => Vec::new(),
        };
        let start = self.generated.len();
        self.generated.extend(results);
        &self.generated[start..]
    }

    /// The turn to commit, `message` being the final answer.
    pub(super) fn into_answered(mut self, message: Message, finish_reason: Option<String>) -> Answered<'a, S> {
        self.turn.extend(self.generated.iter().cloned());
        let response = TurnResponse {
            message,
            messages: self.new.into_iter().chain(self.generated).collect(),
            usage: self.usage,
            finish_reason,
            rounds: self.rounds,
        };
        Answered {
            turn: self.turn,
            response,
        }
    }
}
