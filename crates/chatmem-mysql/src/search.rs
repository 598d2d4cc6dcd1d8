//! Lexical search: its statements, their parameters, and reading their rows.
//!
//! A search reads, per query term, its [`MAX_POSTINGS_PER_TERM`] most recent postings before
//! `before` and its document frequency, kept by the commit in `{p}_index_df` (so nothing is
//! counted at search time), scores them by BM25 and joins the best to their messages: one
//! statement, one round trip. MariaDB has no `LATERAL`, so "the most recent postings of each
//! term" is one parenthesized `SELECT … ORDER BY seq DESC LIMIT 512` per term, each a backward
//! range of the postings' primary key: the statement has a slot per term. Statements are made
//! for 1, 2, 4, … [`MAX_SLOTS`] slots (a query fills the smallest that fits, the rest get NULL
//! terms, which match nothing), so a connection prepares at most a handful. A query of more
//! terms takes [`ANY`], which ranks each term's postings with a window function instead: the
//! same answer, at a cost that grows with the terms' frequencies.

use mysql_async::{Row, Value};

use chatmem::ConversationId;
use chatmem::recall::{BM25_B, BM25_K1, MAX_POSTINGS_PER_TERM, MAX_TERM_BYTES, SCORE_DECIMALS};
use chatmem::store::{LexicalHit, SearchQuery, SearchResult, StoreError, StoreErrorKind};

use crate::rows::{Column, Reader};

/// The most terms a slotted statement takes.
pub(crate) const MAX_SLOTS: usize = 256;

/// How many slotted statements there are: for 1, 2, 4, … [`MAX_SLOTS`] terms.
pub(crate) const SLOTTED: usize = MAX_SLOTS.trailing_zeros() as usize + 1;

/// A conversation is live while it has no expiry or its expiry is still ahead (UTC).
const LIVE: &str = "(c.expires_at IS NULL OR c.expires_at > UTC_TIMESTAMP(6))";

/// Over the conversation row joined as `c` and the postings as `p` (`seq, tf, len`, and their
/// term's document frequency `df`): the BM25 score of `p.seq`, as `chatmem::recall::bm25`
/// computes it, operation for operation, in `DOUBLE` (a plain `0.5` would be `DECIMAL`),
/// rounded as the contract says.
fn score() -> String {
    let (k1, b) = (format!("{BM25_K1:e}"), format!("{BM25_B:e}"));
    format!(
        "ROUND(SUM(LN(1e0 + (c.indexed_docs - p.df + 5e-1) / (p.df + 5e-1)) * p.tf * ({k1} + 1e0)
               / (p.tf + {k1} * (1e0 - {b} + {b} * p.len
                   / GREATEST(c.indexed_len * 1e0 / GREATEST(c.indexed_docs, 1), 1e0)))), {SCORE_DECIMALS})"
    )
}

