//! The checks behind [`run_conformance`](crate::run_conformance): a module per concept, run
//! in one order by [`run`].

use std::sync::Arc;

use chatmem::Store;

mod concurrency;
mod facts;
mod harness;
mod ids;
mod lifecycle;
mod paging;
mod recall;
mod recent;
mod round_trip;
mod summary;
mod vectors;
mod versions;
mod window;

pub(crate) use facts::one_facts_writer_wins_a_version;
use harness::Run;
pub use harness::{commit, commit_full};

/// Runs one check; with `CHATMEM_TEST_TIMINGS` set, prints how long it took.
async fn step(name: &str, check: impl std::future::Future<Output = ()>) {
    let started = std::time::Instant::now();
    check.await;
    if std::env::var_os("CHATMEM_TEST_TIMINGS").is_some() {
        eprintln!("conformance: {name} took {:?}", started.elapsed());
    }
}

/// Runs every step against `store`, under an id prefix unique to this call.
pub(crate) async fn run(store: Arc<dyn Store>) {
    let run = Run {
        store,
        prefix: format!("ct-{}", crate::run_token()),
    };
    step("unknown_loads_empty", round_trip::unknown_loads_empty(&run)).await;
    step("raw_round_trip", round_trip::raw_round_trip(&run)).await;
    step("counted_by_round_trip", round_trip::counted_by_round_trip(&run)).await;
    step("memory_round_trip", round_trip::memory_round_trip(&run)).await;
    step("window_contract", window::window_contract(&run)).await;
    step("system_replacement", window::system_replacement(&run)).await;
    step("retention", window::retention(&run)).await;
    step("json_round_trip", round_trip::json_round_trip(&run)).await;
    step("conflicts", versions::conflicts(&run)).await;
    step("resent_commit", versions::resent_commit(&run)).await;
    step("summary_round_trip", summary::summary_round_trip(&run)).await;
    step("summaries_through_memory", summary::summaries_through_memory(&run)).await;
    step("history_paging", paging::history_paging(&run)).await;
    step("clear", lifecycle::clear(&run)).await;
    step("list_paging", paging::list_paging(&run)).await;
    step("recent", recent::recent(&run)).await;
    step("awkward_ids", ids::awkward_ids(&run)).await;
    step("recall_index", recall::recall_index(&run)).await;
    step(
        "recall_terms_are_plain_strings",
        recall::recall_terms_are_plain_strings(&run),
    )
    .await;
    step("recall_caps_common_terms", recall::recall_caps_common_terms(&run)).await;
    step("recall_isolation", recall::recall_isolation(&run)).await;
    step(
        "recall_forgets_with_its_messages",
        recall::recall_forgets_with_its_messages(&run),
    )
    .await;
    step("recall_through_memory", recall::recall_through_memory(&run)).await;
    step("recall_vectors", vectors::recall_vectors(&run)).await;
    step("facts_round_trip", facts::facts_round_trip(&run)).await;
    step(
        "facts_supersede_keeps_history",
        facts::facts_supersede_keeps_history(&run),
    )
    .await;
    step("facts_version_check", facts::facts_version_check(&run)).await;
    step("facts_resent_commit", facts::facts_resent_commit(&run)).await;
    step("facts_caps", facts::facts_caps(&run)).await;
    step("facts_delete", facts::facts_delete(&run)).await;
    step("facts_forget_user", facts::facts_forget_user(&run)).await;
    step("facts_hostile_user_ids", facts::facts_hostile_user_ids(&run)).await;
    step("facts_concurrent_writers", facts::facts_concurrent_writers(&run)).await;
    step("ttl", lifecycle::ttl(&run)).await;
    step("concurrency_one_conversation", concurrency::one_conversation(&run)).await;
    step("concurrency_many_conversations", concurrency::many_conversations(&run)).await;
}
