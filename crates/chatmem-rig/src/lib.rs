//! chatmem as [rig](https://docs.rs/rig-core/0.44.0)'s conversation memory.
//!
//! [`RigMemory`] implements `rig_core::memory::ConversationMemory` over a
//! [`chatmem::ChatMemory`] on any [`chatmem::Store`] (in memory, SQLite, PostgreSQL, Redis), so a
//! rig agent gets chatmem's windows (message or token budgets, turn-safe eviction, summaries),
//! token counting and durable stores by changing one line: `.memory(RigMemory::new(memory))`
//! in place of rig's in-process `InMemoryConversationMemory`.
//!
//! - `load` returns the window the model sees, system message first (an empty history for an
//!   unknown conversation);
//! - `append` writes the turn's messages as one atomic commit (one [`chatmem::Turn`]): all of
//!   them or none;
//! - `clear` deletes the conversation.
//!
//! rig's conversation id must be a valid [`chatmem::ConversationId`] (1–256 bytes, no control
//! or invisible characters); any other is refused with [`Error::InvalidConversationId`].
//!
//! Messages are converted losslessly ([`to_chatmem`], [`to_rig`]): text, images (URL, or
//! base64 with a media type as a data URL), tool calls and tool results (rig's call id is
//! chatmem's `tool_call_id`). What rig can say and chatmem cannot hold (audio, video,
//! documents, assistant images, opaque provider items, citations, ...) is refused with a
//! typed [`Unsupported`] naming it, and nothing of the batch is stored. See [`convert`] for
//! the whole table.
//!
//! **For**: rig agents that want bounded, durable, shared conversation memory. **Not for**:
//! history shaping in rig (`rig-memory`'s policies and compactors); use chatmem's window
//! policy and summarizer instead, and do not stack both. It does not call models.
//!
//! **rig version**: built against rig-core **0.44** (`~0.44.0`), whose
//! `ConversationMemory` (`load`, `append`, `clear`, since 0.41) it implements. rig-core 0.45
//! and later require rustc 1.97.1, newer than this workspace's 1.95.
//!
//! ```
//! use chatmem::{ChatMemory, InMemoryStore, WindowPolicy};
//! use chatmem_rig::RigMemory;
//! use rig_core::memory::ConversationMemory;
//! use rig_core::message::Message;
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let memory = ChatMemory::builder(InMemoryStore::new()).policy(WindowPolicy::messages(20)).build()?;
//! let memory = RigMemory::new(memory); // rig_agent::AgentBuilder::new(model).memory(memory).conversation(id)
//! let id = "app-user-42-aftersale".into();
//! memory.append(&id, vec![Message::user("我的订单是 LC202610060018，还没发货。")]).await?;
//! assert_eq!(memory.load(&id).await?.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub mod convert;

use std::sync::Arc;

use chatmem::{ChatMemory, ConversationId, InvalidConversationId, Store};
use rig_core::memory::{ConversationMemory, MemoryError};
use rig_core::message::Message;
use rig_core::wasm_compat::WasmBoxedFuture;

pub use convert::{ConvertError, Unreadable, Unsupported, to_chatmem, to_rig};

