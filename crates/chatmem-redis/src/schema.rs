//! The schema version key: created on connect, a newer layout refused.

use chatmem::{StoreError, StoreErrorKind};

use crate::error::corrupt;
use crate::store::RedisStore;

/// The key layout version this code writes and reads.
pub const SCHEMA_VERSION: u64 = 1;

impl RedisStore {
    /// Creates the schema key if missing; refuses a layout newer than this code.
    pub(crate) async fn check_schema(&self) -> Result<(), StoreError> {
        let key = self.keys.schema();
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(&key)
            .arg(SCHEMA_VERSION)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(&key);
        let pipe = &pipe;
        let (stored,): (Option<String>,) = self
            .run(&format!("checking {key}"), |mut conn| async move {
                pipe.query_async(&mut conn).await
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
        // Version 1 is the first layout: nothing to migrate yet.
        Ok(())
    }
}
