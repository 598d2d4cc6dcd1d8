//! The message JSON decoder (`chatmem::parse_messages` and the single-message decode) on raw
//! text and on generated message-shaped JSON: see `chatmem_test::fuzz::messages` for what is asserted.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| chatmem_test::fuzz::messages::check_bytes(data));
