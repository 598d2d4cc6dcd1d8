//! Turning a [`Commit`] into the commit statement's parameters.

use chatmem::{Commit, Message, Retention, StoreError, StoreErrorKind};

/// TTLs are capped at about 1,000 years so the expiry stays a valid timestamp.
const MAX_TTL_MICROS: u128 = 1_000 * 366 * 24 * 3600 * 1_000_000;

/// A commit's statement parameters, checked and converted before anything is sent.
pub(crate) struct CommitParams {
    pub(crate) expected: i64,
    pub(crate) system_seq: Option<i64>,
    pub(crate) system_tokens: Option<i64>,
    pub(crate) system_json: Option<String>,
    pub(crate) window_start: i64,
    pub(crate) first_seq: Option<i64>,
    pub(crate) next_seq: Option<i64>,
    pub(crate) drop_evicted: bool,
    pub(crate) ttl_micros: Option<i64>,
    pub(crate) seqs: Vec<i64>,
    pub(crate) tokens: Vec<i64>,
    pub(crate) jsons: Vec<String>,
}

impl CommitParams {
    pub(crate) fn new(commit: &Commit) -> Result<Self, StoreError> {
        let invalid = |what: String| StoreError::new(StoreErrorKind::InvalidInput, what);
        let int = |value: u64, what: &str| {
            i64::try_from(value)
                .map_err(|_| invalid(format!("{what} {value} is beyond what PostgreSQL's bigint holds")))
        };
        let json = |m: &Message, seq: u64| {
            serde_json::to_string(m)
                .map_err(|e| invalid(format!("message {seq} cannot be written as JSON")).with_source(e))
        };
        let n = commit.append.len();
        let (mut seqs, mut tokens, mut jsons) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, m) in commit.append.iter().enumerate() {
            if let Some(first) = commit.append.first()
                && m.seq != first.seq.saturating_add(i as u64)
            {
                return Err(invalid(format!(
                    "appended sequences are not consecutive: {} follows {}",
                    m.seq,
                    first.seq.saturating_add(i as u64).saturating_sub(1)
                )));
            }
            seqs.push(int(m.seq, "sequence")?);
            tokens.push(i64::from(m.tokens));
            jsons.push(json(&m.message, m.seq)?);
        }
        let system = commit.system.as_ref();
        Ok(Self {
            expected: int(commit.expected_version, "expected version")?,
            system_seq: system.map(|s| int(s.seq, "system sequence")).transpose()?,
            system_tokens: system.map(|s| i64::from(s.tokens)),
            system_json: system.map(|s| json(&s.message, s.seq)).transpose()?,
            window_start: int(commit.window_start, "window start")?,
            first_seq: seqs.first().copied(),
            next_seq: seqs.last().map(|last| last.saturating_add(1)),
            drop_evicted: commit.retention == Retention::DropEvicted,
            ttl_micros: commit
                .ttl
                .map(|ttl| i64::try_from(ttl.as_micros().min(MAX_TTL_MICROS)).unwrap_or(i64::MAX)),
            seqs,
            tokens,
            jsons,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::StoredMessage;

    #[test]
    fn commit_params_reject_gaps() {
        let m = |seq| StoredMessage::new(seq, 1, Message::user("x"));
        let commit = Commit {
            expected_version: 0,
            system: None,
            append: vec![m(1), m(3)],
            window_start: 1,
            retention: Retention::KeepHistory,
            ttl: None,
        };
        assert!(matches!(CommitParams::new(&commit), Err(e) if e.kind() == StoreErrorKind::InvalidInput));
    }
}
