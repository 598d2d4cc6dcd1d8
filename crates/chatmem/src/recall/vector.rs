//! Vectors for recall: what an embedding model makes of a message, the one check a store
//! makes before keeping one, and the one ranking every store follows.
//!
//! A vector is kept with its model's name and its dimension, and is only ever compared with
//! a vector of the same model and dimension: a store that changed models finds, by vector,
//! only what the new model embedded, and the rest by words until it is re-embedded.

use std::sync::Arc;

use crate::message::{Body, Content, ContentPart, Message};
use crate::stored_message::StoredMessage;

use super::search::rounded;

/// The largest dimension accepted (the largest models in use have 3,072 to 4,096).
pub const MAX_VECTOR_DIM: usize = 8192;

/// The longest model name accepted, in bytes.
pub const MAX_MODEL_NAME_BYTES: usize = 256;

/// Why a vector was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidVector {
    /// No values, or more than [`MAX_VECTOR_DIM`].
    #[error("a vector has {0} values; it needs 1 to {MAX_VECTOR_DIM}")]
    Dimension(usize),
    /// A value that is not a finite number.
    #[error("a vector holds a value that is not a finite number (at {0})")]
    NotFinite(usize),
    /// Every value is zero: it points nowhere.
    #[error("a vector of only zeros has no direction")]
    Zero,
    /// An empty model name, or one over [`MAX_MODEL_NAME_BYTES`].
    #[error("a vector's model name must be 1 to {MAX_MODEL_NAME_BYTES} bytes")]
    Model,
    /// Stored bytes that are not a whole number of little-endian `f32`s.
    #[error("stored vector bytes ({0}) are not a whole number of 4-byte values")]
    Bytes(usize),
}

/// One text's embedding by one model, scaled to unit length (so similarity is a dot
/// product). Clones share the values.
#[derive(Debug, Clone, PartialEq)]
pub struct Vector {
    model: Arc<str>,
    values: Arc<[f32]>,
}

impl Vector {
    /// The vector `values` of `model`, scaled to unit length.
    ///
    /// ```
    /// use chatmem::recall::Vector;
    /// let v = Vector::new("e5", vec![3.0, 4.0])?;
    /// assert_eq!((v.model(), v.dim(), v.values()), ("e5", 2, &[0.6, 0.8][..]));
    /// assert!(Vector::new("e5", vec![0.0, 0.0]).is_err());
    /// assert!(Vector::new("e5", vec![f32::NAN]).is_err());
    /// # Ok::<(), chatmem::recall::InvalidVector>(())
    /// ```
    ///
    /// # Errors
    /// [`InvalidVector`]: no values or too many, a value that is not finite, only zeros, or an
    /// empty or overlong model name.
    pub fn new(model: impl Into<Arc<str>>, mut values: Vec<f32>) -> Result<Self, InvalidVector> {
        let model = model.into();
        if model.trim().is_empty() || model.len() > MAX_MODEL_NAME_BYTES {
            return Err(InvalidVector::Model);
        }
        if values.is_empty() || values.len() > MAX_VECTOR_DIM {
            return Err(InvalidVector::Dimension(values.len()));
        }
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(InvalidVector::NotFinite(at));
        }
        let norm = values.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return Err(InvalidVector::Zero);
        }
        for v in &mut values {
            *v = (f64::from(*v) / norm) as f32;
        }
        Ok(Self {
            model,
            values: values.into(),
        })
    }

    /// A vector as [`to_bytes`](Vector::to_bytes) wrote it (as a store keeps it).
    ///
    /// # Errors
    /// [`InvalidVector`] for bytes that are not a whole number of values, or values
    /// [`new`](Vector::new) refuses.
    pub fn from_bytes(model: impl Into<Arc<str>>, bytes: &[u8]) -> Result<Self, InvalidVector> {
        if !bytes.len().is_multiple_of(4) {
            return Err(InvalidVector::Bytes(bytes.len()));
        }
        let values = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Self::new(model, values)
    }

    /// The values as little-endian `f32`s, four bytes each.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// The model that made it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// How many values it has.
    pub fn dim(&self) -> usize {
        self.values.len()
    }

    /// Its values (unit length).
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Whether `other` was made by the same model with the same dimension: only then are
    /// they compared.
    pub fn comparable(&self, other: &Vector) -> bool {
        self.model == other.model && self.dim() == other.dim()
    }

    /// The cosine similarity with `other`, from -1 to 1; `None` when they are not
    /// [comparable](Vector::comparable).
    pub fn similarity(&self, other: &Vector) -> Option<f64> {
        self.comparable(other).then(|| self.dot(other.values()))
    }

    /// The dot product with `values` (of the same dimension), clamped to -1 to 1.
    pub fn dot(&self, values: &[f32]) -> f64 {
        let dot: f64 = self
            .values
            .iter()
            .zip(values)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum();
        dot.clamp(-1.0, 1.0)
    }
}

