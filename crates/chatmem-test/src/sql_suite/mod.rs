//! The tests the SQL server stores (PostgreSQL, MySQL) share, written once: outages and lost
//! replies through the [`Proxy`](crate::proxy::Proxy), round trips per operation, the
//! conformance suite in a throwaway namespace, the tests across processes, users' facts
//! beyond the conformance steps ([`facts`]), and the store checks and helpers both stores'
//! own tests use ([`store`]).
//!
//! A store crate implements [`SqlDb`] in its tests (how to build its store from a URL, its
//! wire protocol, its admin SQL) and calls each test body from a `#[tokio::test]` of its
//! own, marked `#[ignore = "needs CHATMEM_TEST_…_URL"]`.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::store::{Commit, StoreError};
use chatmem::{ConversationId, Store};

use crate::proxy::Protocol;

pub mod conformance;
pub mod facts;
pub mod outage;
pub mod processes;
pub mod round_trips;
pub mod store;

/// Waits until no other timed or machine-loading test of this process runs; a store's own
/// timed tests take it too. The same lock as [`stress::timed`](crate::stress::timed).
pub async fn timed() -> tokio::sync::MutexGuard<'static, ()> {
    crate::stress::timed().await
}

/// The statements that drop what a MySQL store with table prefix `prefix` made (its tables
/// and procedures), for the tests' and the bench's clean-up.
pub fn mysql_drop_statements(prefix: &str) -> Vec<String> {
    // The recall index references the conversations, so it goes first; users' facts and
    // their history reference the user rows.
    let tables = [
        "index_terms",
        "index_docs",
        "index_df",
        "index_keys",
        "messages",
        "conversations",
        "fact_history",
        "facts",
        "fact_users",
        "schema_version",
    ];
    let procedures = ["commit_v3", "commit", "clear", "commit_facts"];
    tables
        .iter()
        .map(|t| format!("DROP TABLE IF EXISTS `{prefix}_{t}`"))
        .chain(
            procedures
                .iter()
                .map(|p| format!("DROP PROCEDURE IF EXISTS `{prefix}_{p}`")),
        )
        .collect()
}

/// How the store settings the suites vary are applied to a store's builder.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings<'a> {
    /// The schema (PostgreSQL) or table prefix (MySQL); the store's default when `None`.
    pub namespace: Option<&'a str>,
    /// The connection pool's size; the store's default when `None`.
    pub pool_size: Option<usize>,
    /// The store's timeout; the store's default when `None`.
    pub timeout: Option<Duration>,
}

impl<'a> Settings<'a> {
    /// The store's defaults in `namespace`.
    pub fn namespace(namespace: &'a str) -> Self {
        Self {
            namespace: Some(namespace),
            ..Self::default()
        }
    }

    /// These settings with a pool of `size` connections.
    pub fn pool_size(self, size: usize) -> Self {
        Self {
            pool_size: Some(size),
            ..self
        }
    }

    /// These settings with `timeout`.
    pub fn timeout(self, timeout: Duration) -> Self {
        Self {
            timeout: Some(timeout),
            ..self
        }
    }
}

/// A row lock held by a transaction that writes what a commit would, standing for a first
/// send of that commit still running on the server.
#[async_trait]
pub trait HeldRow: Send {
    /// Commits the transaction: the first send lands.
    async fn land(self: Box<Self>);
}

/// What the shared suites need to know about one SQL store.
#[async_trait]
pub trait SqlDb: Send + Sync + 'static {
    /// The store.
    type Store: Store + Clone + 'static;

    /// The environment variable naming the test server, e.g. `CHATMEM_TEST_PG_URL`.
    const URL_VAR: &'static str;
    /// How to provide it, for [`required_env`](crate::required_env), e.g. "start PostgreSQL".
    const HOW: &'static str;
    /// The store's wire protocol, for the [`Proxy`](crate::proxy::Proxy).
    const PROTOCOL: Protocol;
    /// The namespace shared by tests whose child processes must find the same tables (they
    /// isolate themselves with unique conversation ids).
    const SHARED_NAMESPACE: &'static str;
    /// The namespace a store connected without settings uses.
    const DEFAULT_NAMESPACE: &'static str;
    /// Connecting may take up to this many timeouts (one per address tried, or a handshake
    /// after the connect), before the slack for scheduling.
    const CONNECT_TIMEOUTS: u32;
    /// Whether each statement is prepared once per connection, at its first use there (one
    /// more round trip then): the suites warm the connection up before they count.
    const PREPARES_PER_CONNECTION: bool;

    /// The test server's URL; panics when [`URL_VAR`](Self::URL_VAR) is unset.
    fn url() -> String {
        crate::required_env(Self::URL_VAR, Self::HOW)
    }

    /// A namespace unique to this call.
    fn fresh_namespace(tag: &str) -> String;

    /// Connects a store to `url` with `settings`.
    async fn connect(url: &str, settings: Settings<'_>) -> Result<Self::Store, StoreError>;

    /// A store connected with its defaults ([`DEFAULT_NAMESPACE`](Self::DEFAULT_NAMESPACE)),
    /// and the namespace it reports.
    async fn connect_default(url: &str) -> (Self::Store, String);

    /// A store in `namespace`, or a panic naming the variable.
    async fn store_in(url: &str, namespace: &str) -> Self::Store {
        Self::connect(url, Settings::namespace(namespace))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "connecting to {} failed: {e} ({:?})",
                    Self::URL_VAR,
                    std::error::Error::source(&e)
                )
            })
    }

    /// Drops what a namespace made by [`fresh_namespace`](Self::fresh_namespace) holds.
    async fn drop_namespace(url: &str, namespace: &str);

    /// A URL (with a password) at a port where nothing listens.
    fn unreachable_url() -> &'static str;

    /// A URL of a server at `addr`, without a password.
    fn url_at(addr: SocketAddr) -> String;

    /// The test server's TCP address; panics when `url` names none.
    fn tcp_addr(url: &str) -> SocketAddr;

    /// `url` pointed at `addr` instead (credentials and database kept).
    fn url_via(url: &str, addr: SocketAddr) -> String;

    /// Opens a transaction that holds the row of `id` and writes exactly what `next` writes,
    /// its token included (the conversation exists at version 1 with messages 1-2).
    async fn hold_row(url: &str, namespace: &str, id: &ConversationId, next: &Commit) -> Box<dyn HeldRow>;

    /// How long after the resend went out the held row lands, given the store's timeout.
    fn resend_lands_after(timeout: Duration) -> Duration;

    /// The statements a commit whose first send landed while its resend waited for the row
    /// takes, and what they are.
    const RESEND_STATEMENTS: (u64, &'static str);

    /// Which `recent` query the round-trip count runs first: this conversation's prefix
    /// (limit 10), then every conversation from its cursor; or, when `false`, every
    /// conversation (limit 1), then this conversation's prefix from its cursor.
    const RECENT_BY_ID_FIRST: bool;
}

