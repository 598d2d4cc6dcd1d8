//! `ConversationId` rules on any text: see `chatmem_test::fuzz::ids` for what is asserted.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| chatmem_test::fuzz::ids::check_bytes(data));
