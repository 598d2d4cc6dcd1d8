//! Creating and upgrading the schema: numbered SQL files, applied once, under a named lock.
//!
//! MySQL commits DDL at once (no transactional migrations), so every step is idempotent
//! (`IF NOT EXISTS`, `DROP PROCEDURE IF EXISTS` before `CREATE PROCEDURE`) and a migration
//! interrupted half-way is simply run again by the next connect.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use chatmem::store::{StoreError, StoreErrorKind};
use chatmem_sql::SchemaVersion;

use crate::error::db_error;
use crate::sql::fill;

/// The migrations in order: (version, SQL of statements split at `-- next statement` lines).
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_updated_at.sql")),
    (3, include_str!("../migrations/0003_recall.sql")),
    (4, include_str!("../migrations/0004_vectors.sql")),
    (5, include_str!("../migrations/0005_facts.sql")),
];

/// The line between two statements of a migration file (a procedure body holds `;`).
const SPLIT: &str = "-- next statement\n";

/// The schema version this code writes and reads. 2 added `updated_at`, 3 the lexical index
/// for recall, 4 recall's vectors, 5 users' facts.
pub(crate) const LATEST: i32 = 5;

/// This crate and [`LATEST`], for the version checks' errors.
const VERSIONS: SchemaVersion = SchemaVersion {
    store: "chatmem-mysql",
    latest: LATEST,
};

/// How long a connect waits for another process's migration (seconds).
const LOCK_WAIT_SECS: u32 = 60;

/// Brings the tables of `prefix` to [`LATEST`]. Concurrent connects take turns through a
/// named lock (`GET_LOCK`, per database and prefix); a schema already at [`LATEST`] runs no
/// DDL, so a user without CREATE rights can still connect.
pub(crate) async fn migrate(conn: &mut Conn, prefix: &str, target: &str) -> Result<(), StoreError> {
    let err = |e| db_error(e, "migrating the schema", target);
    let lock: Option<i64> = conn
        .exec_first(
            "SELECT GET_LOCK(CONCAT('chatmem-', SHA1(CONCAT(DATABASE(), '.', ?))), ?)",
            (prefix, LOCK_WAIT_SECS),
        )
        .await
        .map_err(err)?;
    if lock != Some(1) {
        return Err(StoreError::new(
            StoreErrorKind::Unavailable,
            format!("migrating the schema on {target}: another connect held the migration lock for {LOCK_WAIT_SECS} s"),
        ));
    }
    let result = apply(conn, prefix, target).await;
    let released: Result<Option<i64>, _> = conn
        .exec_first(
            "SELECT RELEASE_LOCK(CONCAT('chatmem-', SHA1(CONCAT(DATABASE(), '.', ?))))",
            (prefix,),
        )
        .await;
    result?;
    released.map_err(err)?;
    Ok(())
}

async fn apply(conn: &mut Conn, prefix: &str, target: &str) -> Result<(), StoreError> {
    let err = |e| db_error(e, "migrating the schema", target);
    let current = recorded_version(conn, prefix).await.map_err(err)?;
    if current > LATEST {
        return Err(VERSIONS.too_new(current, &format!("with prefix {prefix}"), target));
    }
    if current == LATEST {
        return Ok(());
    }
    conn.query_drop(fill(
        "CREATE TABLE IF NOT EXISTS `{p}_schema_version` (
             version    INT NOT NULL PRIMARY KEY,
             applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
         ) ENGINE = InnoDB",
        prefix,
    ))
    .await
    .map_err(err)?;
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tracing::info!(prefix, version, "applying chatmem-mysql schema migration");
        for statement in fill(sql, prefix).split(SPLIT) {
            conn.query_drop(statement).await.map_err(err)?;
        }
        conn.exec_drop(
            fill("INSERT IGNORE INTO `{p}_schema_version` (version) VALUES (?)", prefix),
            (version,),
        )
        .await
        .map_err(err)?;
    }
    Ok(())
}

/// Checks, writing nothing, that the tables of `prefix` are at [`LATEST`].
pub(crate) async fn check(conn: &mut Conn, prefix: &str, target: &str) -> Result<(), StoreError> {
    let current = recorded_version(conn, prefix)
        .await
        .map_err(|e| db_error(e, "checking the schema", target))?;
    VERSIONS.check(current, &format!("with prefix {prefix}"), target)
}

/// The highest migration recorded for `prefix`; 0 when there is no version table.
async fn recorded_version(conn: &mut Conn, prefix: &str) -> Result<i32, mysql_async::Error> {
    let table = format!("{prefix}_schema_version");
    let exists: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            (table,),
        )
        .await?;
    if exists.unwrap_or(0) == 0 {
        return Ok(0);
    }
    let version: Option<i32> = conn
        .query_first(fill(
            "SELECT COALESCE(MAX(version), 0) FROM `{p}_schema_version`",
            prefix,
        ))
        .await?;
    Ok(version.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_1_to_latest() {
        assert!(VERSIONS.numbers_migrations(MIGRATIONS.iter().map(|&(v, _)| v)));
        for (_, sql) in MIGRATIONS {
            assert!(sql.split(SPLIT).all(|s| !s.trim().is_empty()));
        }
    }
}
