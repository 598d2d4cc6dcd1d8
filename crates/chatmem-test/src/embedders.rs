//! Embedding models for tests, in process: [`CharacterEmbedder`], a toy model whose vectors
//! are a text's characters (the mock upstream's `/v1/embeddings` answers the same), and
//! [`ScriptedEmbedder`], which fails, hangs or answers garbage on demand and counts its calls.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chatmem::{EmbedKind, Embedder, ModelError, ModelErrorKind};

/// The dimension of [`character_vector`]'s vectors.
pub const EMBEDDING_DIM: usize = 64;

/// A toy embedding: each of `text`'s letters and digits (case folded) hashed into
/// [`EMBEDDING_DIM`] counts, so texts sharing characters are similar (`那单` and `订单` share
/// `单`) and texts sharing none are orthogonal.
pub fn character_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; EMBEDDING_DIM];
    for c in text
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
    {
        let mut h: u32 = 2_166_136_261;
        for b in c.to_string().bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(16_777_619);
        }
        v[h as usize % EMBEDDING_DIM] += 1.0;
    }
    if v.iter().all(|&x| x == 0.0) {
        v[0] = 1.0;
    }
    v
}

/// What a [`ScriptedEmbedder`] does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers [`character_vector`]s.
    Characters,
    /// Answers them after this long.
    Slow(Duration),
    /// Never answers.
    Hang,
    /// Fails as the provider being down.
    Fail,
    /// Answers a vector of NaNs per text.
    Garbage,
}

/// An in-process embedding model whose behaviour a test sets, counting its calls and texts.
#[derive(Debug)]
pub struct ScriptedEmbedder {
    model: String,
    behaviour: Mutex<Behaviour>,
    calls: AtomicUsize,
    texts: AtomicUsize,
}

impl ScriptedEmbedder {
    /// A model named `model` that answers [`Behaviour::Characters`].
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            behaviour: Mutex::new(Behaviour::Characters),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        }
    }

    /// Behaves as `b` from now on.
    pub fn set(&self, b: Behaviour) {
        *self.behaviour.lock().expect("lock") = b;
    }

    /// The calls so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The texts embedded so far (over every call).
    pub fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Embedder for ScriptedEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    async fn embed(&self, texts: &[String], _kind: EmbedKind) -> Result<Vec<Vec<f32>>, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        let behaviour = *self.behaviour.lock().expect("lock");
        match behaviour {
            Behaviour::Characters => {}
            Behaviour::Slow(d) => tokio::time::sleep(d).await,
            Behaviour::Hang => std::future::pending::<()>().await,
            Behaviour::Fail => {
                return Err(ModelError::new(
                    ModelErrorKind::Unavailable,
                    "scripted: the model is down",
                ));
            }
            Behaviour::Garbage => return Ok(texts.iter().map(|_| vec![f32::NAN; EMBEDDING_DIM]).collect()),
        }
        Ok(texts.iter().map(|t| character_vector(t)).collect())
    }
}
