//! The test crate's own tests, one binary, all against the reference store
//! (`chatmem::InMemoryStore`): the conformance suite and the stress check, the flat-cost bench
//! harness, and property tests of summaries.

mod bench;
mod conformance;
mod summary_props;

// proptest keeps the failures it saves for a module here in
// `tests/proptest-regressions/<module>.txt` (its default beside a `main.rs`) and replays them first.