/// A vector for a stored message, as [`Store::put_vectors`](crate::Store::put_vectors)
/// writes it: only on the message at `seq` if it is still the one embedded (its
/// [`fingerprint`] is `fingerprint`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MessageVector {
    /// The message's sequence number.
    pub seq: u64,
    /// The [`fingerprint`] of the message that was embedded.
    pub fingerprint: u64,
    /// Its embedding.
    pub vector: Vector,
}

impl MessageVector {
    /// The vector of `message`, stored at `seq`.
    pub fn new(seq: u64, message: &Message, vector: Vector) -> Self {
        Self {
            seq,
            fingerprint: fingerprint(message),
            vector,
        }
    }

    /// Whether `stored` is the message this vector was made of (same seq, same text): a
    /// store writes the vector only then, so a conversation cleared and written again while
    /// its old messages were being embedded never gets their vectors.
    pub fn fits(&self, stored: &StoredMessage) -> bool {
        stored.seq == self.seq && fingerprint(&stored.message) == self.fingerprint
    }
}

/// A message the store holds with an index entry (recall was on when it was committed),
/// and when that commit landed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IndexedMessage {
    /// The message, as a load would return it.
    pub message: StoredMessage,
    /// When its commit landed, in Unix microseconds (the store's clock).
    pub at_micros: i64,
}

impl IndexedMessage {
    /// An indexed message.
    pub fn new(message: StoredMessage, at_micros: i64) -> Self {
        Self { message, at_micros }
    }
}

/// One message a vector search found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct VectorHit {
    /// The message and when it was committed.
    pub message: StoredMessage,
    /// When the commit that wrote it landed, in Unix microseconds.
    pub at_micros: i64,
    /// Its cosine similarity with the query, rounded to
    /// [`SCORE_DECIMALS`](super::SCORE_DECIMALS).
    pub similarity: f64,
}

impl VectorHit {
    /// A hit.
    pub fn new(message: StoredMessage, at_micros: i64, similarity: f64) -> Self {
        Self {
            message,
            at_micros,
            similarity,
        }
    }
}

/// The best `limit` of `candidates` (`seq`, similarity), as every store ranks a vector
/// search: by similarity rounded to [`SCORE_DECIMALS`](super::SCORE_DECIMALS), highest
/// first, ties by `seq` descending (the newer first).
///
/// ```
/// use chatmem::recall::rank_by_similarity;
/// let best = rank_by_similarity([(1, 0.5), (2, 0.9), (3, 0.5)], 2);
/// assert_eq!(best, [(2, 0.9), (3, 0.5)]);
/// ```
pub fn rank_by_similarity(candidates: impl IntoIterator<Item = (u64, f64)>, limit: usize) -> Vec<(u64, f64)> {
    let mut all: Vec<(u64, f64)> = candidates.into_iter().map(|(s, v)| (s, rounded(v))).collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    all.truncate(limit);
    all
}

