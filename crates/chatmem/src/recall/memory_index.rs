//! [`MemoryIndex`]: a conversation's lexical index held in memory, the reference every other
//! store's search is checked against (the in-memory store keeps one per conversation).

use std::collections::{BTreeMap, HashMap};

use crate::stored_message::StoredMessage;

use super::search::{IndexEntry, LexicalHit, MAX_POSTINGS_PER_TERM, SearchQuery, SearchResult, bm25, rounded};
use super::vector::{IndexedMessage, MessageVector, Vector, VectorHit, rank_by_similarity};

/// One conversation's index: each term's postings (seq → count), each message's length and
/// time, and each message's vector.
#[derive(Debug, Clone, Default)]
pub struct MemoryIndex {
    postings: HashMap<String, BTreeMap<u64, u32>>,
    docs: BTreeMap<u64, (u32, i64)>,
    total_len: u64,
    vectors: BTreeMap<u64, Vector>,
}

impl MemoryIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes a commit's entries, written at `at_micros`.
    pub fn add(&mut self, entries: &[IndexEntry], at_micros: i64) {
        for entry in entries {
            if self.docs.insert(entry.seq, (entry.terms.len, at_micros)).is_some() {
                continue;
            }
            self.total_len += u64::from(entry.terms.len);
            for (term, tf) in &entry.terms.terms {
                // Looked up before it is copied: most terms of a message are already known.
                match self.postings.get_mut(term.as_str()) {
                    Some(seqs) => {
                        seqs.insert(entry.seq, *tf);
                    }
                    None => {
                        self.postings.insert(term.clone(), BTreeMap::from([(entry.seq, *tf)]));
                    }
                }
            }
        }
    }

    /// Forgets the messages below `seq`.
    pub fn delete_below(&mut self, seq: u64) {
        if self.docs.first_key_value().is_none_or(|(&first, _)| first >= seq) {
            return;
        }
        let kept = self.docs.split_off(&seq);
        for (len, _) in std::mem::replace(&mut self.docs, kept).into_values() {
            self.total_len -= u64::from(len);
        }
        self.postings.retain(|_, seqs| {
            *seqs = seqs.split_off(&seq);
            !seqs.is_empty()
        });
        self.vectors = self.vectors.split_off(&seq);
    }

    /// Keeps each of `vectors` that [fits](MessageVector::fits) an indexed message, as
    /// `message` looks it up; returns how many were kept.
    pub fn put_vectors(&mut self, vectors: &[MessageVector], message: impl Fn(u64) -> Option<StoredMessage>) -> usize {
        let mut kept = 0;
        for v in vectors {
            if self.docs.contains_key(&v.seq) && message(v.seq).is_some_and(|m| v.fits(&m)) {
                self.vectors.insert(v.seq, v.vector.clone());
                kept += 1;
            }
        }
        kept
    }

    /// Up to `limit` indexed messages after `after` without a vector of `model` and `dim`,
    /// oldest first.
    pub fn unembedded(
        &self,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
        message: impl Fn(u64) -> Option<StoredMessage>,
    ) -> Vec<IndexedMessage> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.docs
            .range((Excluded(after), Unbounded))
            .filter(|(seq, _)| {
                self.vectors
                    .get(seq)
                    .is_none_or(|v| v.model() != model || v.dim() != dim)
            })
            .filter_map(|(&seq, &(_, at))| Some(IndexedMessage::new(message(seq)?, at)))
            .take(limit)
            .collect()
    }

    /// The messages before `before` most similar to `query`, as a vector search answers.
    fn vector_hits(
        &self,
        query: &Vector,
        before: u64,
        limit: usize,
        message: &impl Fn(u64) -> Option<StoredMessage>,
    ) -> Vec<VectorHit> {
        let candidates = self
            .vectors
            .range(..before)
            .filter(|(_, v)| v.comparable(query))
            .map(|(&seq, v)| (seq, query.dot(v.values())));
        rank_by_similarity(candidates, limit)
            .into_iter()
            .filter_map(|(seq, similarity)| {
                let (_, at) = *self.docs.get(&seq)?;
                Some(VectorHit::new(message(seq)?, at, similarity))
            })
            .collect()
    }

    /// How many messages are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Answers `query` as the [`Store::search`](crate::Store::search) contract says, the
    /// messages looked up by `message` (a hit whose message is gone is left out).
    pub fn search(&self, query: &SearchQuery, message: impl Fn(u64) -> Option<StoredMessage>) -> SearchResult {
        let docs = self.docs.len() as u64;
        let lists: Vec<Option<&BTreeMap<u64, u32>>> = query.terms.iter().map(|t| self.postings.get(t)).collect();
        let df: Vec<u64> = lists.iter().map(|l| l.map_or(0, |l| l.len() as u64)).collect();
        let mut tfs: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (i, list) in lists.iter().enumerate() {
            let recent = list
                .iter()
                .flat_map(|l| l.range(..query.before).rev().take(MAX_POSTINGS_PER_TERM));
            for (&seq, &tf) in recent {
                tfs.entry(seq).or_insert_with(|| vec![0; lists.len()])[i] = tf;
            }
        }
        let mut scored: Vec<(f64, u64, Vec<u32>)> = tfs
            .into_iter()
            .map(|(seq, tf)| {
                let len = self.docs.get(&seq).map_or(0, |d| d.0);
                (rounded(bm25(docs, self.total_len, &df, len, &tf)), seq, tf)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        let hits = scored
            .into_iter()
            .filter_map(|(_, seq, tf)| {
                let (len, at) = *self.docs.get(&seq)?;
                Some(LexicalHit::new(message(seq)?, at, len, tf))
            })
            .take(query.limit)
            .collect();
        let vector_hits = match &query.vector {
            Some(v) => self.vector_hits(v, query.before, query.limit, &message),
            None => Vec::new(),
        };
        SearchResult::new(docs, self.total_len, df, hits).with_vector_hits(vector_hits)
    }
}
