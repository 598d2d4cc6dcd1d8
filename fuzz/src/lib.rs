//! The fuzz targets' checks: each states what one input must satisfy, and panics if not.
//! The same files run as quick property tests in the normal test suite
//! (`crates/chatmem/tests/fuzz_smoke.rs`, `crates/chatmem-server/tests/fuzz_smoke.rs`).

pub mod ids;
pub mod json_gen;
pub mod messages;
pub mod server;
