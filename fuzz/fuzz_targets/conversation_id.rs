//! `ConversationId` rules on any text: see `src/ids.rs` for what is asserted.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| chatmem_fuzz::ids::check_bytes(data));
