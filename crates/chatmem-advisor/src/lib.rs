//! A memory advisor for chatmem: [`MemoryAdvisor`] wraps any [`chatmem::ChatModel`] and a
//! [`chatmem::ChatMemory`] so that each call of a conversation carries that conversation's
//! window, and the whole turn is stored afterwards in one atomic commit.
//!
//! It is for: multi-turn chat where turn 2 ("那单能退吗？") must see turn 1's order number,
//! with conversations isolated by an explicit [`chatmem::ConversationId`] on every call
//! (there is no default id), a tool loop ([`ToolExecutor`]) whose calls and results are
//! stored with the turn, and streaming ([`MemoryAdvisor::stream`]) that stores the answer
//! only once it is complete. A failed model call stores nothing unless
//! [`WriteMode::Eager`] is chosen.
//!
//! It is not: a model client (see `chatmem-openai`), a store (see `chatmem-sqlite`, ...),
//! or a window policy (that is [`chatmem::WindowPolicy`] in the memory). It logs no message
//! text: conversation ids and counts only, at `debug`.
//!
//! ```no_run
//! use chatmem::{ChatMemory, ConversationId, InMemoryStore, WindowPolicy};
//! use chatmem_advisor::{MemoryAdvisor, TurnRequest};
//! use chatmem_openai::Provider;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let memory = ChatMemory::builder(InMemoryStore::new()).policy(WindowPolicy::messages(6)).build()?;
//! let advisor = MemoryAdvisor::new(Provider::DeepSeek.builder().build()?, memory);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! let system = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。";
//! advisor.call(&id, TurnRequest::user("我的订单是 LC202610060018，还没发货。").with_system(system)).await?;
//! let second = advisor.call(&id, TurnRequest::user("那单能退吗？").with_system(system)).await?;
//! println!("{}", second.text()); // names LC202610060018: it came from memory
//! # Ok(()) }
//! ```

mod advisor;
mod error;
mod tools;
mod turn;

pub use crate::advisor::{Conversation, DEFAULT_MAX_TOOL_ROUNDS, MemoryAdvisor, TurnStream, WriteMode};
pub use crate::error::Error;
pub use crate::tools::{ToolError, ToolExecutor};
pub use crate::turn::{TurnEvent, TurnRequest, TurnResponse};
