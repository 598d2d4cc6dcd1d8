//! [`OpenAiModel`]: the [`ChatModel`] implementation.

use std::fmt;
use std::time::Duration;

use async_openai::Client;
use async_openai::middleware::ReqwestService;
use async_openai::middleware::retry::SimpleRetryPolicy;
use async_trait::async_trait;
use chatmem::{ChatDelta, ChatModel, ChatRequest, ChatResponse, DeltaStream, ModelError, ModelErrorKind};
use futures_util::StreamExt;
use serde_json::Value;
use tower::ServiceBuilder;

use crate::config::{EndpointConfig, OpenAiModelBuilder};
use crate::error::{ConfigError, check_status, map};
use crate::wire;

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint (OpenAI, DeepSeek,
/// Ollama, vLLM, ...), on top of async-openai.
///
/// Build one with [`OpenAiModel::builder`] or [`Provider::builder`](crate::Provider::builder).
/// Cloning is cheap (the HTTP connection pool is shared).
#[derive(Clone)]
pub struct OpenAiModel {
    client: Client<EndpointConfig>,
    model: String,
    base_url: String,
    has_key: bool,
    timeout: Duration,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &if self.has_key { "<redacted>" } else { "<none>" })
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OpenAiModel {
    /// A builder with no provider preset: give at least a base URL and a model.
    pub fn builder() -> OpenAiModelBuilder {
        OpenAiModelBuilder::default()
    }

    pub(crate) fn from_parts(
        config: EndpointConfig,
        model: String,
        timeout: Duration,
        max_retries: usize,
    ) -> Result<Self, ConfigError> {
        let base_url = async_openai::config::Config::api_base(&config).to_string();
        let has_key = config.has_key();
        Ok(Self {
            client: client(config, timeout, max_retries)?,
            model,
            base_url,
            has_key,
            timeout,
        })
    }

    /// The model name sent with every request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The API base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The timeout (see [`OpenAiModelBuilder::timeout`]).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The provider's `GET /models` answer as it came (OpenAI's `{"object": "list", "data":
    /// [...]}`, with whatever fields the provider adds), for a proxy that passes it on. The
    /// model name is not sent. Same timeout, retries and error mapping as a chat call.
    ///
    /// # Errors
    /// A [`ModelError`] with the provider's HTTP status when it answered one.
    pub async fn list_models(&self) -> Result<Value, ModelError> {
        let models = self.client.models();
        let call = models.list_byot::<Value>();
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.timed_out())?
            .map_err(map)
    }

    fn timed_out(&self) -> ModelError {
        ModelError::new(
            ModelErrorKind::Timeout,
            format!("no answer from the provider within {:?}", self.timeout),
        )
    }
}

/// The async-openai client every call of an endpoint goes through: connect timeout, retries
/// of 429, 5xx and connection failures, the status check.
pub(crate) fn client(
    config: EndpointConfig,
    timeout: Duration,
    max_retries: usize,
) -> Result<Client<EndpointConfig>, ConfigError> {
    let http = reqwest::Client::builder()
        .connect_timeout(timeout)
        .build()
        .map_err(ConfigError::Http)?;
    // Retries sit below the status check so a 429/5xx that still fails after them
    // reaches `check_status` with its status intact.
    let service = ServiceBuilder::new()
        .and_then(check_status)
        .retry(SimpleRetryPolicy::new(max_retries))
        .service(ReqwestService::new(http));
    Ok(Client::with_config(config).with_http_service(service))
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let body = wire::request(&self.model, &request, false);
        tracing::debug!(
            model = %self.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "chat completion request"
        );
        let chat = self.client.chat();
        // `Value` rather than a typed response: a body that does not fit the shape is then
        // reported by `wire::response` without async-openai logging it.
        let call = chat.create_byot::<_, Value>(&body);
        let value = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.timed_out())?
            .map_err(map)?;
        let response = wire::response(value)?;
        tracing::debug!(
            model = %self.model,
            finish_reason = response.finish_reason.as_deref().unwrap_or(""),
            tool_calls = response.message.tool_calls().len(),
            "chat completion answered"
        );
        Ok(response)
    }

    async fn stream(&self, request: ChatRequest<'_>) -> Result<DeltaStream, ModelError> {
        let body = wire::request(&self.model, &request, true);
        tracing::debug!(
            model = %self.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "chat completion stream request"
        );
        let chat = self.client.chat();
        let call = chat.create_stream_byot::<_, Value>(&body);
        let inner = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.timed_out())?
            .map_err(map)?;
        let state = StreamState {
            inner,
            idle: self.timeout,
            finished: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(Some(state), next_delta)))
    }
}

struct StreamState {
    inner: async_openai::types::stream::StreamResponse<Value>,
    idle: Duration,
    finished: bool,
}

/// The next delta; ends the stream after the first error. A stream that ends without a
/// `finish_reason` was cut off, and is reported as an error rather than as a short answer.
async fn next_delta(state: Option<StreamState>) -> Option<(Result<ChatDelta, ModelError>, Option<StreamState>)> {
    let mut s = state?;
    loop {
        let item = match tokio::time::timeout(s.idle, s.inner.next()).await {
            Err(_) => {
                let e = ModelError::new(ModelErrorKind::Timeout, format!("the stream stalled for {:?}", s.idle));
                return Some((Err(e), None));
            }
            Ok(item) => item,
        };
        match item {
            None if s.finished => return None,
            None => {
                let e = ModelError::new(ModelErrorKind::Protocol, "the stream ended before the model finished");
                return Some((Err(e), None));
            }
            Some(Err(e)) => return Some((Err(map(e)), None)),
            Some(Ok(v)) => match wire::delta(v) {
                Ok(None) => continue,
                Ok(Some(d)) => {
                    s.finished |= d.finish_reason.is_some();
                    return Some((Ok(d), Some(s)));
                }
                Err(e) => return Some((Err(e), None)),
            },
        }
    }
}
