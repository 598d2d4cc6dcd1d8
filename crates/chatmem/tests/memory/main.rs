//! The core crate's integration tests, one binary: `ChatMemory` over the in-memory store, late
//! summaries, facts in a turn and read by a model, property tests of the window contract, and the fuzz targets' checks with every
//! input the fuzzers found.

mod chat_memory;
mod clear_props;
mod embeddings;
mod facts;
mod facts_extraction;
mod fuzz_smoke;
mod late_summaries;
mod recall;
mod recall_props;
mod window_props;

// proptest keeps the failures it saves for a module here in
// `tests/proptest-regressions/<module>.txt` (its default beside a `main.rs`) and replays them first.
