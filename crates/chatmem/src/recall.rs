//! Recall: messages that left the window come back when the new user message needs them.
//!
//! With recall on, every message a commit writes is indexed in that same commit
//! ([`IndexEntry`], written by stores that [search](crate::Store::searches)), so it is
//! searchable the moment the commit returns. For a model call the turn's new user message is
//! the query ([`query_terms`]); the store finds the best messages before the window by BM25
//! ([`Store::search`](crate::Store::search), [`bm25`]); [`choose`] keeps the relevant ones
//! within `k` and a token budget and writes them, oldest first, under [`RECALL_HEADING`] in
//! one user message placed just before the new user message — after the system message, the
//! summary and the window, whose place (and a provider's cached prefix) is unchanged.
//! Nothing relevant, nothing is added. What is stored is never changed by recall.
//!
//! Text analysis ([`terms`]) is chatmem's, the same for every store.

mod analysis;
mod inject;
mod memory_index;
mod search;
mod spec;
mod vector;

pub use analysis::{IndexTerms, MAX_QUERY_TERMS, MAX_TERM_BYTES, MAX_TERMS_PER_MESSAGE, query_terms, terms};
pub use inject::{Considered, Outcome, RECALL_HEADING, RRF_K, Recalled, choose};
pub use memory_index::MemoryIndex;
pub use search::{
    BM25_B, BM25_K1, IndexEntry, LexicalHit, MAX_POSTINGS_PER_TERM, SCORE_DECIMALS, SearchQuery, SearchResult, bm25,
    idf, relevance, rounded,
};
pub use spec::{DEFAULT_MIN_RELEVANCE, DEFAULT_MIN_SIMILARITY, DEFAULT_RECALL_MAX_TOKENS, MAX_RECALL_K, Recall};
pub use vector::{
    IndexedMessage, InvalidVector, MAX_MODEL_NAME_BYTES, MAX_VECTOR_DIM, MessageVector, Vector, VectorHit,
    embedding_text, fingerprint, rank_by_similarity,
};

/// How many hits a turn asks a store for, for `k` recalled: more than `k`, so that hits cut
/// by the floor, the budget or a missing tool call leave room for the next.
pub fn search_limit(k: usize) -> usize {
    (k * 4).max(20)
}
