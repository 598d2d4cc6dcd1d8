//! The `server_request` fuzz target's check (`chatmem_test::fuzz::server`, see
//! `fuzz/README.md`) as a quick property test, and every request the fuzzer found
//! (`fuzz/regressions`) replayed.

use chatmem_test::fuzz::server;

use std::sync::LazyLock;

use proptest::prelude::*;

static HARNESS: LazyLock<server::Harness> = LazyLock::new(server::Harness::new);

#[test]
fn every_request_the_fuzzer_found_passes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/server_request");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    found.sort();
    assert!(!found.is_empty(), "the checked-in findings are there");
    for path in found {
        eprintln!("replaying {}", path.display());
        HARNESS.check_bytes(&std::fs::read(&path).expect("readable"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn any_request_gets_an_answer_in_the_one_shape(data in proptest::collection::vec(any::<u8>(), 0..800)) {
        HARNESS.check_bytes(&data);
    }
}
