//! What a store is asked when recall searches a conversation, what it answers, and BM25, the
//! one ranking every store follows.

use crate::stored_message::StoredMessage;

use super::analysis::IndexTerms;
use super::vector::{Vector, VectorHit};

/// BM25's term-frequency saturation.
pub const BM25_K1: f64 = 1.2;
/// BM25's length normalization: below the textbook 0.75, since a chat message's length says
/// less about what it is about than a document's (on LoCoMo 0.5 finds about a point more of
/// the evidence at k = 5 and 10 than 0.75; 0.3 to 0.5 all alike: bench/results/rc/README.md).
pub const BM25_B: f64 = 0.5;

/// One appended message's index entry, carried by a [`Commit`](crate::store::Commit) made
/// with recall on: a store that [searches](crate::Store::searches) writes it in the same
/// atomic commit as the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The message's sequence number.
    pub seq: u64,
    /// Its distinct terms with their counts, and its length in terms.
    pub terms: IndexTerms,
}

/// The most postings of one term a search considers: its most recent ones (by `seq`, before
/// the query's `before`). A term that many messages hold weighs little in BM25 (its idf is
/// low), so the oldest of its postings rarely change the best hits, and a search costs the
/// same at 100,000 messages as at a thousand. Rare terms, which decide the ranking, are
/// never cut.
pub const MAX_POSTINGS_PER_TERM: usize = 512;

/// A lexical search of one conversation: [`Store::search`](crate::Store::search).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchQuery {
    /// Distinct analyzed terms ([`query_terms`](super::query_terms)); empty finds nothing.
    pub terms: Vec<String>,
    /// Only messages with `seq < before` are hits (those after are in the window).
    pub before: u64,
    /// At most this many hits, the best first (lexical ones, and as many by vector).
    pub limit: usize,
    /// The query's embedding, for a store that [keeps vectors](crate::Store::keeps_vectors):
    /// it also answers the messages before `before` most similar to it.
    pub vector: Option<Vector>,
}

impl SearchQuery {
    /// A search for `terms` among the messages before `before`, up to `limit` hits.
    pub fn new(terms: Vec<String>, before: u64, limit: usize) -> Self {
        Self {
            terms,
            before,
            limit,
            vector: None,
        }
    }

    /// The same search, also by similarity to `vector`.
    pub fn with_vector(mut self, vector: Vector) -> Self {
        self.vector = Some(vector);
        self
    }
}

/// What a store answers a [`SearchQuery`] with: the statistics BM25 needs, over every
/// indexed message of the conversation, and the best hits.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct SearchResult {
    /// How many of the conversation's messages are indexed.
    pub docs: u64,
    /// Their total length in terms.
    pub total_len: u64,
    /// For each query term, in the query's order, how many indexed messages contain it.
    pub df: Vec<u64>,
    /// Up to `limit` indexed messages with `seq < before` among each query term's
    /// [`MAX_POSTINGS_PER_TERM`] most recent postings before `before`, by [`bm25`] over the
    /// statistics above (rounded to [`SCORE_DECIMALS`]), best first, ties by `seq`
    /// descending (the newer first). A hit's `tf` counts the terms whose considered postings
    /// hold it (a term whose recent postings did not reach it counts 0 there).
    pub hits: Vec<LexicalHit>,
    /// With a query [vector](SearchQuery::vector), from a store that keeps vectors: up to
    /// `limit` messages with `seq < before` whose vector is of the query vector's model and
    /// dimension, by similarity ([`rank_by_similarity`](super::rank_by_similarity)); else
    /// empty.
    pub vector_hits: Vec<VectorHit>,
}

impl SearchResult {
    /// A result: the statistics and the hits.
    pub fn new(docs: u64, total_len: u64, df: Vec<u64>, hits: Vec<LexicalHit>) -> Self {
        Self {
            docs,
            total_len,
            df,
            hits,
            vector_hits: Vec::new(),
        }
    }

    /// The same result with `hits` found by vector.
    pub fn with_vector_hits(mut self, hits: Vec<VectorHit>) -> Self {
        self.vector_hits = hits;
        self
    }
}

/// One message a search found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LexicalHit {
    /// The message, as [`Store::load`](crate::Store::load) would return it.
    pub message: StoredMessage,
    /// When the commit that wrote it landed, in Unix microseconds (the store's clock).
    pub at_micros: i64,
    /// Its length in terms.
    pub len: u32,
    /// For each query term, in the query's order, how often the message contains it.
    pub tf: Vec<u32>,
}

impl LexicalHit {
    /// A hit.
    pub fn new(message: StoredMessage, at_micros: i64, len: u32, tf: Vec<u32>) -> Self {
        Self {
            message,
            at_micros,
            len,
            tf,
        }
    }
}

/// The decimals a store rounds BM25 scores to before ordering, so that engines summing in
/// another order still agree on ties.
pub const SCORE_DECIMALS: i32 = 6;

/// BM25's inverse document frequency of a term in `df` of `docs` messages.
pub fn idf(docs: u64, df: u64) -> f64 {
    let (n, df) = (docs as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The BM25 score of a message of `len` terms whose query terms occur `tf` times (in the
/// query's order), in a conversation of `docs` indexed messages of `total_len` terms in all
/// where the terms occur in `df` messages: Σ idf · tf·(k1+1) / (tf + k1·(1 − b + b·len/avg)).
///
/// ```
/// use chatmem::recall::bm25;
/// let rare = bm25(100, 1000, &[1, 50], 10, &[1, 0]);
/// let common = bm25(100, 1000, &[1, 50], 10, &[0, 1]);
/// assert!(rare > common && common > 0.0);
/// assert_eq!(bm25(0, 0, &[], 0, &[]), 0.0);
/// ```
pub fn bm25(docs: u64, total_len: u64, df: &[u64], len: u32, tf: &[u32]) -> f64 {
    if docs == 0 {
        return 0.0;
    }
    let avg = (total_len as f64 / docs as f64).max(1.0);
    let norm = BM25_K1 * (1.0 - BM25_B + BM25_B * f64::from(len) / avg);
    df.iter()
        .zip(tf)
        .filter(|&(_, &tf)| tf > 0)
        .map(|(&df, &tf)| {
            let tf = f64::from(tf);
            idf(docs, df) * tf * (BM25_K1 + 1.0) / (tf + norm)
        })
        .sum()
}

/// A score rounded to [`SCORE_DECIMALS`], as stores order by it.
pub fn rounded(score: f64) -> f64 {
    let scale = 10f64.powi(SCORE_DECIMALS);
    (score * scale).round() / scale
}

/// A BM25 score made comparable across queries, in `[0, 1]` for all but very repetitive
/// messages: the score over what a message holding every query term once, at the average
/// length, in a conversation where each occurs once, would score. A match on one rare term of
/// a three-term query is about a third; a match on a word most messages hold is near 0.
pub fn relevance(docs: u64, query_terms: usize, score: f64) -> f64 {
    if docs == 0 || query_terms == 0 {
        return 0.0;
    }
    (score / (query_terms as f64 * idf(docs, 1))).clamp(0.0, 1.0)
}
