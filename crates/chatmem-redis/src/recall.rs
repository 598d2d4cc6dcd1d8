//! Lexical recall: the index a commit writes ([`Commit::index`]) and [`Store::search`]
//! over it.
//!
//! # Layout
//!
//! A conversation's index is one hash, `<prefix>:{<tag>}:idx`, beside its meta hash and
//! messages (the same hash tag: one Cluster slot). The meta hash's field `indexed` (`1`)
//! marks it as this conversation's: an index key without the mark (left by a conversation
//! cleared by a chatmem without recall) is never read and is deleted before the first
//! entry. `<term>` is the lower-case hex of the term's bytes: a term is never read as
//! anything but bytes (`{`, `}`, `*`, quotes, `\0` are bytes like others), and no two
//! terms, chunk numbers or entries run into each other. Its fields:
//!
//! - `i`: how many messages are indexed, their total length in terms, and a seq no indexed
//!   message is below (where a deletion starts looking), 7 bytes each, then the pending
//!   entries (see below), 11 bytes each: seq (7) and length (4);
//! - `d:<seq>`: one indexed message, `<len>:<at>` (its length, the commit's time in Unix
//!   microseconds) then `;<term>:<count>` for each of its distinct terms;
//! - `t:<term>`: the term's posting list: how many postings were ever appended, `n`, and
//!   how many were deleted from its front, `d`, 6 bytes each, then its last `n % 64`
//!   postings;
//! - `c:<term>:<k>`: the list's `k`-th full chunk of 64 postings (postings `64k` to
//!   `64k + 63`), written once when the tail fills, deleted when all of it is.
//!
//! A posting is 15 bytes: the message's seq (7 bytes), the term's count in it and the
//! message's length (4 bytes each); a list is in seq order. Numbers are big-endian.
//!
//! A commit of fewer than [`MERGE_AT`] messages writes only their entries (`d:`) and adds
//! them to the pending ones in `i`; once [`MERGE_AT`] are pending, the commit that makes
//! them so moves them all into the posting lists. A commit of more moves its own (grouped
//! by term by the store) and the pending ones at once. A search reads the pending entries
//! (the newest messages) whole, and the lists of its terms.
//!
//! Why so: a commit's cost stays near that of one without recall (two fields written for a
//! turn's two messages; every 16th turn or so also writes the lists of the terms of the
//! last 32 messages, each term once however many of them hold it) instead of growing with
//! every term of every message. Why one key: a commit gives it the conversation's TTL and
//! clear deletes it with one `PEXPIRE` and one more `DEL` key, whatever its size; and it
//! keeps the meta hash, which every load and commit reads, small. Why chunks: a list's
//! tail is all a merge rewrites (at most 63 postings), a search reads only the last
//! chunks of its terms' lists (see [`SEARCH`](crate::scripts::SEARCH): the
//! [`MAX_POSTINGS_PER_TERM`] most recent postings of each), and packed postings take about
//! a sixth of the memory of a sorted-set member per posting (measured: 35 against 222 MB
//! for 1.9 million postings) and are appended far faster than members are inserted into a
//! large sorted set. The entries give a search the counts of its best hits, and let a
//! deletion below a seq find the deleted messages' terms: each such list loses as many
//! postings from its front as the deleted entries that hold its term (a list's deleted
//! postings are its first ones, as seqs only grow).

use std::collections::HashMap;

use chatmem::ConversationId;
use chatmem::recall::{LexicalHit, MAX_POSTINGS_PER_TERM, SearchQuery, SearchResult, bm25, rounded};
use chatmem::store::{Commit, StoreError, StoredMessage};
use redis::{ScriptInvocation, Value};

use crate::codec;
use crate::store::RedisStore;

/// Seqs are below this (sorted-set scores are doubles): a search's `before` is cut to it.
const SEQ_BOUND: u64 = 1 << 53;

