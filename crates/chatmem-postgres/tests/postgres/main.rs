//! The PostgreSQL store's integration tests, one binary: the suites shared with MySQL (conformance,
//! processes, round trips; see `chatmem_test::sql_suite`; the outage tests are `outage.rs`, a
//! binary of their own), and the PostgreSQL-only checks of the schema, its migrations, users'
//! facts and the store's settings.

mod common;
mod facts;
mod recall;
mod settings;
mod store;

chatmem_test::sql_suite_tests!(crate::common::Pg, "needs CHATMEM_TEST_PG_URL");
