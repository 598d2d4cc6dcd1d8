//! The message JSON decoder (`chatmem::parse_messages` and the single-message decode) on raw
//! text and on generated message-shaped JSON: see `src/messages.rs` for what is asserted.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| chatmem_fuzz::messages::check_bytes(data));
