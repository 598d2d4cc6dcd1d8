//! [`Store::recent`](chatmem::Store::recent) on Redis: the recency index
//! (`<prefix>:{<prefix>:ids}:recent`, ids scored by their last commit's time in
//! microseconds) read newest first with the recent script, a batch at a time, and the
//! ids committed before it existed listed in it on connect.

use chatmem::ConversationId;
use chatmem::store::{RecentConversation, RecentCursor, RecentPage, StoreError};

use crate::error::corrupt;
use crate::index::{INDEX_BATCH, index_id};
use crate::store::RedisStore;

/// Where a scan of the recency index goes on: an entry's score as Redis wrote it, and its id.
type Position = (String, Vec<u8>);

/// One batch of the recent script (see [`crate::scripts::RECENT`]).
struct Batch {
    /// The server's time, microseconds.
    now: String,
    /// The index ended within this batch.
    done: bool,
    /// The last entry read, if any.
    last: Option<Position>,
    /// The matching entries: raw id, score.
    entries: Vec<(Vec<u8>, String)>,
    /// Each entry's `PTTL` (single Redis only, whose entries are the live ones).
    pttls: Vec<i64>,
}

impl RedisStore {
    /// Up to `limit` (at least 1) live conversations whose id starts with `prefix`, newest
    /// first, after `before`: batches of at most [`INDEX_BATCH`] index entries until
    /// `limit + 1` are found or the index ends. Expired ids met are dropped from both
    /// indexes, as `list` does.
    pub(crate) async fn recent_page(
        &self,
        prefix: &str,
        before: Option<&RecentCursor>,
        limit: usize,
    ) -> Result<RecentPage, StoreError> {
        let limit = limit.max(1);
        let want = limit.saturating_add(1);
        let mut from: Option<Position> =
            before.map(|b| (b.updated_micros.to_string(), b.id.as_str().as_bytes().to_vec()));
        let mut found = Vec::new();
        loop {
            let batch = self.recent_batch(prefix, from.as_ref(), want - found.len()).await?;
            if self.conn.is_cluster() {
                found.extend(self.check_cluster(&batch.entries).await?);
            } else {
                if batch.pttls.len() != batch.entries.len() {
                    return Err(corrupt("redis: unexpected reply to the recency listing"));
                }
                let now = micros(&batch.now)?;
                for ((raw, score), pttl) in batch.entries.iter().zip(&batch.pttls) {
                    found.push(listed(raw, score, now, *pttl)?);
                }
            }
            if found.len() >= want || batch.done {
                break;
            }
            match batch.last {
                Some(last) => from = Some(last),
                None => break,
            }
        }
        Ok(RecentPage::from_overfetch(found, limit))
    }

