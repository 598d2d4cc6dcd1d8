//! The MySQL store's outage tests (see `chatmem_test::sql_outage_tests!`), a binary of their
//! own: they bound how long calls through a stalled or downed proxy take, which the other tests
//! of `tests/mysql/main.rs` running beside them would stretch.

#[allow(dead_code)]
mod common;

chatmem_test::sql_outage_tests!(crate::common::Mysql, "needs CHATMEM_TEST_MYSQL_URL");
