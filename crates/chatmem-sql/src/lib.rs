//! What chatmem's SQL stores (`chatmem-sqlite`, `chatmem-postgres`, `chatmem-mysql`) share,
//! so that each rule they have in common is written once: the rows of the load and history
//! statements ([`SqlColumns`], [`load_snapshot`], [`history_messages`], [`RowReader`]) and of
//! the users' facts load ([`FactsRow`], [`stored_facts`], [`facts_counter`]), the
//! conversions to and from signed 64-bit columns ([`stored_message`], [`to_bigint`],
//! [`ttl_micros`], [`stored_counter`]), the timeouts' `chatmem_*_timeout_ms` URL parameters and
//! builder settings ([`TimeoutSettings`], [`Timeouts`], [`sql_builder_setters!`]), the
//! schema-version check ([`SchemaVersion`]) and the errors of a statement the server did not
//! answer ([`statement_timed_out`], [`outcome_unknown`]).
//!
//! It is not the store contract: that is `chatmem::store` (the [`Store`](chatmem::Store)
//! trait, [`Commit`](chatmem::store::Commit), [`StoreError`](chatmem::store::StoreError)),
//! which every store, SQL or not, implements. Nor is it a database client: it makes no
//! connection and runs no statement; each store brings its own driver and reads its rows
//! through [`SqlColumns`]. A store that is not SQL (`chatmem-redis`) does not use it.

mod columns;
mod facts;
mod schema_version;
mod server_errors;
mod timeouts;

pub use columns::{
    HISTORY_COLUMNS, LOAD_COLUMNS, RowReader, SqlColumns, history_messages, load_snapshot, stored_counter,
    stored_message, to_bigint, ttl_micros,
};
pub use facts::{FactsRow, facts_counter, stored_facts};
pub use schema_version::SchemaVersion;
pub use server_errors::{outcome_unknown, statement_timed_out};
pub use timeouts::{
    CONNECT_TIMEOUT_PARAM, POOL_TIMEOUT_PARAM, STATEMENT_TIMEOUT_PARAM, TIMEOUT_PARAM, TIMEOUT_PARAMS, TimeoutSettings,
    Timeouts,
};
