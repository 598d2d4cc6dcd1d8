//! Turning a [`Commit`] into the commit statement's parameters.
//!
//! A `Commit` cannot be built invalid, so nothing here checks sequences or the window:
//! values are only converted to what PostgreSQL stores.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chatmem::Summary;
use chatmem::store::{Commit, StoreError, StoredMessage};
use chatmem_sql::to_bigint;

/// The longest TTL written as an expiry: 100,000 years. PostgreSQL's timestamps end in
/// 294276 AD, so a much longer one could not be stored; as `ChatMemory::ttl` documents, a
/// TTL too long to represent never expires.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(100_000 * 366 * 24 * 3600);

/// A commit's statement parameters, converted before anything is sent.
pub(crate) struct CommitParams<'a> {
    pub(crate) expected: i64,
    pub(crate) system_seq: Option<i64>,
    pub(crate) system_tokens: Option<i64>,
    pub(crate) system_json: Option<String>,
    /// The system message's `StoredMessage::counted_by`.
    pub(crate) system_counted_by: Option<&'a str>,
    pub(crate) window_start: i64,
    pub(crate) next_seq: i64,
    /// [`Commit::delete_below`]: delete messages below this sequence; `None` deletes nothing.
    pub(crate) delete_below: Option<i64>,
    pub(crate) ttl_micros: Option<i64>,
    pub(crate) seqs: Vec<i64>,
    pub(crate) tokens: Vec<i64>,
    pub(crate) jsons: Vec<String>,
    /// Each appended message's `StoredMessage::counted_by`, `None` a NULL element.
    pub(crate) counted_by: Vec<Option<&'a str>>,
    /// [`Commit::token`] as the bigint with the same 64 bits.
    pub(crate) token: i64,
    /// [`Commit::summary`] as [`Summary::to_json`] writes it; `None` keeps the stored one.
    pub(crate) summary: Option<String>,
    /// Each appended message's length in terms when [`Commit::index`] indexes it (`None`: not
    /// indexed), in the order of `seqs`; empty when the commit indexes nothing.
    pub(crate) index_lens: Vec<Option<i64>>,
    /// The postings of [`Commit::index`], one per distinct term of each indexed message: the
    /// term, the message's seq, the term's count in it and the message's length.
    pub(crate) posting_terms: Vec<&'a str>,
    pub(crate) posting_seqs: Vec<i64>,
    pub(crate) posting_tfs: Vec<i64>,
    pub(crate) posting_lens: Vec<i64>,
}

impl<'a> CommitParams<'a> {
    pub(crate) fn new(commit: &'a Commit) -> Result<Self, StoreError> {
        let n = commit.appended().len();
        let (mut seqs, mut tokens, mut jsons) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let mut counted_by = Vec::with_capacity(n);
        for m in commit.appended() {
            seqs.push(bigint(m.seq, "sequence")?);
            tokens.push(i64::from(m.tokens));
            jsons.push(m.message_json()?);
            counted_by.push(m.counted_by.as_deref());
        }
        let system = commit.system();
        let index = commit.index();
        // Entries come in the appended messages' order, one each; matched by seq all the same.
        let lens: HashMap<u64, u32> = index.iter().map(|e| (e.seq, e.terms.len)).collect();
        let index_lens = if index.is_empty() {
            Vec::new()
        } else {
            commit
                .appended()
                .iter()
                .map(|m| lens.get(&m.seq).map(|&len| i64::from(len)))
                .collect()
        };
        let mut postings: Vec<(&str, i64, i64, i64)> =
            Vec::with_capacity(index.iter().map(|e| e.terms.terms.len()).sum());
        for entry in index {
            let seq = bigint(entry.seq, "indexed sequence")?;
            for (term, tf) in &entry.terms.terms {
                postings.push((term.as_str(), seq, i64::from(*tf), i64::from(entry.terms.len)));
            }
        }
        // In the primary key's order (terms byte-wise, as COLLATE "C" orders them): the rows
        // of one term land next to each other in the table and its index, so a search reads
        // few pages for a term's newest postings even before a vacuum marks them visible,
        // and the inserts walk the index in order.
        postings.sort_unstable_by(|a, b| (a.0.as_bytes(), a.1).cmp(&(b.0.as_bytes(), b.1)));
        let (mut posting_terms, mut posting_seqs, mut posting_tfs, mut posting_lens) = (
            Vec::with_capacity(postings.len()),
            Vec::with_capacity(postings.len()),
            Vec::with_capacity(postings.len()),
            Vec::with_capacity(postings.len()),
        );
        for (term, seq, tf, len) in postings {
            posting_terms.push(term);
            posting_seqs.push(seq);
            posting_tfs.push(tf);
            posting_lens.push(len);
        }
        Ok(Self {
            expected: bigint(commit.expected_version(), "expected version")?,
            system_seq: system.map(|s| bigint(s.seq, "system sequence")).transpose()?,
            system_tokens: system.map(|s| i64::from(s.tokens)),
            system_json: system.map(StoredMessage::message_json).transpose()?,
            system_counted_by: system.and_then(|s| s.counted_by.as_deref()),
            window_start: bigint(commit.window_start(), "window start")?,
            next_seq: bigint(commit.next_seq(), "next sequence")?,
            delete_below: commit.delete_below().map(|b| bigint(b, "delete bound")).transpose()?,
            ttl_micros: commit.ttl().and_then(ttl_micros),
            seqs,
            tokens,
            jsons,
            counted_by,
            token: token_bits(commit.token()),
            summary: commit.summary().map(Summary::to_json),
            index_lens,
            posting_terms,
            posting_seqs,
            posting_tfs,
            posting_lens,
        })
    }
}

