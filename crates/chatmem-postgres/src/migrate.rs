//! Creating and upgrading the schema: numbered SQL files, applied once, under a lock.

use deadpool_postgres::Client;
use deadpool_postgres::tokio_postgres::types::Type;
use deadpool_postgres::tokio_postgres::{self, GenericClient};

use chatmem::store::StoreError;
use chatmem_sql::SchemaVersion;

use crate::error::db_error;

/// The migrations in order: (version, SQL). Each runs once, in the same transaction that
/// records its version.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_commit_token.sql")),
    (3, include_str!("../migrations/0003_counted_by.sql")),
    (4, include_str!("../migrations/0004_summary.sql")),
    (5, include_str!("../migrations/0005_updated_at.sql")),
    (6, include_str!("../migrations/0006_recall.sql")),
    (7, include_str!("../migrations/0007_vectors.sql")),
    (8, include_str!("../migrations/0008_facts.sql")),
];

/// The schema version this code writes and reads. 2 added `commit_token`, 3 the
/// `counted_by` columns, 4 `summary`, 5 `updated_at` and its index, 6 the lexical index for
/// recall, 7 recall's vectors, 8 users' facts.
pub(crate) const LATEST: i32 = 8;

/// This crate and [`LATEST`], for the version checks' errors.
const VERSIONS: SchemaVersion = SchemaVersion {
    store: "chatmem-postgres",
    latest: LATEST,
};

/// Brings `schema` (`quoted`: the same name as a quoted identifier) to [`LATEST`].
///
/// Several processes may connect at once: a transaction-scoped advisory lock per schema
/// makes them take turns, and every step is idempotent anyway. A schema already at
/// [`LATEST`] runs no DDL, so a role without CREATE rights can still connect.
pub(crate) async fn migrate(client: &mut Client, schema: &str, quoted: &str, target: &str) -> Result<(), StoreError> {
    let err = |e| db_error(e, "migrating the schema", target);
    let tx = client.transaction().await.map_err(err)?;
    let lock_key = format!("chatmem-migrate:{schema}");
    tx.query_typed(
        "SELECT 1 FROM pg_advisory_xact_lock(hashtext($1))",
        &[(&lock_key, Type::TEXT)],
    )
    .await
    .map_err(err)?;
    let current = recorded_version(&*tx, quoted).await.map_err(err)?;
    if current > LATEST {
        return Err(VERSIONS.too_new(current, &format!("in schema {schema}"), target));
    }
    if current == LATEST {
        return tx.commit().await.map_err(err);
    }
    let schema_exists = !tx
        .query_typed(
            "SELECT 1 FROM pg_namespace WHERE nspname = $1",
            &[(&schema, Type::TEXT)],
        )
        .await
        .map_err(err)?
        .is_empty();
    if !schema_exists {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {quoted}"))
            .await
            .map_err(err)?;
    }
    tx.batch_execute(&format!(
        "SET LOCAL search_path TO {quoted};
         CREATE TABLE IF NOT EXISTS chatmem_schema_version (
             version    INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(err)?;
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tracing::info!(schema, version, "applying chatmem schema migration");
        tx.batch_execute(sql).await.map_err(err)?;
        tx.query_typed(
            "INSERT INTO chatmem_schema_version (version) VALUES ($1) ON CONFLICT DO NOTHING",
            &[(&version, Type::INT4)],
        )
        .await
        .map_err(err)?;
    }
    tx.commit().await.map_err(err)
}

/// Checks, writing nothing, that `schema` is at [`LATEST`]: for a store connected without
/// migrations, which must not create tables to read.
///
/// A missing or older schema is [`InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput) (this code's statements need
/// every column of [`LATEST`]), a newer one [`SchemaTooNew`](chatmem::store::StoreErrorKind::SchemaTooNew).
pub(crate) async fn check(client: &Client, schema: &str, quoted: &str, target: &str) -> Result<(), StoreError> {
    let current = recorded_version(&***client, quoted)
        .await
        .map_err(|e| db_error(e, "checking the schema", target))?;
    VERSIONS.check(current, &format!("in schema {schema}"), target)
}

/// The highest migration recorded in schema `quoted`; 0 when there is none (no version
/// table, or no such schema). Reads only, takes no lock.
async fn recorded_version(client: &impl GenericClient, quoted: &str) -> Result<i32, tokio_postgres::Error> {
    let version_table = format!("{quoted}.chatmem_schema_version");
    let has_table = client
        .query_typed("SELECT to_regclass($1) IS NOT NULL", &[(&version_table, Type::TEXT)])
        .await?
        .first()
        .and_then(|row| row.try_get::<_, bool>(0).ok())
        .unwrap_or(false);
    if !has_table {
        return Ok(0);
    }
    let rows = client
        .query_typed(&format!("SELECT COALESCE(max(version), 0) FROM {version_table}"), &[])
        .await?;
    Ok(rows.first().and_then(|row| row.try_get::<_, i32>(0).ok()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_1_to_latest() {
        assert!(VERSIONS.numbers_migrations(MIGRATIONS.iter().map(|&(v, _)| v)));
    }
}