/// The search with `slots` term slots (each `?` a term or NULL). Rows, by `kind`: 0, the
/// conversation's indexed messages (`a`) and their total length (`b`), and `vals`, the slots'
/// document frequencies as `slot:df,…` (a term in no message has none: 0), no row at all when
/// the conversation is unknown or expired; 2, a hit: its time (`a`), length (`b`), rounded
/// score, the slots whose considered postings hold it with their counts (`vals`, `slot:tf,…`)
/// and its message (seq, tokens, json, counted_by). The hits come in no order: the caller
/// sorts them by score, then seq descending, as the `LIMIT` chose them.
///
/// `p` is the considered postings, each branch joining the conversation row and its term's
/// `{p}_index_df` row by their primary keys with constants: the optimizer reads both once
/// (a frequency looked up per posting, by a subquery or a join, costs more than all the rest
/// of the search). A term in no message has no `{p}_index_df` row, so its branch is empty. A
/// hit's slots come from a bit mask (`BIT_OR`, 64 slots a mask) over its postings, and their
/// counts from one primary-key lookup each, for the hits only: aggregating every count per
/// posting would cost as much again.
///
/// Parameters: per slot `?` id, term, before; then id, limit; a term per slot; id; a term per
/// slot; id.
pub(crate) fn slotted(slots: usize) -> String {
    let cap = MAX_POSTINGS_PER_TERM;
    let postings: Vec<String> = (0..slots)
        .map(|k| {
            format!(
                "    (SELECT {k} AS pos, x.seq, x.tf, x.len, f.df
     FROM {{conv}} AS c
     JOIN {{df}} AS f ON f.ckey = c.index_key
     JOIN {{terms}} AS x ON x.ckey = c.index_key AND x.term = f.term
     WHERE c.id = ? AND f.term = ? AND x.seq < ?
     ORDER BY x.seq DESC LIMIT {cap})"
            )
        })
        .collect();
    let frequencies: Vec<String> = (0..slots)
        .map(|k| format!("CONCAT('{k}:', (SELECT f.df FROM {{df}} AS f WHERE f.ckey = c.index_key AND f.term = ?))"))
        .collect();
    // A comparison is 0 or 1, and shifting it is unsigned: bit 63 survives (an IF(…, 1 << n, 0)
    // would be signed, and clip it).
    let masks: Vec<String> = (0..slots.div_ceil(64))
        .map(|j| format!("BIT_OR((p.pos DIV 64 = {j}) << (p.pos MOD 64)) AS held{j}"))
        .collect();
    let tfs: Vec<String> = (0..slots)
        .map(|k| {
            format!(
                "IF(s.held{} & {}, CONCAT('{k}:', (SELECT x.tf FROM {{terms}} AS x
            WHERE x.ckey = c.index_key AND x.term = ? AND x.seq = s.seq)), NULL)",
                k / 64,
                1u64 << (k % 64)
            )
        })
        .collect();
    format!(
        "WITH p AS (
{postings}
),
s AS (
    SELECT p.seq, MAX(p.len) AS len, {masks},
           {score} AS score
    FROM {{conv}} AS c
    STRAIGHT_JOIN p
    WHERE c.id = ? AND {LIVE}
    GROUP BY p.seq
    ORDER BY score DESC, p.seq DESC
    LIMIT ?
)
SELECT 0 AS kind, c.indexed_docs AS a, c.indexed_len AS b, NULL AS score,
       CONCAT_WS(',', {frequencies}) AS vals,
       NULL AS seq, NULL AS tokens, NULL AS json, NULL AS counted_by
FROM {{conv}} AS c
WHERE c.id = ? AND {LIVE}
UNION ALL
SELECT 2, i.at_micros, s.len, s.score,
       CONCAT_WS(',', {tfs}),
       m.seq, m.tokens, m.json, m.counted_by
FROM {{conv}} AS c
STRAIGHT_JOIN s
JOIN {{msgs}} AS m ON m.conversation_id = c.id AND m.seq = s.seq
JOIN {{docs}} AS i ON i.ckey = c.index_key AND i.seq = s.seq
WHERE c.id = ?",
        postings = postings.join("\n    UNION ALL\n"),
        frequencies = frequencies.join(",\n           "),
        masks = masks.join(", "),
        score = score(),
        tfs = tfs.join(",\n       "),
    )
}

/// The search for any number of terms, as one JSON array of `[slot, term]`: the same rows as
/// [`slotted`], each term's most recent postings picked by `ROW_NUMBER()` over all of its
/// postings before `before`.
///
/// Parameters: id, the terms, before, id, id, limit, id, id.
pub(crate) fn any() -> String {
    format!(
        "WITH d AS (
    SELECT DISTINCT t.pos, CAST(t.term AS BINARY) AS term,
           (SELECT f.df FROM {{conv}} AS k JOIN {{df}} AS f ON f.ckey = k.index_key
            WHERE k.id = ? AND f.term = CAST(t.term AS BINARY)) AS df
    FROM JSON_TABLE(?, '$[*]' COLUMNS (
        pos INT PATH '$[0]',
        term VARCHAR({MAX_TERM_BYTES}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]')) AS t
),
p AS (
    SELECT r.pos, r.seq, r.tf, r.len, r.df
    FROM (SELECT d.pos, x.seq, x.tf, x.len, d.df,
                 ROW_NUMBER() OVER (PARTITION BY d.pos ORDER BY x.seq DESC) AS n
          FROM {{conv}} AS c
          STRAIGHT_JOIN d
          STRAIGHT_JOIN {{terms}} AS x ON x.ckey = c.index_key AND x.term = d.term AND x.seq < ?
          WHERE c.id = ?) AS r
    WHERE r.n <= {MAX_POSTINGS_PER_TERM}
),
s AS (
    SELECT p.seq, MAX(p.len) AS len, {score} AS score, GROUP_CONCAT(p.pos, ':', p.tf) AS tfs
    FROM {{conv}} AS c
    STRAIGHT_JOIN p
    WHERE c.id = ? AND {LIVE}
    GROUP BY p.seq
    ORDER BY score DESC, p.seq DESC
    LIMIT ?
)
SELECT 0 AS kind, c.indexed_docs AS a, c.indexed_len AS b, NULL AS score,
       (SELECT GROUP_CONCAT(d.pos, ':', d.df) FROM d) AS vals,
       NULL AS seq, NULL AS tokens, NULL AS json, NULL AS counted_by
FROM {{conv}} AS c
WHERE c.id = ? AND {LIVE}
UNION ALL
SELECT 2, i.at_micros, s.len, s.score, s.tfs, m.seq, m.tokens, m.json, m.counted_by
FROM {{conv}} AS c
STRAIGHT_JOIN s
JOIN {{msgs}} AS m ON m.conversation_id = c.id AND m.seq = s.seq
JOIN {{docs}} AS i ON i.ckey = c.index_key AND i.seq = s.seq
WHERE c.id = ?",
        score = score(),
    )
}

/// Which statement a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statement {
    /// The slotted statement at this index (for `1 << index` slots).
    Slotted(usize),
    /// [`any`].
    Any,
}

