//! The PostgreSQL store's outage tests (see `chatmem_test::sql_outage_tests!`), a binary of their
//! own: they bound how long calls through a stalled or downed proxy take, which the other tests
//! of `tests/postgres/main.rs` running beside them would stretch.

#[allow(dead_code)]
mod common;

chatmem_test::sql_outage_tests!(crate::common::Pg, "needs CHATMEM_TEST_PG_URL");
