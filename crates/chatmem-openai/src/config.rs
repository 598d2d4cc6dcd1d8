//! Providers, the builder, and the endpoint configuration handed to async-openai.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use async_openai::config::Config;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use crate::error::ConfigError;
use crate::model::OpenAiModel;

/// The default timeout: see [`OpenAiModelBuilder::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The default number of retries of 429, 5xx and connection failures.
pub const DEFAULT_MAX_RETRIES: usize = 2;

/// A known OpenAI-compatible provider: its base URL, API key variable and default model.
///
/// ```
/// use chatmem_openai::Provider;
/// let p: Provider = "deepseek".parse()?;
/// assert_eq!(p.base_url(), "https://api.deepseek.com");
/// assert_eq!(p.api_key_var(), Some("DEEPSEEK_API_KEY"));
/// assert_eq!(p.default_model(), "deepseek-chat");
/// # Ok::<(), chatmem_openai::UnknownProvider>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// DeepSeek: `https://api.deepseek.com`, key from `DEEPSEEK_API_KEY`, model `deepseek-chat`.
    DeepSeek,
    /// OpenAI: `https://api.openai.com/v1`, key from `OPENAI_API_KEY`, model `gpt-4o-mini`.
    OpenAi,
    /// A local Ollama: `http://localhost:11434/v1`, no key, model `llama3.2`.
    Ollama,
}

impl Provider {
    /// The provider's name as [`FromStr`] accepts it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::DeepSeek => "deepseek",
            Provider::OpenAi => "openai",
            Provider::Ollama => "ollama",
        }
    }

    /// The API base URL (requests go to `{base_url}/chat/completions`).
    pub fn base_url(self) -> &'static str {
        match self {
            Provider::DeepSeek => "https://api.deepseek.com",
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Ollama => "http://localhost:11434/v1",
        }
    }

    /// The environment variable holding the API key; `None` when no key is needed.
    pub fn api_key_var(self) -> Option<&'static str> {
        match self {
            Provider::DeepSeek => Some("DEEPSEEK_API_KEY"),
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Ollama => None,
        }
    }

    /// The model used when none is given.
    pub fn default_model(self) -> &'static str {
        match self {
            Provider::DeepSeek => "deepseek-chat",
            Provider::OpenAi => "gpt-4o-mini",
            Provider::Ollama => "llama3.2",
        }
    }

    /// A builder with this provider's presets.
    pub fn builder(self) -> OpenAiModelBuilder {
        OpenAiModel::builder().provider(self)
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A provider name that is not `deepseek`, `openai` or `ollama`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {0:?}: expected deepseek, openai or ollama")]
pub struct UnknownProvider(pub String);

impl FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "deepseek" => Ok(Provider::DeepSeek),
            "openai" => Ok(Provider::OpenAi),
            "ollama" => Ok(Provider::Ollama),
            _ => Err(UnknownProvider(s.to_string())),
        }
    }
}

/// Where the API key comes from.
#[derive(Clone)]
enum KeySource {
    /// The provider's variable, or none for a custom endpoint.
    Default,
    /// This text.
    Explicit(SecretString),
    /// This environment variable, which must be set.
    Env(String),
    /// No key is sent.
    None,
}

/// Builds an [`OpenAiModel`]; settings are checked by [`build`](OpenAiModelBuilder::build).
///
/// ```
/// use std::time::Duration;
/// use chatmem_openai::{OpenAiModel, Provider};
///
/// let model = OpenAiModel::builder()
///     .base_url("http://127.0.0.1:8080/v1")
///     .model("my-model")
///     .timeout(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(model.model(), "my-model");
///
/// let err = Provider::DeepSeek.builder().api_key_env("CHATMEM_DOC_SURELY_UNSET").build().unwrap_err();
/// assert_eq!(err.to_string(), "CHATMEM_DOC_SURELY_UNSET is not set: the deepseek provider needs an API key");
/// # Ok::<(), chatmem_openai::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct OpenAiModelBuilder {
    provider: Option<Provider>,
    base_url: Option<String>,
    key: KeySource,
    model: Option<String>,
    timeout: Duration,
    max_retries: usize,
}