/// The most hits one search answers (a larger `limit` is cut to it).
const MAX_HITS: usize = 1 << 24;

/// Candidates answered beyond the hits, as statistics only, so that the store checks the
/// script's order with chatmem's own [`bm25`]: up to this many.
const MAX_REST: usize = 4;

/// `term` as index field names and scripts hold it: the lower-case hex of its bytes.
pub(crate) fn encode_term(term: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(term.len() * 2);
    for b in term.bytes() {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// One posting: seq (7 bytes), the term's count (4) and the message's length (4).
fn posting(out: &mut Vec<u8>, seq: u64, tf: u32, len: u32) {
    out.extend_from_slice(&seq.to_be_bytes()[1..]);
    out.extend_from_slice(&tf.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// Commits of at least this many index entries hand their postings grouped by term, and
/// are merged into the lists at once; smaller ones leave their entries pending until this
/// many are (the commit script's `T`). Below [`MAX_POSTINGS_PER_TERM`], so that pending
/// entries never fill a term's window by themselves.
const MERGE_AT: usize = 32;

const _: () = assert!(MERGE_AT < MAX_POSTINGS_PER_TERM);

/// One distinct term of a commit's entries and its new postings.
struct NewPostings {
    term: String,
    postings: Vec<u8>,
}

/// Appends `commit`'s index entries to the commit script's arguments (see
/// [`COMMIT`](crate::scripts::COMMIT)): how many; each entry's seq, length and counts
/// (`;<term>:<count>...`); their seqs and lengths packed (7 and 4 bytes) for the pending
/// list; then `1` and each distinct term with its new postings for a commit of
/// [`MERGE_AT`] entries or more, else `0`. Entries below the commit's deletion bound are
/// left out: they would be deleted in the same commit.
pub(crate) fn push_index(inv: &mut ScriptInvocation<'_>, commit: &Commit) {
    let below = commit.delete_below().unwrap_or(0);
    let entries: Vec<_> = commit.index().iter().filter(|e| e.seq >= below).collect();
    inv.arg(entries.len());
    let grouped = entries.len() >= MERGE_AT;
    let mut terms: Vec<NewPostings> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut pending = Vec::with_capacity(entries.len() * 11);
    for entry in &entries {
        let len = entry.terms.len;
        let mut counts = String::new();
        for (term, tf) in &entry.terms.terms {
            let hex = encode_term(term);
            counts.push(';');
            counts.push_str(&hex);
            counts.push(':');
            counts.push_str(&tf.to_string());
            if grouped {
                let i = *at.entry(term.as_str()).or_insert_with(|| {
                    terms.push(NewPostings {
                        term: hex,
                        postings: Vec::new(),
                    });
                    terms.len() - 1
                });
                posting(&mut terms[i].postings, entry.seq, *tf, len);
            }
        }
        pending.extend_from_slice(&entry.seq.to_be_bytes()[1..]);
        pending.extend_from_slice(&len.to_be_bytes());
        inv.arg(entry.seq).arg(len).arg(counts);
    }
    inv.arg(pending);
    if !grouped {
        inv.arg(0);
        return;
    }
    inv.arg(1).arg(terms.len());
    for t in &terms {
        inv.arg(&t.term).arg(t.postings.as_slice());
    }
}

/// One candidate the search script answered: a hit with its message and time, or one of the
/// rest, with statistics only.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) seq: u64,
    pub(crate) len: u32,
    pub(crate) tf: Vec<u32>,
    pub(crate) found: Option<(StoredMessage, i64)>,
}

/// The search script's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) docs: u64,
    pub(crate) total_len: u64,
    pub(crate) df: Vec<u64>,
    pub(crate) candidates: Vec<Candidate>,
}

/// Orders `candidates` by chatmem's own rounded [`bm25`] (ties by seq, descending) and
/// keeps the best `limit`: the script's order, unless Lua's arithmetic differed.
pub(crate) fn rank(
    docs: u64,
    total_len: u64,
    df: &[u64],
    mut candidates: Vec<Candidate>,
    limit: usize,
) -> Vec<Candidate> {
    let mut scored: Vec<(f64, Candidate)> = candidates
        .drain(..)
        .map(|c| (rounded(bm25(docs, total_len, df, c.len, &c.tf)), c))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.seq.cmp(&a.1.seq)));
    scored.truncate(limit);
    scored.into_iter().map(|(_, c)| c).collect()
}