/// A search ready to send.
#[derive(Debug)]
pub(crate) struct Search {
    pub(crate) statement: Statement,
    pub(crate) params: Vec<Value>,
    /// Each slot's position in the query's terms.
    positions: Vec<usize>,
    terms: usize,
}

/// The statement and parameters of `query` on conversation `id`. A term longer than any
/// stored one matches nothing, so it gets no slot (its frequencies stay 0) rather than being
/// cut to a stored term's length.
pub(crate) fn prepare(id: &ConversationId, query: &SearchQuery) -> Result<Search, StoreError> {
    let (positions, terms): (Vec<usize>, Vec<&str>) = query
        .terms
        .iter()
        .enumerate()
        .filter(|(_, t)| t.len() <= MAX_TERM_BYTES)
        .map(|(i, t)| (i, t.as_str()))
        .unzip();
    let key = || Value::Bytes(id.as_str().as_bytes().to_vec());
    let before = Value::Int(i64::try_from(query.before).unwrap_or(i64::MAX));
    let limit = Value::UInt(u64::try_from(query.limit).unwrap_or(u64::MAX));
    let (statement, params) = if terms.len() <= MAX_SLOTS {
        let slots = terms.len().max(1).next_power_of_two();
        let term = |k: usize| {
            terms
                .get(k)
                .map_or(Value::NULL, |t| Value::Bytes(t.as_bytes().to_vec()))
        };
        let mut params = Vec::with_capacity(5 * slots + 4);
        for k in 0..slots {
            params.extend([key(), term(k), before.clone()]);
        }
        params.extend([key(), limit]);
        params.extend((0..slots).map(term));
        params.push(key());
        params.extend((0..slots).map(term));
        params.push(key());
        (Statement::Slotted(slots.trailing_zeros() as usize), params)
    } else {
        let slotted: Vec<(usize, &str)> = terms.iter().copied().enumerate().collect();
        let json = serde_json::to_string(&slotted).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                "the query terms cannot be written as JSON",
            )
            .with_source(e)
        })?;
        let params = vec![
            key(),
            Value::Bytes(json.into_bytes()),
            before,
            key(),
            key(),
            limit,
            key(),
            key(),
        ];
        (Statement::Any, params)
    };
    Ok(Search {
        statement,
        params,
        positions,
        terms: query.terms.len(),
    })
}