    /// One run of the recent script from `from`, returning at most `want` matching entries.
    async fn recent_batch(&self, prefix: &str, from: Option<&Position>, want: usize) -> Result<Batch, StoreError> {
        let cluster = self.conn.is_cluster();
        let mut inv = self.scripts.recent.prepare_invoke();
        inv.key(self.keys.recent());
        if !cluster {
            inv.key(self.keys.index());
        }
        inv.arg(prefix);
        match from {
            Some((score, id)) => inv.arg(score.as_str()).arg(id.as_slice()),
            None => inv.arg("").arg(""),
        };
        inv.arg(want.min(INDEX_BATCH)).arg(INDEX_BATCH);
        if !cluster {
            inv.arg(self.keys.prefix());
        }
        let inv = &inv;
        type Reply = (String, i64, String, Vec<u8>, Vec<Vec<u8>>, Vec<String>, Vec<i64>);
        let (now, done, last_score, last_id, ids, scores, pttls): Reply = self
            .run("listing conversations by recency", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        if ids.len() != scores.len() {
            return Err(corrupt("redis: unexpected reply to the recency listing"));
        }
        Ok(Batch {
            now,
            done: done == 1,
            last: (!last_id.is_empty()).then_some((last_score, last_id)),
            entries: ids.into_iter().zip(scores).collect(),
            pttls,
        })
    }

    /// The live ones of `entries` on Cluster, where their meta keys live on other nodes
    /// than the index: one check script per id (its node's time and the key's `PTTL`),
    /// sent at once, then the expired ids dropped from the indexes.
    async fn check_cluster(&self, entries: &[(Vec<u8>, String)]) -> Result<Vec<RecentConversation>, StoreError> {
        let ids = entries
            .iter()
            .map(|(raw, _)| index_id(raw))
            .collect::<Result<Vec<_>, _>>()?;
        let invs: Vec<_> = ids
            .iter()
            .map(|id| {
                let mut inv = self.scripts.check.prepare_invoke();
                inv.key(self.keys.meta(id));
                inv
            })
            .collect();
        let invs = &invs;
        let checks: Vec<(String, i64)> = self
            .run("checking listed conversations", |conn| async move {
                futures_util::future::try_join_all(invs.iter().map(|inv| {
                    let mut conn = conn.clone();
                    async move { inv.invoke_async(&mut conn).await }
                }))
                .await
            })
            .await?;
        let mut live = Vec::with_capacity(ids.len());
        let mut stale: Vec<ConversationId> = Vec::new();
        for ((id, (raw, score)), (now, pttl)) in ids.into_iter().zip(entries).zip(checks) {
            if pttl == -2 {
                stale.push(id);
            } else {
                live.push(listed(raw, score, micros(&now)?, pttl)?);
            }
        }
        if !stale.is_empty() {
            // Those found created again meanwhile are left out: their new commit put them
            // at the top of the index, before this page.
            self.index_remove_checked(&stale).await?;
        }
        Ok(live)
    }

    /// Lists in the recency index, with time 0, the ids of the id index it lacks
    /// (conversations last committed by a chatmem without it): nothing but a size check
    /// while both hold as many ids, else a pass over the id index in batches of
    /// [`INDEX_BATCH`] (see [`crate::scripts::RECENT_BACKFILL`]). Batches rather than one
    /// `ZUNIONSTORE`, which would hold Redis for seconds on millions of conversations.
    pub(crate) async fn backfill_recent(&self) -> Result<(), StoreError> {
        let mut after: Vec<u8> = Vec::new();
        let mut added = 0i64;
        loop {
            let mut inv = self.scripts.recent_backfill.prepare_invoke();
            inv.key(self.keys.index())
                .key(self.keys.recent())
                .arg(after.as_slice())
                .arg(INDEX_BATCH);
            let inv = &inv;
            let (n, last): (i64, Vec<u8>) = self
                .run("listing earlier conversations by recency", |mut conn| async move {
                    inv.invoke_async(&mut conn).await
                })
                .await?;
            added += n;
            if last.is_empty() {
                break;
            }
            after = last;
        }
        if added > 0 {
            tracing::info!(
                added,
                prefix = self.keys.prefix(),
                "listed conversations committed before the redis recency index, with time 0"
            );
        }
        Ok(())
    }
}

/// A listed conversation from its index entry, the server's time and its meta key's `PTTL`.
fn listed(raw: &[u8], score: &str, now: i64, pttl: i64) -> Result<RecentConversation, StoreError> {
    Ok(RecentConversation {
        id: index_id(raw)?,
        updated_micros: micros(score)?,
        expires_micros: (pttl >= 0).then(|| now.saturating_add(pttl.saturating_mul(1000))),
    })
}

/// Microseconds as Redis wrote them: an integer, or a score in a double's notation.
fn micros(text: &str) -> Result<i64, StoreError> {
    text.parse::<i64>()
        .ok()
        .or_else(|| text.parse::<f64>().ok().filter(|f| f.is_finite()).map(|f| f as i64))
        .ok_or_else(|| corrupt(format!("redis: {text:?} is not a time in microseconds")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_redis_writes_them() {
        assert_eq!(micros("1764600000123456").unwrap(), 1_764_600_000_123_456);
        assert_eq!(micros("0").unwrap(), 0);
        assert_eq!(micros("1.5e3").unwrap(), 1500);
        assert!(micros("soon").is_err());
        assert!(micros("inf").is_err());
        let c = listed(b"a", "10", 1_000, 2).unwrap();
        assert_eq!((c.updated_micros, c.expires_micros), (10, Some(3_000)));
        assert_eq!(listed(b"a", "10", 1_000, -1).unwrap().expires_micros, None);
    }
}
