//! A facts model for tests: [`FactsModel`] answers each extraction call by a script (canned
//! JSON, a failure, or never) and records what it was asked, so a test can check what a
//! [`chatmem::facts::FactExtractor`] showed it. It speaks [`chatmem::ChatModel`] only; an HTTP
//! test uses a loopback server instead.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use chatmem::{ChatModel, ChatRequest, ChatResponse, Message, ModelError, ModelErrorKind};

/// What [`FactsModel`] does with one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scripted {
    /// Answers this text.
    Answer(String),
    /// Fails with this kind.
    Fail(ModelErrorKind),
    /// Never answers (a hung provider): the caller's timeout ends the call.
    Hang,
}

/// One call as [`FactsModel`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactsRequest {
    /// The system message's text (the instructions).
    pub system: String,
    /// The last message's text (the known facts and the numbered messages).
    pub input: String,
    /// Whether the request asked for one JSON object.
    pub json_object: bool,
    /// The answer's token cap asked for.
    pub max_tokens: Option<u32>,
}

impl FactsRequest {
    /// The sequence numbers of the messages shown (`#12 user: …` lines), in order, repeats
    /// kept once.
    ///
    /// ```
    /// let r = chatmem_test::FactsRequest {
    ///     system: String::new(),
    ///     input: "Known facts about the user:\n(none)\n\nMessages:\n#3 user: hi\n#4 assistant: hello".into(),
    ///     json_object: true,
    ///     max_tokens: None,
    /// };
    /// assert_eq!(r.shown_seqs(), [3, 4]);
    /// ```
    pub fn shown_seqs(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = Vec::new();
        let messages = self.input.split_once("\nMessages:\n").map_or("", |(_, m)| m);
        for line in messages.lines() {
            let seq = line
                .strip_prefix('#')
                .and_then(|l| l.split_once(' '))
                .and_then(|(n, _)| n.parse().ok());
            if let Some(seq) = seq
                && !seqs.contains(&seq)
            {
                seqs.push(seq);
            }
        }
        seqs
    }
}

type Script = Box<dyn Fn(&FactsRequest) -> Scripted + Send + Sync>;

/// A facts model that answers by `script` (a function of the request it is given) and keeps
/// every request.
///
/// ```
/// let model = chatmem_test::FactsModel::answering(r#"{"facts": []}"#);
/// assert_eq!(model.calls(), 0);
/// ```
pub struct FactsModel {
    script: Script,
    seen: Mutex<Vec<FactsRequest>>,
}

impl fmt::Debug for FactsModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactsModel")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl FactsModel {
    /// A model doing what `script` says for each request.
    pub fn new(script: impl Fn(&FactsRequest) -> Scripted + Send + Sync + 'static) -> Self {
        Self {
            script: Box::new(script),
            seen: Mutex::default(),
        }
    }

    /// A model answering `json` to every call.
    pub fn answering(json: impl Into<String>) -> Self {
        let json = json.into();
        Self::new(move |_| Scripted::Answer(json.clone()))
    }

    /// The requests so far, oldest first.
    pub fn requests(&self) -> Vec<FactsRequest> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many calls it got.
    pub fn calls(&self) -> usize {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[async_trait]
impl ChatModel for FactsModel {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let seen = FactsRequest {
            system: request
                .messages
                .first()
                .and_then(|m| m.text())
                .unwrap_or_default()
                .into_owned(),
            input: request.last_text().into_owned(),
            json_object: request.options.json_object,
            max_tokens: request.options.max_tokens,
        };
        let scripted = (self.script)(&seen);
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).push(seen);
        match scripted {
            Scripted::Answer(text) => Ok(ChatResponse {
                message: Message::assistant(text),
                usage: None,
                finish_reason: Some("stop".into()),
            }),
            Scripted::Fail(kind) => Err(ModelError::new(kind, "the facts model failed as scripted")),
            Scripted::Hang => std::future::pending().await,
        }
    }
}