impl RedisStore {
    /// [`Store::search`](chatmem::Store::search): one script run (see
    /// [`SEARCH`](crate::scripts::SEARCH)).
    pub(crate) async fn search_index(
        &self,
        id: &ConversationId,
        query: &SearchQuery,
    ) -> Result<SearchResult, StoreError> {
        let limit = query.limit.min(MAX_HITS);
        let keep = limit + limit.min(MAX_REST);
        let mut inv = self.scripts.search.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .key(self.keys.idx(id))
            .arg(query.before.min(SEQ_BOUND))
            .arg(limit)
            .arg(keep)
            .arg(MAX_POSTINGS_PER_TERM);
        for term in &query.terms {
            inv.arg(encode_term(term));
        }
        let inv = &inv;
        let reply: Value = self
            .run("searching", |mut conn| async move { inv.invoke_async(&mut conn).await })
            .await
            .map_err(|e| e.for_conversation(id))?;
        let answer = parse_answer(id, reply, query.terms.len())?;
        let mut best = rank(answer.docs, answer.total_len, &answer.df, answer.candidates, limit);
        if best.iter().any(|c| c.found.is_none()) {
            // Lua ordered some of these below the hits it fetched: their messages now, once.
            tracing::debug!("redis search: chatmem's BM25 reordered the script's candidates");
            self.fetch_missing(id, &mut best).await?;
        }
        let hits = best
            .into_iter()
            .filter_map(|c| {
                let (message, at) = c.found?;
                Some(LexicalHit::new(message, at, c.len, c.tf))
            })
            .collect();
        Ok(SearchResult::new(answer.docs, answer.total_len, answer.df, hits))
    }

    /// Reads the messages and times of the candidates in `best` that have none (see
    /// [`FETCH`](crate::scripts::FETCH)); those gone stay without.
    async fn fetch_missing(&self, id: &ConversationId, best: &mut [Candidate]) -> Result<(), StoreError> {
        let missing: Vec<usize> = (0..best.len()).filter(|&i| best[i].found.is_none()).collect();
        let mut inv = self.scripts.fetch.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .key(self.keys.idx(id));
        for &i in &missing {
            inv.arg(best[i].seq);
        }
        let inv = &inv;
        let reply: Vec<(Option<Vec<u8>>, Option<String>)> = self
            .run("searching", |mut conn| async move { inv.invoke_async(&mut conn).await })
            .await
            .map_err(|e| e.for_conversation(id))?;
        for (k, (member, at)) in reply.into_iter().enumerate() {
            let (Some(member), Some(at)) = (member, at) else {
                continue;
            };
            if let Some(&i) = missing.get(k) {
                let at = parse_at(id, at.as_bytes())?;
                best[i].found = Some((codec::decode(id, &member, k)?, at));
            }
        }
        Ok(())
    }
}

