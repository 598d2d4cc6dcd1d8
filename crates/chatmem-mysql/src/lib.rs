//! A MySQL and MariaDB [`Store`](chatmem::Store) for chatmem (docs below are completed later).

mod builder;
mod error;
mod migrate;
mod params;
mod rows;
mod sql;
mod store;
mod url;

pub use crate::builder::{DEFAULT_POOL_SIZE, DEFAULT_PREFIX, DEFAULT_TIMEOUT, MysqlStoreBuilder};
pub use crate::store::{MysqlStore, SCHEMA_VERSION};