/// What of `message` is embedded: its text (every text part) and an assistant message's tool
/// calls as `name(arguments)`, one a line, as the lexical index reads it; `None` when it says
/// nothing (reasoning text and metadata are never embedded).
///
/// ```
/// use chatmem::Message;
/// use chatmem::recall::embedding_text;
/// assert_eq!(embedding_text(&Message::user("我的订单")).as_deref(), Some("我的订单"));
/// assert_eq!(embedding_text(&Message::user("  ")), None);
/// ```
pub fn embedding_text(message: &Message) -> Option<String> {
    let mut out = String::new();
    let mut push = |t: &str| {
        if !t.trim().is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(t);
        }
    };
    let content = |c: &Content, push: &mut dyn FnMut(&str)| match c {
        Content::Text(t) => push(t),
        Content::Parts(parts) => {
            for part in parts {
                if let ContentPart::Text(t) | ContentPart::Refusal(t) = part {
                    push(t);
                }
            }
        }
    };
    match &message.body {
        Body::System { content: c }
        | Body::Developer { content: c }
        | Body::User { content: c }
        | Body::Tool { content: c, .. } => content(c, &mut push),
        Body::Assistant {
            content: c, tool_calls, ..
        } => {
            if let Some(c) = c {
                content(c, &mut push);
            }
            for call in tool_calls {
                push(&format!("{}({})", call.name, call.arguments));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A message's fingerprint: 64-bit FNV-1a of its role, its participant's name (when it has
/// one: a message is embedded with its speaker) and [`embedding_text`], fixed across versions
/// and platforms (stores keep no copy of it; they compute it of what they hold).
///
/// ```
/// use chatmem::Message;
/// use chatmem::recall::fingerprint;
/// assert_eq!(fingerprint(&Message::user("a")), fingerprint(&Message::user("a")));
/// assert_ne!(fingerprint(&Message::user("a")), fingerprint(&Message::assistant("a")));
/// assert_ne!(fingerprint(&Message::user("a").with_name("Ada")), fingerprint(&Message::user("a")));
/// ```
pub fn fingerprint(message: &Message) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    };
    eat(message.role().as_str().as_bytes());
    eat(&[0]);
    if let Some(name) = &message.name {
        // A byte no UTF-8 text holds keeps a named message apart from any unnamed one.
        eat(name.as_bytes());
        eat(&[0xff]);
    }
    if let Some(text) = embedding_text(message) {
        eat(text.as_bytes());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn vectors_are_unit_length_and_round_trip_through_bytes() {
        let v = Vector::new("m", vec![1.0, 2.0, 2.0]).unwrap();
        let norm: f32 = v.values().iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-6);
        let back = Vector::from_bytes("m", &v.to_bytes()).unwrap();
        assert_eq!(back, v);
        assert_eq!(Vector::from_bytes("m", &[0, 0, 0]), Err(InvalidVector::Bytes(3)));
        assert_eq!(Vector::new("", vec![1.0]), Err(InvalidVector::Model));
        assert_eq!(Vector::new("m", vec![]), Err(InvalidVector::Dimension(0)));
        assert_eq!(
            Vector::new("m", vec![1.0; MAX_VECTOR_DIM + 1]),
            Err(InvalidVector::Dimension(MAX_VECTOR_DIM + 1))
        );
        assert_eq!(
            Vector::new("m", vec![1.0, f32::INFINITY]),
            Err(InvalidVector::NotFinite(1))
        );
    }

    #[test]
    fn only_vectors_of_one_model_and_dimension_are_compared() {
        let a = Vector::new("a", vec![1.0, 0.0]).unwrap();
        let diagonal = a.similarity(&Vector::new("a", vec![1.0, 1.0]).unwrap()).unwrap();
        assert!((diagonal - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6, "{diagonal}");
        assert_eq!(a.similarity(&Vector::new("b", vec![1.0, 0.0]).unwrap()), None);
        assert_eq!(a.similarity(&Vector::new("a", vec![1.0, 0.0, 0.0]).unwrap()), None);
    }

    #[test]
    fn a_vector_fits_only_the_message_it_was_made_of() {
        let m = Message::user("我的订单是 LC202610060018");
        let v = MessageVector::new(3, &m, Vector::new("m", vec![1.0]).unwrap());
        assert!(v.fits(&StoredMessage::new(3, 1, m.clone())));
        assert!(!v.fits(&StoredMessage::new(4, 1, m)));
        assert!(!v.fits(&StoredMessage::new(3, 1, Message::user("别的"))));
    }

    #[test]
    fn tool_calls_are_embedded_as_the_index_reads_them_and_reasoning_never() {
        let mut m = Message::assistant_tool_calls(vec![ToolCall {
            id: "c1".into(),
            name: "get_order".into(),
            arguments: r#"{"id":"LC1"}"#.into(),
        }]);
        if let Body::Assistant { reasoning_content, .. } = &mut m.body {
            *reasoning_content = Some("secret".into());
        }
        assert_eq!(embedding_text(&m).as_deref(), Some(r#"get_order({"id":"LC1"})"#));
    }
}
