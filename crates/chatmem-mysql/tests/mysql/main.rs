//! The MySQL store's integration tests, one binary: the suites shared with PostgreSQL (conformance,
//! processes, round trips; see `chatmem_test::sql_suite`; the outage tests are `outage.rs`, a
//! binary of their own), and the MySQL-only checks of the tables, their migrations, the `recent`
//! listing, recall and its vectors, and users' facts.

mod common;
mod facts;
mod recall;
mod recent;
mod store;
mod vectors;

chatmem_test::sql_suite_tests!(crate::common::Mysql, "needs CHATMEM_TEST_MYSQL_URL");
