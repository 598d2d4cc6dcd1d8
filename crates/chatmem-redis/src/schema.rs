//! The layout version key: created on connect, layout 1 upgraded, a newer layout refused.
//!
//! Layout 2 records which token counter made each count (`@<counter>` in a message member,
//! `sys_counted_by` in the meta hash; see [`crate::codec`] and the crate docs). Layout 1
//! data reads as is under layout 2 (no counter: `None`), so the upgrade only rewrites the
//! version key. The version is bumped all the same because layout 1 code cannot read what
//! layout 2 writes (it takes `3@cl100k_base` for a corrupt token count): it now refuses the
//! database on connect with `SchemaTooNew` instead.
//!
//! The meta hash's `summary` field is not a new layout: a missing field reads as no summary,
//! so older layout 2 data needs no conversion (see the crate docs for mixed versions).

use chatmem::store::{StoreError, StoreErrorKind};

use crate::error::corrupt;
use crate::store::RedisStore;

/// The key layout version this code writes and reads (2: token counters recorded).
pub const SCHEMA_VERSION: u64 = 2;

impl RedisStore {
    /// Creates the schema key if missing, upgrades layout 1, refuses a layout newer than
    /// this code.
    pub(crate) async fn check_schema(&self) -> Result<(), StoreError> {
        let key = self.keys.schema();
        let mut inv = self.scripts.schema.prepare_invoke();
        inv.key(&key).arg(SCHEMA_VERSION);
        let inv = &inv;
        let (found, stored): (Option<String>, Option<String>) = self
            .run(&format!("checking {key}"), |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        let stored: u64 = stored
            .as_deref()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| corrupt(format!("redis key {key} does not hold a schema version")))?;
        if stored > SCHEMA_VERSION {
            return Err(StoreError::new(
                StoreErrorKind::SchemaTooNew,
                format!("redis key {key} says schema {stored}; this chatmem knows up to {SCHEMA_VERSION}"),
            ));
        }
        if stored < SCHEMA_VERSION {
            // Only layout 1 ever preceded this one, and the script upgrades it: a smaller
            // number is not a version chatmem wrote.
            return Err(corrupt(format!(
                "redis key {key} says schema {stored}, which chatmem never wrote"
            )));
        }
        if let Some(from) = found.filter(|f| f.trim().parse() != Ok(stored)) {
            tracing::debug!(key, from, to = stored, "upgraded the redis key layout");
        }
        Ok(())
    }
}
