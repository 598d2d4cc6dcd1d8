//! The lexical index behind [`Store::search`](chatmem::Store::search): written by the commit
//! that writes its messages, forgotten with them, and searched by BM25 as
//! [`chatmem::recall::MemoryIndex`], the reference, does.
//!
//! # How it is kept
//! A commit writes a message's index entry (its length, its distinct terms with their
//! counts, [`encode_doc`]) into the message's own row (`messages.recall_*`), so indexing adds
//! no row and no page to a commit. The conversation's newest indexed messages, its **tail**
//! (from `conversations.recall_merged` on, `recall_tail` of them), are searched by reading
//! those rows. Once the tail holds [`TAIL`] messages, the commit that fills it turns it into
//! a **segment**: one row per term (`recall_postings`: how many of the segment's messages
//! hold it and their postings, newest first, [`encode_postings`], the first
//! [`MAX_POSTINGS_PER_TERM`] apart from the others) under the segment's key.
//! [`FANOUT`] segments of one size tier are merged into one, so a conversation has a few
//! segments per tenfold of messages and every message is rewritten a few times in all. A
//! term's postings are thus a handful of rows, newest first, wherever a commit wrote them,
//! and writing them costs a commit one page per segment's worth of terms rather than a page
//! per term.
//!
//! # How it is searched
//! One read transaction: the conversation's totals (`conversations.recall_docs`,
//! `recall_len`, kept by the commits: nothing is counted), the tail's rows, and for each
//! query term one statement joining the conversation's segments (newest first) to the term's
//! rows. A term's document frequency is the sum of its rows' counts and the tail's; its
//! postings are read newest first up to [`MAX_POSTINGS_PER_TERM`] below `before`, as the
//! contract says (a segment's older postings only when those are not enough). The
//! candidates are scored here by [`bm25`] itself and rounded as the contract says, so the
//! order is the reference's to the bit.

use std::collections::{BTreeMap, HashMap};

use chatmem::ConversationId;
use chatmem::recall::{LexicalHit, MAX_POSTINGS_PER_TERM, SearchQuery, SearchResult, bm25, rounded};
use chatmem::store::StoreError;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::error::db_error;
use crate::rows;
use crate::sql::now_ms;

/// How many indexed messages a conversation's tail holds before a commit makes them a
/// segment. A search reads the whole tail, so it stays small; it is below
/// [`MAX_POSTINGS_PER_TERM`], so a term's postings in the tail are never cut.
pub(crate) const TAIL: i64 = 128;

/// How far past the tail's start unindexed messages (committed without recall) may push the
/// next seq before the tail is made a segment anyway: bounds the rows a search reads there.
pub(crate) const TAIL_SPAN: i64 = 4 * TAIL;

/// How many segments of one size tier merge into one.
const FANOUT: usize = 4;

const _: () = assert!(TAIL as usize <= MAX_POSTINGS_PER_TERM);

// ---------------------------------------------------------------------------------------
// Encodings

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        // Seven bits at a time; the mask makes the cast lossless.
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn get_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut n: u64 = 0;
    let mut shift = 0u32;
    loop {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        if shift >= u64::BITS {
            return None;
        }
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
        shift += 7;
    }
}

fn get_u32(bytes: &mut &[u8]) -> Option<u32> {
    u32::try_from(get_varint(bytes)?).ok()
}

/// A message's distinct terms with their counts, as `messages.recall_terms` keeps them: for
/// each, its byte length, its bytes and its count, the numbers as LEB128 varints. Any string
/// survives it (there is no separator to escape).
pub(crate) fn encode_doc(terms: &[(String, u32)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(terms.iter().map(|(t, _)| t.len() + 2).sum());
    for (term, tf) in terms {
        put_varint(&mut out, term.len() as u64);
        out.extend_from_slice(term.as_bytes());
        put_varint(&mut out, u64::from(*tf));
    }
    out
}

/// The terms [`encode_doc`] wrote; `None` when `bytes` is not such an encoding.
fn decode_doc(mut bytes: &[u8]) -> Option<Vec<(&str, u32)>> {
    let mut terms = Vec::new();
    while !bytes.is_empty() {
        let n = usize::try_from(get_varint(&mut bytes)?).ok()?;
        if n > bytes.len() {
            return None;
        }
        let (term, rest) = bytes.split_at(n);
        bytes = rest;
        terms.push((std::str::from_utf8(term).ok()?, get_u32(&mut bytes)?));
    }
    Some(terms)
}

/// One posting: the message's seq, the term's count in it and the message's length.
type Posting = (i64, u32, u32);

/// Postings newest first (seqs strictly descending), as `recall_postings.postings` keeps
/// them: the first seq, then each seq's distance below the one before, each with its count
/// and length, all as varints.
pub(crate) fn encode_postings(postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(postings.len() * 3);
    let mut prev: Option<i64> = None;
    for &(seq, tf, len) in postings {
        let gap = prev.map_or(seq, |p| p - seq);
        put_varint(&mut out, u64::try_from(gap).unwrap_or(0));
        put_varint(&mut out, u64::from(tf));
        put_varint(&mut out, u64::from(len));
        prev = Some(seq);
    }
    out
}

/// Reads what [`encode_postings`] wrote, newest first.
struct Postings<'a> {
    bytes: &'a [u8],
    prev: Option<i64>,
}