/// The `#[tokio::test]`s of the shared suites for the [`SqlDb`] `$db` (a path that resolves
/// in a child module, e.g. `crate::common::Pg`), each marked `#[ignore = $needs]`
/// (e.g. `"needs CHATMEM_TEST_PG_URL"`), in the modules `conformance`, `processes`,
/// `round_trips` and `sql_facts` (so that a store's own `facts` module fits beside it); the
/// outage tests are [`sql_outage_tests!`]'s.
///
/// The tests across processes re-run the test binary with a filter naming their child
/// test, which they build from the module they are expanded in.
#[macro_export]
macro_rules! sql_suite_tests {
    ($db:ty, $needs:literal) => {
        mod conformance {
            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn store_conforms() {
                $crate::sql_suite::conformance::store_conforms::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn connect_uses_the_default_namespace() {
                $crate::sql_suite::conformance::connect_uses_the_default_namespace::<$db>().await;
            }
        }

        mod processes {
            use $crate::sql_suite::processes;

            /// This module's path as libtest names tests (without the crate's name).
            fn here() -> &'static str {
                module_path!().split_once("::").map_or("", |(_, path)| path)
            }

            // Not ignored: the parents below run it in their children with an exact filter.
            #[tokio::test(flavor = "multi_thread")]
            async fn stress_child() {
                processes::stress_child::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn sixteen_processes_append_to_one_conversation() {
                let child = format!("{}::stress_child", here());
                processes::sixteen_processes_append_to_one_conversation::<$db>(&child).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn sixteen_summarizing_processes_append_to_one_conversation() {
                let child = format!("{}::stress_child", here());
                processes::sixteen_summarizing_processes_append_to_one_conversation::<$db>(&child).await;
            }

            // Not ignored, like `stress_child`.
            #[tokio::test(flavor = "multi_thread")]
            async fn restart_child() {
                processes::restart_child::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn a_new_process_reads_what_an_exited_one_wrote() {
                let child = format!("{}::restart_child", here());
                processes::a_new_process_reads_what_an_exited_one_wrote::<$db>(&child).await;
            }
        }

        mod round_trips {
            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn load_and_commit_are_one_round_trip_each() {
                $crate::sql_suite::round_trips::load_and_commit_are_one_round_trip_each::<$db>().await;
            }
        }

        mod sql_facts {
            use $crate::sql_suite::facts;

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn facts_calls_are_one_round_trip_each() {
                facts::facts_calls_are_one_round_trip_each::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn a_facts_commit_whose_reply_is_lost_is_applied_once() {
                facts::a_facts_commit_whose_reply_is_lost_is_applied_once::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn of_facts_writers_at_one_version_exactly_one_wins() {
                facts::of_facts_writers_at_one_version_exactly_one_wins::<$db>().await;
            }
        }
    };
}

/// The outage tests of the [`sql_suite_tests!`] suite for the [`SqlDb`] `$db`, in a module
/// `outage`, for a test binary of their own: they bound how long a call through a stalled or
/// downed proxy takes, and the store's other tests running beside them in one process (a
/// conformance run, a sixteen-process stress) stretched those times past the bounds.
#[macro_export]
macro_rules! sql_outage_tests {
    ($db:ty, $needs:literal) => {
        mod outage {
            use $crate::sql_suite::outage;

            #[tokio::test(flavor = "multi_thread")]
            async fn nothing_listening_is_unavailable_without_the_password() {
                outage::nothing_listening_is_unavailable_without_the_password::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn a_silent_server_times_out_as_unavailable() {
                outage::a_silent_server_times_out_as_unavailable::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn operations_fail_fast_during_an_outage_and_recover_after() {
                outage::operations_fail_fast_during_an_outage_and_recover_after::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn a_commit_whose_reply_is_lost_is_applied_once() {
                outage::a_commit_whose_reply_is_lost_is_applied_once::<$db>().await;
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = $needs]
            async fn a_resend_that_waited_for_the_row_finds_the_first_send_landed() {
                outage::a_resend_that_waited_for_the_row_finds_the_first_send_landed::<$db>().await;
            }
        }
    };
}