/// What went wrong in a [`RigMemory`] call. rig receives it as
/// `MemoryError::Backend` with this error as its source (downcast to branch on it).
///
/// ```
/// use rig_core::message::{Message, UserContent};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = chatmem_rig::RigMemory::new(chatmem::ChatMemory::in_memory());
/// let audio = UserContent::audio_url("https://example.invalid/a.mp3", None);
/// let err = memory.append_turn(&"c1".into(), &[Message::from(audio)]).await.unwrap_err();
/// assert!(matches!(err, chatmem_rig::Error::Convert(_)));
/// assert!(memory.load_window(&"c1".into()).await.unwrap().is_empty()); // nothing stored
/// # });
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// rig's conversation id is not a valid chatmem conversation id.
    #[error("rig conversation id is not a valid chatmem conversation id: {0}")]
    InvalidConversationId(#[from] InvalidConversationId),
    /// A message could not be converted; nothing was stored.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// chatmem (its store, a batch limit, contention) failed.
    #[error(transparent)]
    Memory(#[from] chatmem::Error),
}

/// rig's conversation id as a chatmem [`ConversationId`].
///
/// ```
/// let id = chatmem_rig::conversation_id(&"app-user-42-aftersale".into())?;
/// assert_eq!(id.as_str(), "app-user-42-aftersale");
/// assert!(chatmem_rig::conversation_id(&"".into()).is_err());
/// # Ok::<(), chatmem_rig::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidConversationId`] when it is empty, too long or holds a control or
/// invisible character.
pub fn conversation_id(id: &rig_core::id::ConversationId) -> Result<ConversationId, Error> {
    Ok(ConversationId::new(id.as_str())?)
}

/// chatmem as rig's `ConversationMemory`: a [`ChatMemory`] on any store. Cheap to clone
/// (shares the memory).
///
/// ```
/// use chatmem_rig::RigMemory;
/// let memory = RigMemory::new(chatmem::ChatMemory::in_memory());
/// assert_eq!(memory.memory().policy(), &chatmem::WindowPolicy::default());
/// ```
#[derive(Debug)]
pub struct RigMemory<S> {
    memory: Arc<ChatMemory<S>>,
}

impl<S> Clone for RigMemory<S> {
    fn clone(&self) -> Self {
        Self {
            memory: Arc::clone(&self.memory),
        }
    }
}

impl<S: Store> RigMemory<S> {
    /// Wraps `memory`.
    pub fn new(memory: ChatMemory<S>) -> Self {
        Self::from_arc(Arc::new(memory))
    }

    /// Wraps a memory shared with other code (the same windows and store).
    pub fn from_arc(memory: Arc<ChatMemory<S>>) -> Self {
        Self { memory }
    }

    /// The chatmem memory, for what rig's trait does not offer (history, list, policy).
    pub fn memory(&self) -> &Arc<ChatMemory<S>> {
        &self.memory
    }

    /// The window of conversation `id` as rig messages, system first.
    ///
    /// # Errors
    /// [`Error::InvalidConversationId`], [`Error::Memory`] when the store fails,
    /// [`Error::Convert`] when a stored message is one rig cannot hold.
    pub async fn load_window(&self, id: &rig_core::id::ConversationId) -> Result<Vec<Message>, Error> {
        let id = conversation_id(id)?;
        let window = self.memory.get(&id).await?;
        tracing::debug!(conversation = id.as_str(), messages = window.len(), "rig memory load");
        Ok(to_rig(window)?)
    }

    /// Appends `messages` to conversation `id` as one atomic commit (one turn).
    ///
    /// ```
    /// use rig_core::message::Message;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = chatmem_rig::RigMemory::new(chatmem::ChatMemory::in_memory());
    /// let id = "app-user-42-aftersale".into();
    /// let turn = [Message::user("那单能退吗？"), Message::assistant("订单 LC202610060018 未发货，可以退。")];
    /// memory.append_turn(&id, &turn).await?;
    /// assert_eq!(memory.load_window(&id).await?, turn);
    /// # Ok::<(), chatmem_rig::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConversationId`], [`Error::Convert`] (before anything is loaded or
    /// written), [`Error::Memory`] when the commit fails; whatever the error, nothing of
    /// `messages` was stored.
    pub async fn append_turn(&self, id: &rig_core::id::ConversationId, messages: &[Message]) -> Result<(), Error> {
        let id = conversation_id(id)?;
        let messages = to_chatmem(messages)?;
        if messages.is_empty() {
            return Ok(());
        }
        tracing::debug!(
            conversation = id.as_str(),
            messages = messages.len(),
            "rig memory append"
        );
        let mut turn = self.memory.begin(&id).await?;
        turn.extend(messages);
        turn.commit().await?;
        Ok(())
    }

    /// Deletes conversation `id`; returns whether it existed.
    ///
    /// # Errors
    /// [`Error::InvalidConversationId`], [`Error::Memory`] when the store fails.
    pub async fn clear_conversation(&self, id: &rig_core::id::ConversationId) -> Result<bool, Error> {
        let id = conversation_id(id)?;
        Ok(self.memory.clear(&id).await?)
    }
}

impl<S: Store + 'static> ConversationMemory for RigMemory<S> {
    fn load<'a>(
        &'a self,
        conversation_id: &'a rig_core::id::ConversationId,
    ) -> WasmBoxedFuture<'a, Result<Vec<Message>, MemoryError>> {
        Box::pin(async move { self.load_window(conversation_id).await.map_err(MemoryError::backend) })
    }

    fn append<'a>(
        &'a self,
        conversation_id: &'a rig_core::id::ConversationId,
        messages: Vec<Message>,
    ) -> WasmBoxedFuture<'a, Result<(), MemoryError>> {
        Box::pin(async move {
            self.append_turn(conversation_id, &messages)
                .await
                .map_err(MemoryError::backend)
        })
    }

    fn clear<'a>(
        &'a self,
        conversation_id: &'a rig_core::id::ConversationId,
    ) -> WasmBoxedFuture<'a, Result<(), MemoryError>> {
        Box::pin(async move {
            self.clear_conversation(conversation_id)
                .await
                .map(drop)
                .map_err(MemoryError::backend)
        })
    }
}
