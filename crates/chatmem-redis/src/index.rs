//! The conversation-id index (`<prefix>:ids`): adding, paging, and pruning the ids of
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
        inv.key(self.keys.index());
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

    /// Adds `ids` to the index (idempotent).
    pub(crate) async fn index_add(&self, ids: &[ConversationId]) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(self.keys.index());
        for id in ids {
            cmd.arg(0).arg(id.as_str());
        }
        let cmd = &cmd;
        self.run("adding to the conversation index", |mut conn| async move {
            cmd.query_async::<()>(&mut conn).await
        })
        .await
    }

    /// Removes `ids` from the index on Cluster, then puts back those that exist after
    /// all (created concurrently: the creator's own index update may have come before
    /// this removal); returns whether each exists now. Without the cross-slot atomicity of a single
    /// Redis this re-check is what keeps an existing conversation listed.
    pub(crate) async fn index_remove_checked(&self, ids: &[ConversationId]) -> Result<Vec<bool>, StoreError> {
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(self.keys.index());
        for id in ids {
            cmd.arg(id.as_str());
        }
        let cmd = &cmd;
        self.run("removing from the conversation index", |mut conn| async move {
            cmd.query_async::<()>(&mut conn).await
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
