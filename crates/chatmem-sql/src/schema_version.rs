//! The schema-version check a SQL store makes when it connects: its tables must be at the
//! version its code reads, neither missing, older nor newer.

use chatmem::store::{StoreError, StoreErrorKind};

/// A store crate and the schema version its code writes and reads, for the version checks
/// and their errors; each store keeps one as a constant.
///
/// `tables` says which of the server's chatmem tables, after "the chatmem tables": "in
/// schema public", "with prefix app1"; `target` is the server without its password.
///
/// ```
/// use chatmem::store::StoreErrorKind;
/// use chatmem_sql::SchemaVersion;
/// const VERSIONS: SchemaVersion = SchemaVersion { store: "chatmem-mysql", latest: 2 };
/// let (tables, target) = ("with prefix app1", "mysql://u@h/db");
/// assert!(VERSIONS.check(2, tables, target).is_ok());
/// assert_eq!(VERSIONS.check(0, tables, target).unwrap_err().kind(), StoreErrorKind::InvalidInput);
/// assert_eq!(VERSIONS.check(1, tables, target).unwrap_err().kind(), StoreErrorKind::InvalidInput);
/// assert_eq!(VERSIONS.check(3, tables, target).unwrap_err().kind(), StoreErrorKind::SchemaTooNew);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaVersion {
    /// The store crate, as in "older than this chatmem-postgres reads".
    pub store: &'static str,
    /// The schema version this code writes and reads.
    pub latest: i32,
}

impl SchemaVersion {
    /// Whether a store's migrations, by their numbers in order, are exactly 1 to
    /// [`latest`](Self::latest): each store's unit test holds its list to this.
    ///
    /// ```
    /// let versions = chatmem_sql::SchemaVersion { store: "chatmem-x", latest: 3 };
    /// assert!(versions.numbers_migrations([1, 2, 3]));
    /// assert!(!versions.numbers_migrations([1, 3]));
    /// assert!(!versions.numbers_migrations([1, 2, 3, 4]));
    /// ```
    pub fn numbers_migrations(&self, numbers: impl IntoIterator<Item = i32>) -> bool {
        numbers.into_iter().eq(1..=self.latest)
    }

    /// Checks the recorded version `current` (0: no tables) for a store connected without
    /// migrations, which must not create tables to read.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for missing or older tables (this code's statements
    /// need every column of the latest version), [`too_new`](Self::too_new) for newer ones.
    pub fn check(&self, current: i32, tables: &str, target: &str) -> Result<(), StoreError> {
        let Self { store, latest } = *self;
        match current {
            v if v == latest => Ok(()),
            v if v > latest => Err(self.too_new(v, tables, target)),
            0 => Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("{target} has no chatmem tables {tables} (connected without migrations: nothing was created)"),
            )),
            v => Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "the chatmem tables {tables} on {target} are at version {v}, older than this {store} reads ({latest}); connect once with migrations to upgrade them"
                ),
            )),
        }
    }

    /// Tables at `current`, written by a newer release of the store: never read or migrated
    /// down, since this code does not know what the newer columns mean.
    ///
    /// ```
    /// use chatmem_sql::SchemaVersion;
    /// let versions = SchemaVersion { store: "s", latest: 1 };
    /// let e = versions.too_new(5, "in schema x", "t");
    /// assert!(e.to_string().contains("version 5; this s knows up to 1"));
    /// ```
    pub fn too_new(&self, current: i32, tables: &str, target: &str) -> StoreError {
        StoreError::new(
            StoreErrorKind::SchemaTooNew,
            format!(
                "the chatmem tables {tables} on {target} are at version {current}; this {} knows up to {}",
                self.store, self.latest
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_store_tables_and_server() {
        let versions = SchemaVersion {
            store: "chatmem-x",
            latest: 4,
        };
        let check = |v| versions.check(v, "in schema s1", "x://h/db");
        assert!(check(4).is_ok());
        let missing = check(0).unwrap_err().to_string();
        assert!(
            missing.contains("x://h/db has no chatmem tables in schema s1"),
            "{missing}"
        );
        let older = check(3).unwrap_err().to_string();
        assert!(
            older.contains("version 3, older than this chatmem-x reads (4)"),
            "{older}"
        );
        let newer = check(9).unwrap_err();
        assert_eq!(newer.kind(), StoreErrorKind::SchemaTooNew);
        assert!(newer.to_string().contains("at version 9; this chatmem-x knows up to 4"));
        assert_eq!(check(-1).unwrap_err().kind(), StoreErrorKind::InvalidInput);
    }
}