impl Search {
    /// Reads the statement's rows (see [`slotted`]). No row: an unknown or expired
    /// conversation.
    pub(crate) fn result(&self, id: &ConversationId, rows: &[Row]) -> Result<SearchResult, StoreError> {
        let read = Reader {
            id,
            what: "a search row",
        };
        // `slot:value,…` into `into` (by the slot's query position).
        let spread = |vals: Option<String>, into: &mut dyn FnMut(usize, u64)| -> Result<(), StoreError> {
            let unreadable = || StoreError::corrupt(id, "a search row's per-term values are unreadable");
            for pair in vals.iter().flat_map(|v| v.split(',')).filter(|p| !p.is_empty()) {
                let (slot, value) = pair
                    .split_once(':')
                    .and_then(|(s, v)| Some((s.parse::<usize>().ok()?, v.parse::<u64>().ok()?)))
                    .ok_or_else(unreadable)?;
                into(*self.positions.get(slot).ok_or_else(unreadable)?, value);
            }
            Ok(())
        };
        let mut totals: Option<(u64, u64)> = None;
        let mut df = vec![0; self.terms];
        let mut scored: Vec<(f64, LexicalHit)> = Vec::new();
        for row in rows {
            let (a, b) = (read.get::<Option<i64>>(row, 1)?, read.get::<Option<i64>>(row, 2)?);
            let vals = read.get::<Option<String>>(row, 4)?;
            if read.get::<i64>(row, 0)? == 0 {
                totals = Some((read.counter(a, "indexed_docs")?, read.counter(b, "indexed_len")?));
                spread(vals, &mut |pos, n| df[pos] = n)?;
                continue;
            }
            let json = read.get::<Option<String>>(row, 7)?;
            let counted_by = read.get::<Option<String>>(row, 8)?;
            let message = read.message(
                read.not_null(read.get::<Option<i64>>(row, 5)?, 5)?,
                read.not_null(read.get::<Option<i64>>(row, 6)?, 6)?,
                read.not_null(json.as_deref(), 7)?.as_bytes(),
                counted_by.as_deref(),
            )?;
            let len = u32::try_from(read.counter(b, "indexed length")?)
                .map_err(|_| StoreError::corrupt(id, "a search hit's length is out of range"))?;
            let mut tf = vec![0u32; self.terms];
            let mut wide = false;
            spread(vals, &mut |pos, n| match u32::try_from(n) {
                Ok(n) => tf[pos] = n,
                Err(_) => wide = true,
            })?;
            if wide {
                return Err(StoreError::corrupt(id, "a search hit's term frequency is out of range"));
            }
            let score = read.not_null(read.get::<Option<f64>>(row, 3)?, 3)?;
            scored.push((score, LexicalHit::new(message, read.not_null(a, 1)?, len, tf)));
        }
        let Some((docs, total_len)) = totals else {
            return Ok(SearchResult::default());
        };
        // The order the statement's LIMIT chose by: the rounded score, then the newer first.
        scored.sort_by(|(sa, a), (sb, b)| sb.total_cmp(sa).then(b.message.seq.cmp(&a.message.seq)));
        let hits = scored.into_iter().map(|(_, hit)| hit).collect();
        Ok(SearchResult::new(docs, total_len, df, hits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_is_written_with_double_literals_from_the_core_constants() {
        let score = score();
        assert!(
            score.contains("(1.2e0 + 1e0)") && score.contains("5e-1 * p.len"),
            "{score}"
        );
        assert!(score.ends_with(", 6)"), "{score}");
        assert!(
            !score.contains(" 0.5") && !score.contains(" 1.2 "),
            "no DECIMAL literal: {score}"
        );
    }

    #[test]
    fn a_query_fills_the_smallest_slotted_statement_and_counts_its_parameters() {
        let id = ConversationId::new("c").unwrap();
        let long = "x".repeat(MAX_TERM_BYTES + 1);
        for (n, slots) in [(0, 1), (1, 1), (2, 2), (3, 4), (5, 8), (MAX_SLOTS, MAX_SLOTS)] {
            let mut terms: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
            terms.insert(0, long.clone());
            let search = prepare(&id, &SearchQuery::new(terms, 10, 5)).unwrap();
            assert_eq!(search.statement, Statement::Slotted(slots.trailing_zeros() as usize));
            assert_eq!(search.params.len(), 5 * slots + 4, "{n} terms");
            assert_eq!(
                search.positions,
                (1..=n).collect::<Vec<_>>(),
                "the long term has no slot"
            );
            let sql = slotted(slots);
            assert_eq!(sql.matches('?').count(), search.params.len(), "{n} terms");
        }
        let terms: Vec<String> = (0..=MAX_SLOTS).map(|i| format!("t{i}")).collect();
        let search = prepare(&id, &SearchQuery::new(terms, 10, 5)).unwrap();
        assert_eq!(search.statement, Statement::Any);
        assert_eq!(any().matches('?').count(), search.params.len());
        assert_eq!(SLOTTED, 9);
    }
}