/// A number as PostgreSQL's `bigint`.
fn bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    to_bigint(value, what, "PostgreSQL's bigint")
}

/// A commit token as PostgreSQL's `bigint`: the same 64 bits, so every u64 has one (a token
/// is only ever compared for equality, never ordered).
pub(crate) fn token_bits(token: u64) -> i64 {
    i64::from_ne_bytes(token.to_ne_bytes())
}

/// A TTL in microseconds, or `None` (never expires) beyond [`MAX_TTL`].
fn ttl_micros(ttl: Duration) -> Option<i64> {
    chatmem_sql::ttl_micros(ttl, MAX_TTL)
}

/// The bounds a cursor's time is held to before it is bound as a `timestamptz`: 1 µs before
/// the epoch (no commit is stamped earlier: rows from before schema 5 read the epoch itself)
/// and the end of year 9999. A cursor beyond either selects what the bound does, and
/// PostgreSQL would refuse a time outside its range.
const CURSOR_MICROS: (i64, i64) = (-1, 253_402_300_799_999_999);

/// A listing cursor's time (Unix microseconds) as the `timestamptz` it is compared with.
pub(crate) fn cursor_time(micros: i64) -> SystemTime {
    let micros = micros.clamp(CURSOR_MICROS.0, CURSOR_MICROS.1);
    let offset = Duration::from_micros(micros.unsigned_abs());
    // In range by the clamp, on every platform's SystemTime.
    let at = if micros < 0 {
        UNIX_EPOCH.checked_sub(offset)
    } else {
        UNIX_EPOCH.checked_add(offset)
    };
    at.unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_all_64_bits() {
        assert_eq!(token_bits(1), 1);
        assert_eq!(token_bits(u64::MAX), -1);
        assert_eq!(token_bits(1 << 63), i64::MIN);
        assert_ne!(token_bits(u64::MAX - 1), token_bits(u64::MAX));
    }

    #[test]
    fn ttls_too_long_to_store_never_expire() {
        assert_eq!(ttl_micros(Duration::from_secs(2)), Some(2_000_000));
        let two_thousand_years = Duration::from_secs(2_000 * 365 * 24 * 3600);
        assert_eq!(
            ttl_micros(two_thousand_years),
            Some(i64::try_from(two_thousand_years.as_micros()).unwrap()),
            "long TTLs are stored as they are, not capped"
        );
        assert!(ttl_micros(MAX_TTL).is_some());
        assert_eq!(ttl_micros(MAX_TTL + Duration::from_secs(1)), None);
        assert_eq!(ttl_micros(Duration::MAX), None);
    }

    #[test]
    fn cursor_times_round_trip_and_stay_in_range() {
        use chatmem::store::unix_micros;
        for micros in [0, 1, 1_700_000_000_123_456] {
            assert_eq!(unix_micros(cursor_time(micros)), micros);
        }
        assert!(cursor_time(i64::MIN) < UNIX_EPOCH);
        assert_eq!(unix_micros(cursor_time(i64::MAX)), CURSOR_MICROS.1);
    }
}
