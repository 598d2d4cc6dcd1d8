//! The server's request parsing (paths and their ids, headers, the memory API and
//! chat-completion bodies) through the router in-process: see `chatmem_test::fuzz::server`.
#![no_main]

use std::sync::LazyLock;

static HARNESS: LazyLock<chatmem_test::fuzz::server::Harness> = LazyLock::new(chatmem_test::fuzz::server::Harness::new);

libfuzzer_sys::fuzz_target!(|data: &[u8]| HARNESS.check_bytes(data));
