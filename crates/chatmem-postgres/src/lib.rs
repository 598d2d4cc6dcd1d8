//! A PostgreSQL [`Store`](chatmem::Store) for chatmem: conversation memory that survives
//! restarts and is shared by every process connected to the same database.
//!
//! [`PostgresStore`] keeps each conversation as one row plus an append-only message log,
//! and does each [`Store::load`](chatmem::Store::load) in one statement and each
//! [`Store::commit`](chatmem::Store::commit) in one atomic, version-checked statement — one
//! round trip each, whatever the history length. Use it with [`chatmem::ChatMemory`]; it
//! holds no window logic of its own.
//!
//! It is not a general PostgreSQL client, and it connects **without TLS**: use it on
//! loopback, a Unix socket or a network you trust. Schema creation and upgrades are
//! automatic (tables `chatmem_conversations`, `chatmem_messages`,
//! `chatmem_schema_version` in the configured schema, `public` by default).
//!
//! Round trips: every operation is one `query_typed` call (parse, bind, execute and sync
//! sent in one write, no separate prepare) on a pooled connection that is reused without a
//! test query. `tests/round_trips.rs` checks this on the wire with a loopback proxy that
//! counts the client's `Sync` messages: load = 1, commit = 1.
//!
//! ```no_run
//! use std::time::Duration;
//! use chatmem::{ChatMemory, ConversationId, Message};
//! use chatmem_postgres::PostgresStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = PostgresStore::builder("postgres://postgres@127.0.0.1:5432/test")
//!     .pool_size(8)
//!     .timeout(Duration::from_secs(2))
//!     .connect()
//!     .await?;
//! let memory = ChatMemory::new(store);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("我的订单还没发货。"), Message::assistant("已查询。")]).await?;
//! assert_eq!(memory.get(&id).await?.len(), 2);
//! # Ok(())
//! # }
//! ```

mod builder;
mod error;
mod migrate;
mod params;
mod rows;
mod sql;
mod store;

pub use crate::builder::{DEFAULT_POOL_SIZE, DEFAULT_SCHEMA, DEFAULT_TIMEOUT, PostgresStoreBuilder};
pub use crate::store::{PostgresStore, SCHEMA_VERSION};