impl<'a> Postings<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, prev: None }
    }

    /// The next posting; `Err` when the bytes are not such an encoding.
    fn next(&mut self) -> Result<Option<Posting>, ()> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let gap = get_varint(&mut self.bytes)
            .and_then(|g| i64::try_from(g).ok())
            .ok_or(())?;
        let seq = match self.prev {
            None => gap,
            Some(prev) if gap > 0 && gap <= prev => prev - gap,
            Some(_) => return Err(()),
        };
        let tf = get_u32(&mut self.bytes).ok_or(())?;
        let len = get_u32(&mut self.bytes).ok_or(())?;
        self.prev = Some(seq);
        Ok(Some((seq, tf, len)))
    }

    /// Appends every posting to `out`.
    fn read_into(bytes: &[u8], out: &mut Vec<Posting>) -> Result<(), ()> {
        let mut postings = Postings::new(bytes);
        while let Some(p) = postings.next()? {
            out.push(p);
        }
        Ok(())
    }

    #[cfg(test)]
    fn all(bytes: &[u8]) -> Result<Vec<Posting>, ()> {
        let mut out = Vec::new();
        Self::read_into(bytes, &mut out)?;
        Ok(out)
    }
}

/// A segment row's postings as `head` and `rest` hold them: the first
/// [`MAX_POSTINGS_PER_TERM`] (newest) and the others, if any.
fn split_postings(postings: &[Posting]) -> (Vec<u8>, Option<Vec<u8>>) {
    let (head, rest) = postings.split_at(postings.len().min(MAX_POSTINGS_PER_TERM));
    (encode_postings(head), (!rest.is_empty()).then(|| encode_postings(rest)))
}

/// Every posting of a segment row, newest first.
fn join_postings(id: &ConversationId, head: &[u8], rest: Option<&[u8]>) -> Result<Vec<Posting>, StoreError> {
    let mut out = Vec::new();
    Postings::read_into(head, &mut out)
        .and_then(|()| rest.map_or(Ok(()), |rest| Postings::read_into(rest, &mut out)))
        .map_err(|()| unreadable(id, "a segment's postings"))?;
    Ok(out)
}

fn unreadable(id: &ConversationId, what: &str) -> StoreError {
    StoreError::corrupt(id, format!("its recall index is unreadable ({what})"))
}

// ---------------------------------------------------------------------------------------
// Writing and forgetting, inside a commit's transaction

/// What a commit changes of the conversation's index totals (`conversations.recall_*`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    /// Indexed messages.
    pub(crate) docs: i64,
    /// Their total length.
    pub(crate) len: i64,
    /// Indexed messages in the tail.
    pub(crate) tail: i64,
    /// Where the tail starts: every indexed message below is in a segment.
    pub(crate) merged: i64,
}

impl Totals {
    /// Whether the tail should become a segment in a commit that leaves `next_seq` next.
    pub(crate) fn tail_is_full(&self, next_seq: i64) -> bool {
        self.tail >= TAIL || (self.tail > 0 && next_seq - self.merged > TAIL_SPAN)
    }
}

