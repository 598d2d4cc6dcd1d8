//! [`MemoryAdvisor::call`]: a turn driven by [`ChatModel::complete`], answered all at once.

use chatmem::{ChatModel, ConversationId, Store};

use super::MemoryAdvisor;
use super::tool_loop::Step;
use crate::error::Error;
use crate::turn::{TurnRequest, TurnResponse};

impl<M: ChatModel, S: Store> MemoryAdvisor<M, S> {
    /// Runs one turn and commits it; see the type's documentation for the steps.
    ///
    /// # Errors
    /// [`Error`]; only [`Error::Commit`] can follow a successful model call, and it carries
    /// the answer.
    pub async fn call(&self, id: &ConversationId, request: TurnRequest) -> Result<TurnResponse, Error> {
        let mut turn = self.begin(id, request).await?;
        loop {
            let response = self.model.complete(turn.request()).await.map_err(Error::Model)?;
            match turn.on_response(response)? {
                Step::Done(message, finish_reason) => {
                    return self.finish(turn.into_answered(message, finish_reason)).await;
                }
                Step::RunTools(calls) => {
                    turn.run_tools(&calls).await;
                }
            }
        }
    }
}