impl fmt::Debug for OpenAiModelBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key.
        f.debug_struct("OpenAiModelBuilder")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl Default for OpenAiModelBuilder {
    fn default() -> Self {
        Self {
            provider: None,
            base_url: None,
            key: KeySource::Default,
            model: None,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }
}

impl OpenAiModelBuilder {
    /// Uses `provider`'s base URL, key variable and default model (each can be overridden).
    pub fn provider(mut self, provider: Provider) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The API base URL, e.g. `https://api.deepseek.com` or `http://127.0.0.1:8080/v1`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The API key, instead of reading the provider's environment variable.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.key = KeySource::Explicit(SecretString::from(key.into()));
        self
    }

    /// Reads the API key from environment variable `var` at build time; unset is an error.
    pub fn api_key_env(mut self, var: impl Into<String>) -> Self {
        self.key = KeySource::Env(var.into());
        self
    }

    /// Sends no API key (local servers).
    pub fn no_api_key(mut self) -> Self {
        self.key = KeySource::None;
        self
    }

    /// The model name.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The longest wait for the provider (default [`DEFAULT_TIMEOUT`]): for connecting, for
    /// a whole non-streamed answer (retries included), for a stream to start, and between
    /// two streamed pieces. Exceeding it is a [`ModelErrorKind::Timeout`](chatmem::ModelErrorKind::Timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many times a 429, 5xx or connection failure is retried with backoff (honouring
    /// `Retry-After`) before the error is returned; default [`DEFAULT_MAX_RETRIES`].
    pub fn max_retries(mut self, retries: usize) -> Self {
        self.max_retries = retries;
        self
    }

    /// Checks the settings and builds the model.
    ///
    /// # Errors
    /// [`ConfigError`]: no or bad base URL, a missing API key (naming the variable), no
    /// model, a zero timeout, or an API key that cannot be sent as a header.
    pub fn build(self) -> Result<OpenAiModel, ConfigError> {
        let (config, model, timeout, max_retries) = self.parts()?;
        OpenAiModel::from_parts(config, model, timeout, max_retries)
    }

    /// Checks the settings and builds an embedding model on the same endpoint
    /// (`/embeddings`): [`OpenAiEmbedder`](crate::OpenAiEmbedder). The model is the
    /// embedding model's name (a provider's default chat model is not one: name it).
    ///
    /// # Errors
    /// As [`build`](OpenAiModelBuilder::build).
    pub fn build_embedder(self) -> Result<crate::OpenAiEmbedder, ConfigError> {
        let (config, model, timeout, max_retries) = self.parts()?;
        crate::OpenAiEmbedder::from_parts(config, model, timeout, max_retries)
    }

    fn parts(self) -> Result<(EndpointConfig, String, Duration, usize), ConfigError> {
        let provider_name = self.provider.map_or("custom", Provider::name);
        let base = match (&self.base_url, self.provider) {
            (Some(u), _) => u.clone(),
            (None, Some(p)) => p.base_url().to_string(),
            (None, None) => return Err(ConfigError::MissingBaseUrl),
        };
        let base_url = check_base_url(&base)?;
        let key = match self.key {
            KeySource::Explicit(k) => Some(k),
            KeySource::None => None,
            KeySource::Env(var) => Some(read_key(&var, provider_name)?),
            KeySource::Default => match self.provider.and_then(Provider::api_key_var) {
                Some(var) => Some(read_key(var, provider_name)?),
                None => None,
            },
        };
        let auth = match &key {
            Some(k) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {}", k.expose_secret()))
                    .map_err(|_| ConfigError::InvalidApiKey)?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let model = match (self.model, self.provider) {
            (Some(m), _) if !m.trim().is_empty() => m,
            (Some(_), _) | (None, None) => return Err(ConfigError::MissingModel),
            (None, Some(p)) => p.default_model().to_string(),
        };
        if self.timeout.is_zero() {
            return Err(ConfigError::InvalidTimeout);
        }
        let config = EndpointConfig {
            base_url,
            key: key.unwrap_or_else(|| SecretString::from(String::new())),
            auth,
        };
        Ok((config, model, self.timeout, self.max_retries))
    }
}

fn read_key(var: &str, provider: &str) -> Result<SecretString, ConfigError> {
    match std::env::var(var) {
        Ok(k) if !k.trim().is_empty() => Ok(SecretString::from(k.trim().to_string())),
        _ => Err(ConfigError::MissingApiKey {
            var: var.to_string(),
            provider: provider.to_string(),
        }),
    }
}

/// Validates an http(s) base URL and drops a trailing slash. The URL itself is not echoed in
/// errors: it may hold credentials.
pub(crate) fn check_base_url(raw: &str) -> Result<String, ConfigError> {
    let url = reqwest::Url::parse(raw.trim()).map_err(|e| ConfigError::InvalidBaseUrl(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::InvalidBaseUrl(format!(
            "scheme {:?} is not http or https",
            url.scheme()
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::InvalidBaseUrl(
            "it must not have a query or fragment".into(),
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// async-openai's endpoint settings: no environment reads, no panics, no key when none is set.
#[derive(Clone)]
pub(crate) struct EndpointConfig {
    base_url: String,
    key: SecretString,
    auth: Option<HeaderValue>,
}

impl EndpointConfig {
    pub(crate) fn has_key(&self) -> bool {
        self.auth.is_some()
    }
}

impl fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Config for EndpointConfig {
    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = &self.auth {
            h.insert(AUTHORIZATION, a.clone());
        }
        h
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    fn query(&self) -> Vec<(&str, &str)> {
        Vec::new()
    }

    fn api_base(&self) -> &str {
        &self.base_url
    }

    fn api_key(&self) -> &SecretString {
        &self.key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_checked() {
        assert_eq!(check_base_url("http://h:1/v1/").unwrap(), "http://h:1/v1");
        assert!(matches!(check_base_url("ftp://h"), Err(ConfigError::InvalidBaseUrl(_))));
        assert!(matches!(
            check_base_url("not a url"),
            Err(ConfigError::InvalidBaseUrl(_))
        ));
        assert!(matches!(
            check_base_url("http://h/v1?x=1"),
            Err(ConfigError::InvalidBaseUrl(_))
        ));
    }

    #[test]
    fn bad_settings_fail_at_build() {
        assert!(matches!(
            OpenAiModel::builder().model("m").build(),
            Err(ConfigError::MissingBaseUrl)
        ));
        assert!(matches!(
            OpenAiModel::builder().base_url("http://h").build(),
            Err(ConfigError::MissingModel)
        ));
        assert!(matches!(
            OpenAiModel::builder()
                .base_url("http://h")
                .model("m")
                .timeout(Duration::ZERO)
                .build(),
            Err(ConfigError::InvalidTimeout)
        ));
        assert!(matches!(
            OpenAiModel::builder()
                .base_url("http://h")
                .model("m")
                .api_key("a\nb")
                .build(),
            Err(ConfigError::InvalidApiKey)
        ));
        let e = Provider::OpenAi
            .builder()
            .api_key_env("CHATMEM_TEST_SURELY_UNSET_KEY")
            .build()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "CHATMEM_TEST_SURELY_UNSET_KEY is not set: the openai provider needs an API key"
        );
    }

    #[test]
    fn missing_provider_key_names_the_variable() {
        // Only meaningful where the variable is unset; the env cannot be changed safely here.
        if std::env::var_os("DEEPSEEK_API_KEY").is_none() {
            let e = Provider::DeepSeek.builder().build().unwrap_err();
            assert_eq!(
                e.to_string(),
                "DEEPSEEK_API_KEY is not set: the deepseek provider needs an API key"
            );
        }
    }

    #[test]
    fn presets_apply_and_ollama_needs_no_key() {
        let m = Provider::Ollama.builder().build().unwrap();
        assert_eq!(m.base_url(), "http://localhost:11434/v1");
        assert_eq!(m.model(), "llama3.2");
        let m = Provider::DeepSeek.builder().api_key("sk-test").build().unwrap();
        assert_eq!(m.base_url(), "https://api.deepseek.com");
        assert_eq!(m.model(), "deepseek-chat");
        assert!(!format!("{m:?}").contains("sk-test"));
    }
}
