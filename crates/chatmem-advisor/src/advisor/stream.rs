//! [`MemoryAdvisor::stream`]: a turn driven by [`ChatModel::stream`], delivered as a
//! [`TurnStream`] of deltas, tool results and the committed turn.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use chatmem::{ChatModel, ConversationId, DeltaAccumulator, DeltaStream, ModelError, ModelErrorKind, Store};
use futures_core::Stream;
use futures_util::StreamExt;

use super::MemoryAdvisor;
use super::tool_loop::Step;
use crate::error::Error;
use crate::turn::{TurnEvent, TurnRequest, TurnResponse};

impl<M: ChatModel, S: Store> MemoryAdvisor<M, S> {
    /// Runs one turn, streaming: yields each [`ChatDelta`](chatmem::ChatDelta) as it
    /// arrives, each tool result, and finally [`TurnEvent::Done`] once the turn is committed.
    ///
    /// Memory is loaded and the model stream opened before this returns, so those errors
    /// come from here. The commit happens when the stream is polled past the model's last
    /// delta: a caller that drops the stream before [`TurnEvent::Done`] (or on an error)
    /// commits nothing of the turn (in eager mode the user message was already stored).
    /// Each round's deltas are joined on their own, so an earlier round's tool-call message
    /// is never merged with the final text.
    ///
    /// # Errors
    /// As [`call`](MemoryAdvisor::call).
    pub async fn stream<'a>(&'a self, id: &'a ConversationId, request: TurnRequest) -> Result<TurnStream<'a>, Error> {
        let mut turn = self.begin(id, request).await?;
        let mut deltas: DeltaStream = self.model.stream(turn.request()).await.map_err(Error::Model)?;
        let events = async_stream::stream! {
            loop {
                let mut acc = DeltaAccumulator::default();
                while let Some(item) = deltas.next().await {
                    match item {
                        Ok(delta) => {
                            acc.push(&delta);
                            yield Ok(TurnEvent::Delta(delta));
                        }
                        Err(e) => {
                            yield Err(Error::Model(e));
                            return;
                        }
                    }
                }
                let response = match acc.finish() {
                    Ok(r) => r,
                    Err(e) => {
                        yield Err(Error::Model(e));
                        return;
                    }
                };
                match turn.on_response(response) {
                    Err(e) => {
                        yield Err(e);
                        return;
                    }
                    Ok(Step::Done(message, finish_reason)) => {
                        yield self.finish(turn.into_answered(message, finish_reason)).await.map(TurnEvent::Done);
                        return;
                    }
                    Ok(Step::RunTools(calls)) => {
                        for result in turn.run_tools(&calls).await {
                            yield Ok(TurnEvent::ToolResult(result.clone()));
                        }
                        deltas = match self.model.stream(turn.request()).await {
                            Ok(s) => s,
                            Err(e) => {
                                yield Err(Error::Model(e));
                                return;
                            }
                        };
                    }
                }
            }
        };
        Ok(TurnStream {
            inner: Box::pin(events),
        })
    }
}

/// The stream of one turn; see [`MemoryAdvisor::stream`].
pub struct TurnStream<'a> {
    inner: Pin<Box<dyn Stream<Item = Result<TurnEvent, Error>> + Send + 'a>>,
}

impl fmt::Debug for TurnStream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnStream").finish_non_exhaustive()
    }
}

impl Stream for TurnStream<'_> {
    type Item = Result<TurnEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl TurnStream<'_> {
    /// Drains the stream and returns the committed turn.
    ///
    /// # Errors
    /// The first error the stream yields.
    pub async fn finish(mut self) -> Result<TurnResponse, Error> {
        while let Some(event) = self.next().await {
            if let TurnEvent::Done(turn) = event? {
                return Ok(turn);
            }
        }
        Err(Error::Model(ModelError::new(
            ModelErrorKind::Protocol,
            "the turn stream ended without an answer",
        )))
    }
}
