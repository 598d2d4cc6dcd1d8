//! [`Conversation`]: a [`MemoryAdvisor`] bound to one conversation, as a [`ChatModel`].

use std::sync::Arc;

use async_trait::async_trait;
use chatmem::{ChatModel, ChatRequest, ChatResponse, ConversationId, ModelError, ModelErrorKind, Store};

use super::MemoryAdvisor;
use crate::error::Error;
use crate::turn::TurnRequest;

impl<M: ChatModel, S: Store> MemoryAdvisor<M, S> {
    /// A [`ChatModel`] bound to conversation `id` (each `complete` is one turn).
    pub fn conversation(self: Arc<Self>, id: ConversationId) -> Conversation<M, S> {
        Conversation { advisor: self, id }
    }
}

/// A [`MemoryAdvisor`] bound to one conversation, usable wherever a [`ChatModel`] is: each
/// `complete` is one turn whose new messages are the request's messages. Its `stream` is
/// the trait's default (the whole answer as one delta); use [`MemoryAdvisor::stream`] to
/// stream.
#[derive(Debug)]
pub struct Conversation<M, S> {
    advisor: Arc<MemoryAdvisor<M, S>>,
    id: ConversationId,
}

impl<M, S> Clone for Conversation<M, S> {
    fn clone(&self) -> Self {
        Self {
            advisor: Arc::clone(&self.advisor),
            id: self.id.clone(),
        }
    }
}

impl<M, S> Conversation<M, S> {
    /// The conversation id.
    pub fn id(&self) -> &ConversationId {
        &self.id
    }
}

#[async_trait]
impl<M: ChatModel, S: Store> ChatModel for Conversation<M, S> {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let turn = TurnRequest {
            messages: request.messages.into_iter().cloned().collect(),
            tools: request.tools,
            options: request.options,
            user: None,
        };
        match self.advisor.call(&self.id, turn).await {
            Ok(t) => Ok(ChatResponse {
                message: t.message,
                usage: t.usage,
                finish_reason: t.finish_reason,
            }),
            Err(Error::Model(e)) => Err(e),
            Err(Error::InvalidRequest(r)) => Err(ModelError::new(ModelErrorKind::InvalidRequest, r)),
            Err(other) => Err(ModelError::new(ModelErrorKind::Other, "conversation memory failed").with_source(other)),
        }
    }
}
