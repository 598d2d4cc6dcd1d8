//! The Redis store's integration tests, one binary: the store against one server and
//! against a Redis Cluster (started by `tests/cluster/start.sh`), outages, round trips,
//! the window cache, summaries, URLs, and processes writing one conversation.
//!
//! The tests across processes re-run this binary with an exact filter naming their child
//! test by its module path (e.g. `stress::stress_child`).

mod cluster;
mod common;
mod counted_by;
mod outage;
mod restart;
mod round_trips;
mod store;
mod stress;
mod summary;
mod urls;
mod window_cache;