/// Parses the search script's reply for a query of `terms` terms.
pub(crate) fn parse_answer(id: &ConversationId, reply: Value, terms: usize) -> Result<Answer, StoreError> {
    let bad = || StoreError::corrupt(id, "unexpected search reply");
    let Value::Array(items) = reply else {
        return Err(bad());
    };
    let [docs, total_len, df, hits, rest] = <[Value; 5]>::try_from(items).map_err(|_| bad())?;
    let docs = number(&docs).ok_or_else(bad)?;
    let total_len = number(&total_len).ok_or_else(bad)?;
    let df = array(df)
        .ok_or_else(bad)?
        .iter()
        .map(number)
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(bad)?;
    if df.len() != terms {
        return Err(bad());
    }
    let mut candidates = Vec::new();
    for (i, row) in array(hits).ok_or_else(bad)?.into_iter().enumerate() {
        let row = array(row).ok_or_else(bad)?;
        let [seq, len, at, member, tf @ ..] = row.as_slice() else {
            return Err(bad());
        };
        let (Value::BulkString(at), Value::BulkString(member)) = (at, member) else {
            return Err(bad());
        };
        let message = codec::decode(id, member, i)?;
        let found = Some((message, parse_at(id, at)?));
        candidates.push(candidate(seq, len, tf, terms, found).ok_or_else(bad)?);
    }
    for row in array(rest).ok_or_else(bad)? {
        let row = array(row).ok_or_else(bad)?;
        let [seq, len, tf @ ..] = row.as_slice() else {
            return Err(bad());
        };
        candidates.push(candidate(seq, len, tf, terms, None).ok_or_else(bad)?);
    }
    Ok(Answer {
        docs,
        total_len,
        df,
        candidates,
    })
}

fn candidate(
    seq: &Value,
    len: &Value,
    tf: &[Value],
    terms: usize,
    found: Option<(StoredMessage, i64)>,
) -> Option<Candidate> {
    if tf.len() != terms {
        return None;
    }
    Some(Candidate {
        seq: number(seq)?,
        len: u32::try_from(number(len)?).ok()?,
        tf: tf
            .iter()
            .map(|v| number(v).and_then(|n| u32::try_from(n).ok()))
            .collect::<Option<_>>()?,
        found,
    })
}

/// An index entry's time.
fn parse_at(id: &ConversationId, at: &[u8]) -> Result<i64, StoreError> {
    codec::parse_num(at).ok_or_else(|| StoreError::corrupt(id, "an index entry has an unreadable time"))
}

fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

fn array(v: Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) => Some(items),
        Value::Nil => Some(Vec::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use chatmem::Message;

    use super::*;

    #[test]
    fn terms_are_hex_of_their_bytes() {
        assert_eq!(encode_term("order"), "6f72646572");
        assert_eq!(encode_term(""), "");
        assert_eq!(encode_term("{a}:*"), "7b617d3a2a");
        assert_eq!(encode_term("订单"), "e8aea2e58d95");
        assert_eq!(encode_term("a\0;"), "61003b");
    }

    #[test]
    fn postings_are_fifteen_big_endian_bytes() {
        let mut out = Vec::new();
        posting(&mut out, (1 << 53) - 1, u32::MAX, 7);
        assert_eq!(out.len(), 15);
        assert_eq!(&out[..7], &[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&out[7..11], &[0xff; 4]);
        assert_eq!(&out[11..], &[0, 0, 0, 7]);
    }

    fn stored(seq: u64) -> Option<(StoredMessage, i64)> {
        Some((StoredMessage::new(seq, 1, Message::user("x")), 5))
    }

    #[test]
    fn rank_follows_chatmem_bm25_whatever_order_it_is_given() {
        let c = |seq, len, tf: Vec<u32>, found| Candidate { seq, len, tf, found };
        // Statistics where seq 3 (rare term, short) beats seq 9 (common term), and 4 and 6
        // tie (the newer first).
        let candidates = vec![
            c(9, 10, vec![0, 1], stored(9)),
            c(4, 5, vec![1, 0], stored(4)),
            c(6, 5, vec![1, 0], None),
            c(3, 2, vec![1, 0], None),
        ];
        let ranked = rank(20, 200, &[3, 15], candidates, 3);
        assert_eq!(ranked.iter().map(|c| c.seq).collect::<Vec<_>>(), [3, 6, 4]);
        assert!(ranked[0].found.is_none() && ranked[2].found.is_some());
    }
}
