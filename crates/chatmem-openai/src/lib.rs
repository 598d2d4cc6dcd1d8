//! An OpenAI-compatible chat model for chatmem: [`OpenAiModel`] implements
//! [`chatmem::ChatModel`] for any `/chat/completions` endpoint (OpenAI, DeepSeek, Ollama,
//! vLLM, ...), on top of the async-openai client.
//!
//! What it does: builds requests from chatmem messages (tool calls both ways), reads plain
//! and streamed (SSE) answers into [`chatmem::ChatResponse`] / [`chatmem::ChatDelta`], keeps
//! DeepSeek's `reasoning_content` on the assistant message, and maps HTTP failures to
//! [`chatmem::ModelErrorKind`] (401/403 `Auth`, 429 `RateLimited`, 5xx `Server`, timeouts
//! `Timeout`, connection failures `Unavailable`). 429, 5xx and connection failures are
//! retried a few times first ([`OpenAiModelBuilder::max_retries`]).
//!
//! What it never sends: `reasoning_content` (DeepSeek rejects it in requests and it only
//! costs tokens), chatmem's `metadata`, or a tool result's `is_error` flag or `name`. It logs no
//! message text: requests and answers are logged at `debug` by counts only.
//!
//! For applications that call async-openai themselves, [`convert`] turns a chatmem window
//! into async-openai's request messages (the same messages this client sends) and an answer
//! back into a chatmem message.
//!
//! For a proxy that passes a client's own request through (`chatmem serve`), [`passthrough`]
//! holds one connection pool per upstream and the same conversions, over raw JSON.
//!
//! What it is not: conversation memory. It sends exactly the messages it is given; put a
//! `chatmem-advisor` `MemoryAdvisor` in front of it for memory.
//!
//! ```no_run
//! use chatmem::{ChatModel, ChatRequest, Message};
//! use chatmem_openai::Provider;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // Reads DEEPSEEK_API_KEY; a missing key is an error naming the variable.
//! let model = Provider::DeepSeek.builder().build()?;
//! let answer = model.complete(ChatRequest::new(&[Message::user("你好")])).await?;
//! println!("{}", answer.message.text().unwrap_or_default());
//! # Ok(()) }
//! ```
//!
//! Limitation: async-openai logs, at `error` level, a response body or SSE event that is not
//! valid JSON at all. Answers are requested as raw JSON values and checked here, so a body
//! of the wrong shape is reported without being logged; only non-JSON bodies reach that log.

mod config;
pub mod convert;
mod embedder;
mod error;
mod model;
pub mod passthrough;
mod wire;

/// The async-openai crate whose types [`convert`] speaks, so an application names the same ones.
pub use async_openai;

pub use crate::config::{DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, OpenAiModelBuilder, Provider, UnknownProvider};
pub use crate::embedder::OpenAiEmbedder;
pub use crate::error::ConfigError;
pub use crate::model::OpenAiModel;
