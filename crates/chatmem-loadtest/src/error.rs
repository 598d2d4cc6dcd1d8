//! [`LoadError`]: why a load test could not run (not what it found: that is the report).

/// Why a load test could not start or finish; errors under load are counted in the
/// [`crate::LoadReport`] instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A setting is out of range; the text names it.
    #[error("invalid load-test setting: {0}")]
    InvalidConfig(String),
    /// The server process could not be started.
    #[error("starting {program}")]
    Spawn {
        /// The program that was run.
        program: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The server started but never said where it listens, or exited first.
    #[error("the server did not come up: {0}")]
    NotUp(String),
    /// Stopping the server failed, or it exited with a failure.
    #[error("stopping the server: {0}")]
    Stop(String),
    /// The HTTP client could not be built.
    #[error("building the HTTP client")]
    Client(#[source] reqwest::Error),
    /// Seeding the conversations failed, so the measured run would only measure errors.
    #[error("seeding conversation {conversation} failed: {reason}")]
    Seed {
        /// The conversation id.
        conversation: String,
        /// The status or transport error.
        reason: String,
    },
    /// The proxy benchmark's loopback upstream could not be started.
    #[error("starting the loopback upstream")]
    Upstream(#[source] std::io::Error),
    /// LiteLLM's proxy could not be started; the text says why, with what it printed.
    #[error("LiteLLM's proxy: {0}")]
    LiteLlm(String),
    /// A background task panicked.
    #[error("a load task failed")]
    Task(#[source] tokio::task::JoinError),
}
