//! The Redis store's integration tests, one binary: the conformance suite and Redis-specific
//! checks on one server (`store`, `counted_by`, `recall`, `summary`, `window_cache`, `urls`), on a
//! Cluster (`cluster`), on both (`facts`), and across processes (`restart`, `stress`).
//!
//! Two binaries of their own: `outage.rs`, whose tests bound how long calls through a stalled
//! or downed proxy take (the tests here, running beside them, would stretch those times), and
//! `round_trips.rs`, which counts commands in the server-wide `INFO commandstats` (any test
//! here would add to the count). The tests across processes re-run this binary with an exact
//! filter naming their child test by its module path (e.g. `stress::stress_child`); they and
//! the one test here that watches how long Redis takes to answer take
//! `chatmem_test::stress::timed` so they never run side by side.

mod cluster;
mod common;
mod counted_by;
mod facts;
mod recall;
mod restart;
mod store;
mod stress;
mod summary;
mod urls;
mod window_cache;
