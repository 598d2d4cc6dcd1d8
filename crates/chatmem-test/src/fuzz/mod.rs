//! The fuzz targets' checks (the cargo-fuzz crate in `fuzz/`): each states what one input must
//! satisfy, and panics if not. The same checks run as quick property tests in the normal test
//! suite (the core crate's and the server's `fuzz_smoke` tests), so a finding replays there.

pub mod ids;
pub mod json_gen;
pub mod messages;
#[cfg(feature = "server")]
pub mod server;
