//! The fuzz targets' checks (`chatmem_test::fuzz`, see `fuzz/README.md`) as quick property
//! tests, and every input the fuzzers found (`fuzz/regressions`) replayed: the message decoder
//! and conversation ids.

use chatmem_test::fuzz::{ids, messages};

use proptest::prelude::*;

/// The inputs a fuzz target once failed on, each a file as the target read it.
fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.file_name().is_some_and(|n| n != ".keep"))
        .map(|path| (path.display().to_string(), std::fs::read(&path).expect("readable")))
        .collect();
    found.sort();
    found
}

#[test]
fn every_message_input_the_fuzzer_found_passes() {
    let found = regressions("messages");
    assert!(found.len() >= 3, "the checked-in findings are there: {found:?}");
    for (name, data) in found {
        eprintln!("replaying {name}");
        messages::check_bytes(&data);
    }
}

#[test]
fn every_id_input_the_fuzzer_found_passes() {
    for (name, data) in regressions("conversation_id") {
        eprintln!("replaying {name}");
        ids::check_bytes(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Raw text (even first byte) and generated message-shaped JSON (odd).
    #[test]
    fn the_message_decoder_keeps_its_promises(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        messages::check_bytes(&data);
    }

    #[test]
    fn the_message_decoder_keeps_its_promises_on_any_text(text in any::<String>()) {
        messages::check_text(&text);
    }

    #[test]
    fn conversation_ids_keep_their_rules(text in any::<String>()) {
        ids::check_text(&text);
    }

    #[test]
    fn conversation_ids_keep_their_rules_near_the_length_limit(c in any::<char>(), n in 60usize..=260) {
        ids::check_text(&c.to_string().repeat(n / c.len_utf8().max(1)));
    }
}
