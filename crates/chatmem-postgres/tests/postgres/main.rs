//! The PostgreSQL store's integration tests, one binary: the suites shared with MySQL
//! (conformance, outages, processes, round trips; see `chatmem_test::sql_suite`), and the
//! PostgreSQL-only checks of the schema, its migrations and the store's settings.

mod common;
mod settings;
mod store;

chatmem_test::sql_suite_tests!(crate::common::Pg, "needs CHATMEM_TEST_PG_URL");
