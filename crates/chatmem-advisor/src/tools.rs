//! [`ToolExecutor`]: runs the tool calls a model asks for.

use std::fmt;

use async_trait::async_trait;
use chatmem::{Message, ToolCall};

/// Runs tools for the advisor's tool loop.
///
/// Given a call's function name and arguments (the JSON text the model wrote, unparsed),
/// return the result text, or a [`ToolError`] whose text the model will read (the result is
/// stored with `is_error: true`). Unknown names should be errors too, so the model can
/// recover.
///
/// ```
/// use async_trait::async_trait;
/// use chatmem_advisor::{ToolError, ToolExecutor};
///
/// #[derive(Debug)]
/// struct OrderStatus;
///
/// #[async_trait]
/// impl ToolExecutor for OrderStatus {
///     async fn execute(&self, name: &str, arguments: &str) -> Result<String, ToolError> {
///         match name {
///             "order_status" => Ok(format!("{{\"shipped\":false,\"query\":{arguments}}}")),
///             other => Err(ToolError::new(format!("unknown tool {other}"))),
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait ToolExecutor: Send + Sync + fmt::Debug {
    /// Runs tool `name` with `arguments`.
    async fn execute(&self, name: &str, arguments: &str) -> Result<String, ToolError>;
}

/// A failed tool call; its text is sent to the model as the call's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// A failure the model will read as `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The text sent to the model.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// Runs every call of one assistant message, concurrently, and returns the tool messages in
/// the order of the calls (providers require each result right after its call's message).
pub(crate) async fn run_calls(executor: &dyn ToolExecutor, calls: &[ToolCall]) -> Vec<Message> {
    let runs = calls.iter().map(|c| async move {
        let result = executor.execute(&c.name, &c.arguments).await;
        tracing::debug!(tool = %c.name, ok = result.is_ok(), "tool call ran");
        match result {
            Ok(text) => Message::tool_result(c.id.clone(), text),
            Err(e) => Message::tool_error(c.id.clone(), e.message),
        }
    });
    futures_util::future::join_all(runs).await
}
