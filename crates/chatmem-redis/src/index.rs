//! The conversation-id index (`<prefix>:ids`) and the recency index next to it (see
//! [`Keys::recent`](crate::keys::Keys::recent)): adding, paging, and pruning the ids of
//! expired conversations, with the extra re-checks Redis Cluster needs.

use chatmem::ConversationId;
use chatmem::store::StoreError;

use crate::error::corrupt;
use crate::store::RedisStore;

/// How many index entries one `list` or `purge_expired` step checks at most.
pub(crate) const INDEX_BATCH: usize = 1000;

impl RedisStore {
    /// Checks that `ids` still exist, drops the expired ones from the index, and returns
    /// a flag per id.
    pub(crate) async fn prune(&self, ids: &[Vec<u8>]) -> Result<Vec<bool>, StoreError> {
        if self.conn.is_cluster() {
            return self.prune_cluster(ids).await;
        }
        let mut inv = self.scripts.prune.prepare_invoke();
        inv.key(self.keys.index()).key(self.keys.recent());
        let mut parsed = Vec::with_capacity(ids.len());
        for raw in ids {
            let id = index_id(raw)?;
            inv.key(self.keys.meta(&id)).arg(raw.as_slice());
            parsed.push(id);
        }
        let inv = &inv;
        let flags: Vec<i64> = self
            .run("checking listed conversations", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        if flags.len() != ids.len() {
            return Err(corrupt("redis: unexpected reply to the index check"));
        }
        Ok(flags.into_iter().map(|f| f == 1).collect())
    }

    /// [`prune`](Self::prune) on Cluster, where the meta keys and the index live in
    /// different slots: one `EXISTS` per id (sent concurrently, so about one round trip),
    /// then the index clean-up for the ids found missing.
    async fn prune_cluster(&self, raw_ids: &[Vec<u8>]) -> Result<Vec<bool>, StoreError> {
        let ids = raw_ids.iter().map(|raw| index_id(raw)).collect::<Result<Vec<_>, _>>()?;
        let mut live = self.exist(&ids).await?;
        let stale: Vec<usize> = (0..ids.len()).filter(|&i| !live[i]).collect();
        if !stale.is_empty() {
            let stale_ids: Vec<ConversationId> = stale.iter().map(|&i| ids[i].clone()).collect();
            let exists_now = self.index_remove_checked(&stale_ids).await?;
            // Created meanwhile: it exists now, so it is listed.
            for (&i, exists) in stale.iter().zip(exists_now) {
                live[i] = exists;
            }
        }
        Ok(live)
    }

    /// Whether each conversation of `ids` exists (its meta key does), with one `EXISTS`
    /// per id: on Cluster each goes to its own slot's node, all of them at once.
    async fn exist(&self, ids: &[ConversationId]) -> Result<Vec<bool>, StoreError> {
        let metas: Vec<String> = ids.iter().map(|id| self.keys.meta(id)).collect();
        let metas = &metas;
        let flags: Vec<i64> = self
            .run("checking listed conversations", |conn| async move {
                futures_util::future::try_join_all(metas.iter().map(|meta| {
                    let mut conn = conn.clone();
                    async move { redis::cmd("EXISTS").arg(meta).query_async::<i64>(&mut conn).await }
                }))
                .await
            })
            .await?;
        Ok(flags.into_iter().map(|f| f == 1).collect())
    }

    /// Adds `ids` to the index, and to the recency index with time 0 where they are not
    /// there yet (idempotent; one round trip: both keys share a slot).
    pub(crate) async fn index_add(&self, ids: &[ConversationId]) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("ZADD").arg(self.keys.index());
        for id in ids {
            pipe.arg(0).arg(id.as_str());
        }
        pipe.ignore().cmd("ZADD").arg(self.keys.recent()).arg("NX");
        for id in ids {
            pipe.arg(0).arg(id.as_str());
        }
        pipe.ignore();
        let pipe = &pipe;
        self.run("adding to the conversation index", |mut conn| async move {
            pipe.query_async::<()>(&mut conn).await
        })
        .await
    }

    /// Records on Cluster a commit of `id` applied at `micros` (the conversation's node's
    /// `TIME`, as the commit script returned it) in the recency index, after the script,
    /// and for a commit that `created` the conversation its index entry once more. `GT`
    /// keeps the latest time when two writers' updates arrive out of order.
    pub(crate) async fn touch_cluster(
        &self,
        id: &ConversationId,
        micros: &str,
        created: bool,
    ) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        if created {
            pipe.cmd("ZADD").arg(self.keys.index()).arg(0).arg(id.as_str()).ignore();
        }
        pipe.cmd("ZADD")
            .arg(self.keys.recent())
            .arg("GT")
            .arg(micros)
            .arg(id.as_str())
            .ignore();
        let pipe = &pipe;
        self.run("recording the commit in the recency index", |mut conn| async move {
            pipe.query_async::<()>(&mut conn).await
        })
        .await
    }

    /// Removes `ids` from the index and the recency index on Cluster, then puts back
    /// those that exist after all (created concurrently: the creator's own index update
    /// may have come before this removal; put back with time 0 when its recency entry
    /// went too); returns whether each exists now. Without the cross-slot atomicity of a
    /// single Redis this re-check is what keeps an existing conversation listed.
    pub(crate) async fn index_remove_checked(&self, ids: &[ConversationId]) -> Result<Vec<bool>, StoreError> {
        let mut pipe = redis::pipe();
        for key in [self.keys.index(), self.keys.recent()] {
            pipe.cmd("ZREM").arg(key);
            for id in ids {
                pipe.arg(id.as_str());
            }
            pipe.ignore();
        }
        let pipe = &pipe;
        self.run("removing from the conversation index", |mut conn| async move {
            pipe.query_async::<()>(&mut conn).await
        })
        .await?;
        let exist = self.exist(ids).await?;
        let back: Vec<ConversationId> = ids
            .iter()
            .zip(&exist)
            .filter(|(_, exists)| **exists)
            .map(|(id, _)| id.clone())
            .collect();
        if !back.is_empty() {
            self.index_add(&back).await?;
        }
        Ok(exist)
    }

    /// Up to `count` raw index entries after `after` (exclusive lexicographic bound).
    pub(crate) async fn index_range(&self, after: &[u8], count: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        let min = if after.is_empty() {
            b"-".to_vec()
        } else {
            let mut min = Vec::with_capacity(after.len() + 1);
            min.push(b'(');
            min.extend_from_slice(after);
            min
        };
        let mut cmd = redis::cmd("ZRANGEBYLEX");
        cmd.arg(self.keys.index())
            .arg(min)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(count);
        let cmd = &cmd;
        self.run("reading the conversation index", |mut conn| async move {
            cmd.query_async(&mut conn).await
        })
        .await
    }
}

/// An id read from the index.
pub(crate) fn index_id(raw: &[u8]) -> Result<ConversationId, StoreError> {
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| ConversationId::new(s).ok())
        .ok_or_else(|| corrupt("redis: the conversation index holds an invalid id"))
}