/// Forgets the indexed messages below `below` (before the commit deletes them): subtracts
/// them from `totals` (counted among the messages themselves, so it is exact whatever they
/// hold), deletes or rewrites the segments holding them, and starts the tail at `below` at
/// the earliest (what was below is gone), so that a conversation that drops what leaves its
/// window keeps a short tail range rather than making segments of it.
pub(crate) fn forget_below(
    tx: &Transaction<'_>,
    id: &ConversationId,
    below: i64,
    totals: &mut Totals,
) -> Result<(), StoreError> {
    let err = |e| db_error("forgetting indexed messages", e);
    let (docs, len, tail): (i64, i64, i64) = tx
        .prepare_cached(
            "SELECT count(*), coalesce(sum(recall_len), 0), coalesce(sum(seq >= ?3), 0) FROM messages
             WHERE conversation_id = ?1 AND seq < ?2 AND recall_len IS NOT NULL",
        )
        .and_then(|mut s| {
            s.query_row(params![id.as_str(), below, totals.merged], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
        })
        .map_err(err)?;
    totals.docs -= docs;
    totals.len -= len;
    totals.tail -= tail;
    totals.merged = totals.merged.max(below);
    if docs == tail {
        // None of them is in a segment.
        return Ok(());
    }
    let segments: Vec<(i64, i64)> = {
        let mut stmt = tx
            .prepare_cached("SELECT segment, last_seq FROM recall_segments WHERE conversation_id = ?1 AND segment < ?2")
            .map_err(err)?;
        let found = stmt
            .query_map(params![id.as_str(), below], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(err)?;
        found.collect::<Result<_, _>>().map_err(err)?
    };
    for (segment, last_seq) in segments {
        if last_seq < below {
            delete_segment(tx, id.as_str(), segment)?;
        } else {
            trim_segment(tx, id, segment, last_seq, below)?;
        }
    }
    Ok(())
}

fn delete_segment(tx: &Transaction<'_>, id: &str, segment: i64) -> Result<(), StoreError> {
    let err = |e| db_error("deleting a recall segment", e);
    tx.prepare_cached("DELETE FROM recall_postings WHERE conversation_id = ?1 AND segment = ?2")
        .and_then(|mut s| s.execute(params![id, segment]))
        .map_err(err)?;
    tx.prepare_cached("DELETE FROM recall_segments WHERE conversation_id = ?1 AND segment = ?2")
        .and_then(|mut s| s.execute(params![id, segment]))
        .map_err(err)?;
    Ok(())
}

/// Drops the postings below `below` from a segment that also holds newer ones (it keeps its
/// key, so segments still sort by age).
fn trim_segment(
    tx: &Transaction<'_>,
    id: &ConversationId,
    segment: i64,
    last_seq: i64,
    below: i64,
) -> Result<(), StoreError> {
    let err = |e| db_error("trimming a recall segment", e);
    let rows: Vec<(String, Vec<u8>, Option<Vec<u8>>)> = {
        let mut stmt = tx
            .prepare_cached("SELECT term, head, rest FROM recall_postings WHERE conversation_id = ?1 AND segment = ?2")
            .map_err(err)?;
        let found = stmt
            .query_map(params![id.as_str(), segment], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(err)?;
        found.collect::<Result<_, _>>().map_err(err)?
    };
    let mut update = tx
        .prepare_cached(
            "UPDATE recall_postings SET df = ?4, head = ?5, rest = ?6
             WHERE conversation_id = ?1 AND segment = ?2 AND term = ?3",
        )
        .map_err(err)?;
    let mut delete = tx
        .prepare_cached("DELETE FROM recall_postings WHERE conversation_id = ?1 AND segment = ?2 AND term = ?3")
        .map_err(err)?;
    for (term, head, rest) in rows {
        let mut postings = join_postings(id, &head, rest.as_deref())?;
        let had = postings.len();
        postings.retain(|p| p.0 >= below);
        if postings.is_empty() {
            delete.execute(params![id.as_str(), segment, term]).map_err(err)?;
        } else if postings.len() < had {
            let (head, rest) = split_postings(&postings);
            update
                .execute(params![id.as_str(), segment, term, postings.len() as i64, head, rest])
                .map_err(err)?;
        }
    }
    let docs: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM messages
             WHERE conversation_id = ?1 AND seq >= ?2 AND seq <= ?3 AND recall_len IS NOT NULL",
        )
        .and_then(|mut s| s.query_row(params![id.as_str(), below, last_seq], |r| r.get(0)))
        .map_err(err)?;
    if docs == 0 {
        return delete_segment(tx, id.as_str(), segment);
    }
    tx.prepare_cached("UPDATE recall_segments SET docs = ?3 WHERE conversation_id = ?1 AND segment = ?2")
        .and_then(|mut s| s.execute(params![id.as_str(), segment, docs]))
        .map_err(err)?;
    Ok(())
}

/// Makes the tail from `merged` on a segment, then merges segments as [`FANOUT`] says.
pub(crate) fn flush_tail(tx: &Transaction<'_>, id: &ConversationId, merged: i64) -> Result<(), StoreError> {
    let err = |e| db_error("indexing the newest messages for recall", e);
    let docs: Vec<(i64, u32, Vec<u8>)> = {
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, recall_len, recall_terms FROM messages
                 WHERE conversation_id = ?1 AND seq >= ?2 AND recall_terms IS NOT NULL ORDER BY seq",
            )
            .map_err(err)?;
        let found = stmt
            .query_map(params![id.as_str(), merged], |r| {
                Ok((
                    r.get(0)?,
                    u32::try_from(r.get::<_, i64>(1)?.max(0)).unwrap_or(u32::MAX),
                    r.get(2)?,
                ))
            })
            .map_err(err)?;
        found.collect::<Result<_, _>>().map_err(err)?
    };
    let (Some(first), Some(last)) = (docs.first(), docs.last()) else {
        return Ok(());
    };
    let (segment, last_seq) = (first.0, last.0);
    let mut terms: BTreeMap<&str, Vec<Posting>> = BTreeMap::new();
    for (seq, len, blob) in docs.iter().rev() {
        for (term, tf) in decode_doc(blob).ok_or_else(|| unreadable(id, "a message's terms"))? {
            terms.entry(term).or_default().push((*seq, tf, *len));
        }
    }
    insert_segment(
        tx,
        id.as_str(),
        segment,
        last_seq,
        docs.len() as i64,
        terms.into_iter().map(Ok),
    )?;
    merge_segments(tx, id)
}

fn insert_segment<'t>(
    tx: &Transaction<'_>,
    id: &str,
    segment: i64,
    last_seq: i64,
    docs: i64,
    terms: impl IntoIterator<Item = Result<(&'t str, Vec<Posting>), StoreError>>,
) -> Result<(), StoreError> {
    let err = |e| db_error("writing a recall segment", e);
    tx.prepare_cached("INSERT INTO recall_segments (conversation_id, segment, last_seq, docs) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![id, segment, last_seq, docs]))
        .map_err(err)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO recall_postings (conversation_id, segment, term, df, head, rest) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(err)?;
    for found in terms {
        let (term, postings) = found?;
        let (head, rest) = split_postings(&postings);
        insert
            .execute(params![id, segment, term, postings.len() as i64, head, rest])
            .map_err(err)?;
    }
    Ok(())
}

/// The size tier of a segment of `docs` messages: 0 below `TAIL · FANOUT`, then one more for
/// each `FANOUT` times as many.
fn tier(docs: i64) -> u32 {
    let mut tier = 0;
    let mut bound = TAIL.saturating_mul(FANOUT as i64);
    while docs >= bound && bound < i64::MAX {
        tier += 1;
        bound = bound.saturating_mul(FANOUT as i64);
    }
    tier
}

/// While the newest [`FANOUT`] segments are of one tier, merges them into one.
fn merge_segments(tx: &Transaction<'_>, id: &ConversationId) -> Result<(), StoreError> {
    let err = |e| db_error("merging recall segments", e);
    loop {
        let segments: Vec<(i64, i64, i64)> = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT segment, last_seq, docs FROM recall_segments WHERE conversation_id = ?1 ORDER BY segment",
                )
                .map_err(err)?;
            let found = stmt
                .query_map([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(err)?;
            found.collect::<Result<_, _>>().map_err(err)?
        };
        let Some(newest) = segments.len().checked_sub(FANOUT).map(|from| &segments[from..]) else {
            return Ok(());
        };
        let t = tier(newest[0].2);
        if newest.iter().any(|s| tier(s.2) != t) {
            return Ok(());
        }
        let (from, last_seq) = (newest[0].0, newest[FANOUT - 1].1);
        let docs: i64 = newest.iter().map(|s| s.2).sum();
        // Every segment from `from` on is one of these: they are the newest.
        type Row = (String, i64, Vec<u8>, Option<Vec<u8>>);
        let rows: Vec<Row> = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT term, segment, head, rest FROM recall_postings WHERE conversation_id = ?1 AND segment >= ?2",
                )
                .map_err(err)?;
            let found = stmt
                .query_map(params![id.as_str(), from], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(err)?;
            found.collect::<Result<_, _>>().map_err(err)?
        };
        // Per term: each segment's key, head and rest.
        type Parts<'r> = Vec<(i64, &'r [u8], Option<&'r [u8]>)>;
        let mut terms: BTreeMap<&str, Parts<'_>> = BTreeMap::new();
        for (term, segment, head, rest) in &rows {
            terms
                .entry(term.as_str())
                .or_default()
                .push((*segment, head.as_slice(), rest.as_deref()));
        }
        // Decoded one term at a time, as the merged segment is written.
        let merged = terms.into_iter().map(|(term, mut parts)| {
            // Newest segment first: their postings, each newest first, follow one another.
            parts.sort_unstable_by_key(|p| std::cmp::Reverse(p.0));
            let mut postings = Vec::new();
            for (_, head, rest) in parts {
                postings.extend(join_postings(id, head, rest)?);
            }
            Ok((term, postings))
        });
        tx.prepare_cached("DELETE FROM recall_postings WHERE conversation_id = ?1 AND segment >= ?2")
            .and_then(|mut s| s.execute(params![id.as_str(), from]))
            .map_err(err)?;
        tx.prepare_cached("DELETE FROM recall_segments WHERE conversation_id = ?1 AND segment >= ?2")
            .and_then(|mut s| s.execute(params![id.as_str(), from]))
            .map_err(err)?;
        insert_segment(tx, id.as_str(), from, last_seq, docs, merged)?;
    }
}

/// Deletes the whole index of conversation `id` (cleared, or expired and written anew); the
/// messages' own index columns go with the messages.
pub(crate) fn delete_all(tx: &Transaction<'_>, id: &str) -> Result<(), StoreError> {
    let err = |e| db_error("deleting a conversation's recall index", e);
    for sql in [
        "DELETE FROM recall_postings WHERE conversation_id = ?1",
        "DELETE FROM recall_segments WHERE conversation_id = ?1",
    ] {
        tx.prepare_cached(sql).and_then(|mut s| s.execute([id])).map_err(err)?;
    }
    Ok(())
}

/// Deletes the indexes of the conversations expired at `now` (Unix milliseconds), before
/// the conversations themselves.
pub(crate) fn delete_expired(tx: &Transaction<'_>, now: i64) -> Result<(), StoreError> {
    let err = |e| db_error("purging the recall index of expired conversations", e);
    for sql in [
        "DELETE FROM recall_postings WHERE conversation_id IN
             (SELECT id FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?1)",
        "DELETE FROM recall_segments WHERE conversation_id IN
             (SELECT id FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?1)",
    ] {
        tx.prepare_cached(sql).and_then(|mut s| s.execute([now])).map_err(err)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Searching

const WHAT: &str = "searching a conversation";

/// A posting a search takes: the message's seq, the query term's place, its count there and
/// the message's length.
#[derive(Clone, Copy)]
struct Taken {
    seq: i64,
    place: usize,
    tf: u32,
    len: u32,
}

/// What a search gathers before scoring: per query term its document frequency and how many
/// of its postings it took, and those postings.
struct Gathered {
    df: Vec<u64>,
    taken: Vec<usize>,
    before: i64,
    /// Whether postings are gathered at all (not when no message could be a hit).
    collect: bool,
    postings: Vec<Taken>,
}

impl Gathered {
    /// Takes the posting of the query term at `place` if it is below `before` and the term
    /// has room under the cap; postings come newest first.
    fn take(&mut self, place: usize, (seq, tf, len): Posting) {
        if !self.collect || seq >= self.before || self.taken[place] >= MAX_POSTINGS_PER_TERM {
            return;
        }
        self.taken[place] += 1;
        self.postings.push(Taken { seq, place, tf, len });
    }

    /// Whether the query term at `place` takes no more postings.
    fn full(&self, place: usize) -> bool {
        !self.collect || self.taken[place] >= MAX_POSTINGS_PER_TERM
    }
}

/// One read transaction, so that every statement sees the same commits (see the module
/// docs).
pub(crate) fn search(
    conn: &mut Connection,
    id: &ConversationId,
    query: &SearchQuery,
) -> Result<SearchResult, StoreError> {
    let err = |e| db_error(WHAT, e);
    let tx = conn.transaction().map_err(err)?;
    let totals: Option<(i64, i64, i64, i64)> = tx
        .prepare_cached(
            "SELECT recall_docs, recall_len, recall_tail, recall_merged FROM conversations
             WHERE id = ?1 AND (expires_at IS NULL OR expires_at > ?2)",
        )
        .and_then(|mut s| {
            s.query_row(params![id.as_str(), now_ms()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .map_err(err)?;
    let Some((docs, total_len, tail, merged)) = totals else {
        return Ok(SearchResult::default());
    };
    let (docs, total_len) = (
        rows::to_u64(id, docs, "recall_docs")?,
        rows::to_u64(id, total_len, "recall_len")?,
    );
    let mut places: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, term) in query.terms.iter().enumerate() {
        places.entry(term.as_str()).or_default().push(i);
    }
    // Sequences above i64::MAX do not exist: such a bound excludes nothing stored.
    let before = i64::try_from(query.before).unwrap_or(i64::MAX);
    let mut g = Gathered {
        df: vec![0; query.terms.len()],
        taken: vec![0; query.terms.len()],
        before,
        collect: query.limit > 0 && before > 1,
        postings: Vec::new(),
    };
    if docs > 0 && !query.terms.is_empty() {
        if tail > 0 {
            gather_tail(&tx, id, merged, &places, &mut g)?;
        }
        if tail < i64::try_from(docs).unwrap_or(i64::MAX) {
            gather_segments(&tx, id, query, &places, &mut g)?;
        }
    }
    let ranked = rank(g.postings, &g.df, docs, total_len, query.limit);
    let mut hits = Vec::with_capacity(ranked.len());
    {
        let mut message = tx
            .prepare_cached(
                "SELECT seq, tokens, json, counted_by, recall_at FROM messages WHERE conversation_id = ?1 AND seq = ?2",
            )
            .map_err(err)?;
        for (seq, len, tf) in ranked {
            let mut found = message.query(params![id.as_str(), seq]).map_err(err)?;
            // Index entries go with their messages; one without its message is left out, as
            // the reference leaves it out.
            if let Some(row) = found.next().map_err(err)? {
                let stored = rows::message(row, id, 0, WHAT)?;
                let at: Option<i64> = row.get(4).map_err(err)?;
                hits.push(LexicalHit::new(stored, at.unwrap_or(0), len, tf));
            }
        }
    }
    tx.commit().map_err(err)?;
    tracing::trace!(hits = hits.len(), "searched");
    Ok(SearchResult::new(docs, total_len, g.df, hits))
}

/// The best `limit` of the messages `postings` reach, best first, by the contract's order
/// (rounded score descending, then seq descending): each with its seq, length and the query
/// terms' counts.
fn rank(mut postings: Vec<Taken>, df: &[u64], docs: u64, total_len: u64, limit: usize) -> Vec<(i64, u32, Vec<u32>)> {
    // Grouped by message; scored with one reused buffer of counts.
    postings.sort_unstable_by_key(|t| t.seq);
    let mut tf = vec![0u32; df.len()];
    // (score, seq, where its postings start and end)
    let mut scored: Vec<(f64, i64, usize, usize)> = Vec::new();
    let mut start = 0;
    while start < postings.len() {
        let seq = postings[start].seq;
        let end = start + postings[start..].iter().take_while(|t| t.seq == seq).count();
        for t in &postings[start..end] {
            tf[t.place] = t.tf;
        }
        let score = rounded(bm25(docs, total_len, df, postings[start].len, &tf));
        scored.push((score, seq, start, end));
        for t in &postings[start..end] {
            tf[t.place] = 0;
        }
        start = end;
    }
    let better = |a: &(f64, i64, usize, usize), b: &(f64, i64, usize, usize)| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1));
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit, better);
        scored.truncate(limit);
    }
    scored.sort_unstable_by(better);
    scored
        .into_iter()
        .map(|(_, seq, start, end)| {
            let mut tf = vec![0u32; df.len()];
            for t in &postings[start..end] {
                tf[t.place] = t.tf;
            }
            (seq, postings[start].len, tf)
        })
        .collect()
}

/// The tail's messages, newest first: every query term they hold counts and is a posting.
fn gather_tail(
    tx: &Transaction<'_>,
    id: &ConversationId,
    merged: i64,
    places: &HashMap<&str, Vec<usize>>,
    g: &mut Gathered,
) -> Result<(), StoreError> {
    let err = |e| db_error(WHAT, e);
    let mut stmt = tx
        .prepare_cached(
            "SELECT seq, recall_len, recall_terms FROM messages
             WHERE conversation_id = ?1 AND seq >= ?2 AND recall_terms IS NOT NULL ORDER BY seq DESC",
        )
        .map_err(err)?;
    let mut found = stmt.query(params![id.as_str(), merged]).map_err(err)?;
    while let Some(row) = found.next().map_err(err)? {
        let seq: i64 = row.get(0).map_err(err)?;
        let len: i64 = row.get(1).map_err(err)?;
        let len = u32::try_from(len.max(0)).unwrap_or(u32::MAX);
        let terms = row
            .get_ref(2)
            .map_err(err)?
            .as_blob()
            .ok()
            .and_then(decode_doc)
            .ok_or_else(|| unreadable(id, "a message's terms"))?;
        for (term, tf) in terms {
            for &place in places.get(term).into_iter().flatten() {
                g.df[place] += 1;
                g.take(place, (seq, tf, len));
            }
        }
    }
    Ok(())
}

/// Each query term's rows in the segments, newest segment first: their counts always, their
/// postings while the term takes more.
fn gather_segments(
    tx: &Transaction<'_>,
    id: &ConversationId,
    query: &SearchQuery,
    places: &HashMap<&str, Vec<usize>>,
    g: &mut Gathered,
) -> Result<(), StoreError> {
    let err = |e| db_error(WHAT, e);
    // Walks the conversation's segments backwards by key (newest first) and looks the term
    // up in each, without a sort. A row's newest postings are read with it; its older ones
    // only when those are not enough (`before` inside the segment).
    let mut stmt = tx
        .prepare_cached(
            "SELECT s.segment, p.df, p.head FROM recall_segments s
             JOIN recall_postings p ON p.conversation_id = s.conversation_id AND p.segment = s.segment AND p.term = ?2
             WHERE s.conversation_id = ?1 ORDER BY s.segment DESC",
        )
        .map_err(err)?;
    let mut older = tx
        .prepare_cached("SELECT rest FROM recall_postings WHERE conversation_id = ?1 AND segment = ?2 AND term = ?3")
        .map_err(err)?;
    for (i, term) in query.terms.iter().enumerate() {
        let places = places.get(term.as_str()).map_or(&[][..], Vec::as_slice);
        // A term given twice is gathered once, for both places.
        if places.first() != Some(&i) {
            continue;
        }
        let mut found = stmt.query(params![id.as_str(), term]).map_err(err)?;
        while let Some(row) = found.next().map_err(err)? {
            let segment: i64 = row.get(0).map_err(err)?;
            let df = rows::to_u64(id, row.get(1).map_err(err)?, "df")?;
            for &place in places {
                g.df[place] += df;
            }
            // A segment's postings all lie at or above its key.
            if g.full(i) || segment >= g.before {
                continue;
            }
            let head = row
                .get_ref(2)
                .map_err(err)?
                .as_blob()
                .map_err(|_| unreadable(id, "a segment's postings"))?;
            take_postings(id, head, places, g)?;
            // The head holds the first MAX_POSTINGS_PER_TERM: the rest exists past that.
            if df > MAX_POSTINGS_PER_TERM as u64 && !g.full(i) {
                let rest: Vec<u8> = older
                    .query_row(params![id.as_str(), segment, term], |r| r.get(0))
                    .map_err(err)?;
                take_postings(id, &rest, places, g)?;
            }
        }
    }
    Ok(())
}

/// Takes postings from `bytes`, newest first, for the query term at `places` while it takes more.
fn take_postings(id: &ConversationId, bytes: &[u8], places: &[usize], g: &mut Gathered) -> Result<(), StoreError> {
    let mut postings = Postings::new(bytes);
    while places.first().is_some_and(|&i| !g.full(i)) {
        let Some(posting) = postings.next().map_err(|()| unreadable(id, "a segment's postings"))? else {
            break;
        };
        for &place in places {
            g.take(place, posting);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chatmem::recall::MemoryIndex;
    use chatmem::store::{Commit, Snapshot, StoredMessage};
    use chatmem::{Message, Retention};

    use super::*;

    fn open() -> Connection {
        let mut conn = Connection::open_in_memory().expect("an in-memory database");
        crate::migrate::migrate(&mut conn).expect("the schema");
        conn
    }

    /// A deterministic xorshift generator: the same corpus on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        /// A word of a vocabulary of `n` where word k is about k times rarer than word 1.
        fn word(&mut self, n: u64) -> String {
            let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
            format!("w{}", ((n as f64).powf(u) as u64).min(n))
        }

        fn text(&mut self, words: u64, vocabulary: u64) -> String {
            (0..words).map(|_| self.word(vocabulary)).collect::<Vec<_>>().join(" ")
        }
    }

    /// A conversation written through `sql::commit` and, alongside, the reference index.
    struct Both {
        conn: Connection,
        id: ConversationId,
        snap: Snapshot,
        reference: MemoryIndex,
    }

    impl Both {
        fn new(name: &str) -> Self {
            Self {
                conn: open(),
                id: ConversationId::new(name).expect("id"),
                snap: Snapshot::empty(),
                reference: MemoryIndex::new(),
            }
        }

        /// Commits `texts` (indexed or not); with `start`, moves the window there and drops
        /// what leaves it; else keeps everything.
        fn write(&mut self, texts: &[String], index: bool, start: Option<u64>) {
            let retention = match start {
                Some(_) => Retention::DropEvicted,
                None => Retention::KeepHistory,
            };
            let mut builder = Commit::on(&self.snap).index(index).retention(retention);
            for text in texts {
                builder = builder.append(Message::user(text.as_str()), 3);
            }
            if let Some(start) = start {
                builder = builder.window_start(start);
            }
            let commit = builder.build().expect("a valid commit");
            self.reference.add(commit.index(), 0);
            // What the next commit needs of the conversation, without loading its window.
            self.snap.version = crate::sql::commit(&mut self.conn, &self.id, &commit).expect("commit");
            (self.snap.window_start, self.snap.next_seq) = (commit.window_start(), commit.next_seq());
            if let Some(below) = commit.delete_below() {
                self.reference.delete_below(below);
            }
        }

        fn history(&self) -> Vec<StoredMessage> {
            crate::sql::history(&self.conn, &self.id, 0, usize::MAX).expect("history")
        }

        /// Checks the store's answer to `query` against the reference's.
        fn agrees(&mut self, history: &[StoredMessage], query: &SearchQuery) -> SearchResult {
            let found = search(&mut self.conn, &self.id, query).expect("search");
            let want = self.reference.search(query, |seq| {
                let i = history.binary_search_by_key(&seq, |m| m.seq).ok()?;
                Some(history[i].clone())
            });
            let what = format!("{:?} before {} limit {}", query.terms, query.before, query.limit);
            assert_eq!(
                (found.docs, found.total_len, &found.df),
                (want.docs, want.total_len, &want.df),
                "{what}"
            );
            let seqs = |r: &SearchResult| r.hits.iter().map(|h| h.message.seq).collect::<Vec<_>>();
            assert_eq!(seqs(&found), seqs(&want), "{what}");
            for (got, want) in found.hits.iter().zip(&want.hits) {
                assert_eq!(
                    (got.len, &got.tf, &got.message),
                    (want.len, &want.tf, &want.message),
                    "{what}"
                );
            }
            found
        }

        fn segments(&self) -> Vec<(i64, i64, i64)> {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT segment, last_seq, docs FROM recall_segments WHERE conversation_id = ?1 ORDER BY segment",
                )
                .expect("prepare");
            stmt.query_map([self.id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .expect("segments")
                .collect::<Result<_, _>>()
                .expect("segments")
        }
    }

    /// Random queries over the vocabulary (with an absent word now and then, and a word given
    /// twice), each at several bounds and limits, checked against the reference.
    fn random_queries(both: &mut Both, rng: &mut Rng, vocabulary: u64, rounds: usize) {
        let history = both.history();
        let last = both.snap.next_seq;
        for round in 0..rounds {
            let mut terms: Vec<String> = (0..1 + rng.below(7)).map(|_| rng.word(vocabulary)).collect();
            if rng.below(10) == 0 {
                terms.push("absent".into());
            }
            if rng.below(20) == 0 {
                terms.push(terms[0].clone());
            }
            let limit = [1, 3, 20, 100, 10_000][round % 5];
            let before = match rng.below(4) {
                0 => u64::MAX,
                1 => last,
                2 => 1 + rng.below(last),
                _ => rng.below(last / 3 + 2),
            };
            both.agrees(&history, &SearchQuery::new(terms, before, limit));
        }
    }

    #[test]
    fn search_agrees_with_the_reference_through_flushes_merges_and_forgetting() {
        let mut both = Both::new("skewed");
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut written = 0u64;
        // Commits of 1 to 300 messages (tails flushed by size, merged segments), a few made
        // without recall (tails flushed by span), a few empty or punctuation-only messages.
        while written < 6000 {
            let n = if rng.below(8) == 0 {
                1 + rng.below(300)
            } else {
                1 + rng.below(6)
            };
            let texts: Vec<String> = (0..n)
                .map(|_| match rng.below(50) {
                    0 => "—…!!".to_string(),
                    _ => {
                        let words = 1 + rng.below(25);
                        rng.text(words, 400)
                    }
                })
                .collect();
            both.write(&texts, rng.below(6) != 0, None);
            written += n;
            if written % 997 < n {
                random_queries(&mut both, &mut rng, 400, 20);
            }
        }
        assert!(both.segments().len() > 1, "{:?}", both.segments());
        random_queries(&mut both, &mut rng, 400, 200);
        // Forgetting: a start inside a segment, then inside the tail, then past everything.
        let segments = both.segments();
        let inside = segments[segments.len() / 2];
        let middle = (inside.0 + (inside.1 - inside.0) / 2) as u64;
        let segments_before = both.segments().len();
        for start in [middle, both.snap.next_seq - 5] {
            let text = rng.text(10, 400);
            both.write(&[text], true, Some(start));
            random_queries(&mut both, &mut rng, 400, 60);
        }
        let left = both.segments();
        assert!(left.len() < segments_before, "{left:?}");
        for (segment, last, docs) in left {
            assert!(segment <= last && docs > 0, "{segment} {last} {docs}");
        }
        let next = both.snap.next_seq;
        let texts = [rng.text(10, 400), rng.text(10, 400)];
        both.write(&texts, true, Some(next + 1));
        random_queries(&mut both, &mut rng, 400, 20);
        assert!(both.segments().is_empty(), "{:?}", both.segments());
    }

    #[test]
    fn a_long_conversation_keeps_few_segments_and_caps_common_terms() {
        let mut both = Both::new("long");
        // 20,000 messages hold "common"; the oldest and one in the middle a rare word too.
        for batch in 0..40u64 {
            let texts: Vec<String> = (1..=500u64)
                .map(|i| match batch * 500 + i {
                    1 => "common walrus".to_string(),
                    10_000 => "common haystack pin".to_string(),
                    n => format!("common filler{}", n % 7),
                })
                .collect();
            both.write(&texts, true, None);
        }
        // Then turns of two, as a chat goes.
        for n in 0..300u64 {
            both.write(&[format!("common turn{n}"), format!("common reply{n}")], true, None);
        }
        let segments = both.segments();
        assert!(segments.len() <= 12, "{segments:?}");
        let history = both.history();
        for (terms, before, limit) in [
            (vec!["common", "walrus"], u64::MAX, 20),
            (vec!["walrus", "common"], 50, 20),
            (vec!["common"], 12_000, 20),
            (vec!["pin", "common", "filler3"], u64::MAX, 20),
            (vec!["common", "filler3", "walrus"], 10_001, 5),
            (vec!["turn7", "reply7", "common"], u64::MAX, 20),
        ] {
            let query = SearchQuery::new(terms.iter().map(|t| (*t).to_string()).collect(), before, limit);
            both.agrees(&history, &query);
        }
        // The walrus is found however old, its common term past the cap not counted.
        let query = SearchQuery::new(vec!["common".into(), "walrus".into()], u64::MAX, 20);
        let found = search(&mut both.conn, &both.id, &query).expect("search");
        assert_eq!((found.hits[0].message.seq, &found.hits[0].tf), (1, &vec![0, 1]));
        assert_eq!(found.df, [20_600, 1]);
    }

    #[test]
    fn a_conversation_that_drops_what_leaves_its_window_keeps_only_a_tail() {
        let mut both = Both::new("dropping");
        let mut rng = Rng(7);
        for turn in 0..1500u64 {
            let texts = [rng.text(12, 300), rng.text(12, 300)];
            // The window keeps the last 20 messages; what leaves it is deleted.
            let start = (both.snap.next_seq + 2).saturating_sub(20).max(1);
            both.write(&texts, true, Some(start));
            if turn % 300 == 299 {
                random_queries(&mut both, &mut rng, 300, 20);
            }
        }
        assert_eq!(both.segments(), [], "the tail holds the whole window");
        let found = search(
            &mut both.conn,
            &both.id,
            &SearchQuery::new(vec!["w1".into()], u64::MAX, 100),
        )
        .expect("search");
        assert_eq!(found.docs, 20);
    }

    #[test]
    fn encodings_round_trip_and_refuse_garbage() {
        let long = "x".repeat(300);
        let terms: Vec<(String, u32)> = ["order", "", "订单", "a\u{0}b", long.as_str(), "\u{80}"]
            .iter()
            .zip([1, 2, 300, u32::MAX, 7, 1])
            .map(|(t, n)| ((*t).to_string(), n))
            .collect();
        let encoded = encode_doc(&terms);
        let decoded: Vec<(String, u32)> = decode_doc(&encoded)
            .expect("decodes")
            .into_iter()
            .map(|(t, n)| (t.to_string(), n))
            .collect();
        assert_eq!(decoded, terms);
        assert_eq!(decode_doc(&[]), Some(Vec::new()));
        // Cut short, a length past the end, a varint that never ends, invalid UTF-8.
        assert_eq!(decode_doc(&encoded[..encoded.len() - 1]), None);
        assert_eq!(decode_doc(&[5, b'a']), None);
        assert_eq!(decode_doc(&[0x80; 12]), None);
        assert_eq!(decode_doc(&[1, 0xff, 1]), None);

        let postings = [(i64::MAX - 1, 3, 9), (1000, 1, u32::MAX), (999, u32::MAX, 0), (1, 1, 1)];
        assert_eq!(Postings::all(&encode_postings(&postings)), Ok(postings.to_vec()));
        assert_eq!(Postings::all(&[]), Ok(Vec::new()));
        // Seqs must fall: a zero gap, a gap past zero.
        assert_eq!(
            Postings::all(&encode_postings(&[(5, 1, 1)])[..]).map(|p| p.len()),
            Ok(1)
        );
        assert!(Postings::all(&[5, 1, 1, 0, 1, 1]).is_err());
        assert!(Postings::all(&[5, 1, 1, 6, 1, 1]).is_err());
        assert!(Postings::all(&[5, 1]).is_err());
    }

    #[test]
    fn tiers_grow_by_the_fanout() {
        let t = TAIL;
        let f = FANOUT as i64;
        assert_eq!([tier(1), tier(t), tier(t * f - 1)], [0, 0, 0]);
        assert_eq!([tier(t * f), tier(t * f * f - 1), tier(t * f * f)], [1, 1, 2]);
        assert!(tier(i64::MAX) < 40);
    }
}
