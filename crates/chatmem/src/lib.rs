//! Conversation memory for LLM applications: the window of earlier messages sent with each
//! model call.
//!
//! This crate holds the message model, conversation ids, token counting, window policies,
//! the [`Store`] trait, an in-memory store, [`ChatMemory`] and its [`Turn`] — the one way to
//! write: begun for a conversation, planned once, committed by itself. It makes no database
//! or network calls, and calls a model only through the [`ChatModel`] trait (a
//! [`Summarizer`]'s): durable stores live in `chatmem-sqlite`, `chatmem-postgres`,
//! `chatmem-mysql` and `chatmem-redis` (the SQL ones share `chatmem-sql`), an
//! OpenAI-compatible model in `chatmem-openai`, the model call with memory in
//! `chatmem-advisor`, the command line and server in `chatmem-cli` and `chatmem-server`.
//!
//! ```
//! use chatmem::{ChatMemory, ConversationId, Message, WindowPolicy, InMemoryStore};
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let memory = ChatMemory::builder(InMemoryStore::new()).policy(WindowPolicy::messages(6)).build()?;
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::system("你是邻里仓售后。")]).await?;
//! memory.add(&id, [Message::user("我的订单是 LC202610060018，还没发货。"), Message::assistant("已查询。")]).await?;
//! memory.add(&id, [Message::user("那单能退吗？")]).await?;
//! let window = memory.get(&id).await?;
//! assert!(window[0].is_system());
//! assert!(window.iter().any(|m| m.text().unwrap_or_default().contains("LC202610060018")));
//! # Ok::<(), chatmem::Error>(())
//! # }).unwrap();
//! ```

mod commit;
mod counter;
mod embeddings;
mod error;
pub mod facts;
mod id;
mod in_memory_store;
mod json_error;
mod limits;
mod memory;
mod message;
mod model;
mod page;
mod policy;
pub mod printable;
pub mod recall;
mod redact;
mod shared_messages;
mod snapshot;
pub mod store;
mod stored_message;
mod summarizer;
mod summary;
#[cfg(test)]
mod test_support;
pub mod tokens;
mod turn;
pub mod window;

pub use crate::commit::Retention;
pub use crate::counter::{Cl100k, Heuristic, O200k, TokenCounter, Tokenizer};
pub use crate::embeddings::{
    DEFAULT_EMBED_TIMEOUT, DEFAULT_QUERY_WAIT, EMBED_ATTEMPTS, EMBED_BATCH, EmbedFailure, EmbedKind, Embedder,
    EmbeddingEvent, Embeddings,
};
pub use crate::error::{Error, Result};
pub use crate::facts::{Facts, InvalidUserId, UserId};
pub use crate::id::{ConversationId, InvalidConversationId, MAX_ID_BYTES};
pub use crate::in_memory_store::InMemoryStore;
pub use crate::json_error::{JsonFieldError, deserialize_json};
pub use crate::limits::{BatchLimits, DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_BATCH_MESSAGES, TooLarge};
pub use crate::memory::{ChatMemory, ChatMemoryBuilder, DEFAULT_MAX_ATTEMPTS, HistoryPage};
pub use crate::message::{Body, Content, ContentPart, ImageUrl, Message, Metadata, Role, ToolCall, parse_messages};
pub use crate::model::{
    ChatDelta, ChatModel, ChatRequest, ChatResponse, DeltaAccumulator, DeltaStream, ModelError, ModelErrorKind,
    SamplingOptions, ToolCallDelta, ToolDefinition, Usage,
};
pub use crate::page::Page;
pub use crate::policy::{
    Budget, ClearSpec, ClearToolResults, DEFAULT_CLEAR_KEEP, DEFAULT_CLEAR_TRIGGER_TOKENS, MAX_CLEAR_KEEP,
    MAX_EXCLUDED_TOOLS, MAX_TOOL_NAME_BYTES, PolicySpec, TurnBoundary, WindowPolicy,
};
pub use crate::recall::{Recall, Recalled};
pub use crate::store::Store;
pub use crate::summarizer::{DEFAULT_SUMMARY_MAX_TOKENS, DEFAULT_SUMMARY_PROMPT, Summarizer, SummaryOutcome};
pub use crate::summary::{SUMMARY_HEADING, Summary, render_system};
pub use crate::turn::{Committed, Turn, check_request};
pub use crate::window::Cleared;
pub use crate::window::loaded::{BlockEviction, LoadedWindow};
