//! What the message JSON decoder promises for any input, asserted: no panic; every decoded
//! message encodes to JSON that decodes to the same message (and the same JSON); the single
//! message decode agrees with the list decode; every error names the message index and the field
//! (or, for broken JSON, the line and column) and quotes nothing unprintable or internal.
//!
//! Used by the fuzz target `messages` and by the core crate's `fuzz_smoke` test.

use arbitrary::Unstructured;
use chatmem::{Error, Message, parse_messages};

/// One fuzz input: the first byte picks raw text (even) or generated message-shaped JSON (odd)
/// from the rest.
pub fn check_bytes(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        match std::str::from_utf8(rest) {
            Ok(text) => check_text(text),
            // The decoder takes `&str`; what reads bytes (the server) is checked by its own
            // target. Still, the lossy text must not break it.
            Err(_) => check_text(&String::from_utf8_lossy(rest)),
        }
    } else if let Ok(text) = super::json_gen::messages(&mut Unstructured::new(rest)) {
        check_text(&text);
    }
}

/// The decoder's promises for `text`.
pub fn check_text(text: &str) {
    let listed = parse_messages(text);
    match &listed {
        Ok(messages) => {
            for m in messages {
                check_round_trip(m);
            }
            let all = serde_json::to_string(messages).expect("messages encode");
            assert_eq!(
                parse_messages(&all).as_ref().ok(),
                Some(messages),
                "the list re-decodes to itself: {all}"
            );
        }
        Err(e) => check_error(e, text),
    }
    check_single_agrees(text);
}

/// decode(encode(m)) == m, and encoding is stable.
pub fn check_round_trip(m: &Message) {
    let encoded = serde_json::to_string(m).expect("a message encodes");
    let again: Message =
        serde_json::from_str(&encoded).unwrap_or_else(|e| panic!("{encoded} does not decode again: {e}"));
    assert_eq!(&again, m, "decode(encode(m)) differs: {encoded}");
    assert_eq!(
        serde_json::to_string(&again).expect("encodes"),
        encoded,
        "encoding is not stable"
    );
}

/// `serde_json::from_str::<Message>(t)` and `parse_messages("[t]")` accept the same objects.
fn check_single_agrees(text: &str) {
    if text.starts_with('\u{feff}') {
        return; // the list decoder skips a byte-order mark, the single decoder does not
    }
    let single = serde_json::from_str::<Message>(text);
    let listed = parse_messages(&format!("[{text}]"));
    match (&single, &listed) {
        (Ok(m), Ok(list)) => assert_eq!(list.as_slice(), std::slice::from_ref(m), "{text}"),
        (Ok(m), Err(e)) => panic!("single decode accepts {m:?} but the list refuses it: {e}"),
        (Err(e), Ok(list)) if list.len() == 1 => {
            panic!("the list accepts {list:?} alone but the single decode refuses: {e}")
        }
        _ => {}
    }
}

/// An error from the decoder names where (message index and field, or line and column), says
/// what in words a client understands (no Rust type names), and is one printable line.
pub fn check_error(e: &Error, input: &str) {
    let Error::InvalidMessages { path, reason } = e else {
        panic!("the decoder answered a non-input error: {e:?}");
    };
    let shown = e.to_string();
    assert!(
        !shown
            .chars()
            .any(|c| c.is_control() || chatmem::printable::is_invisible_or_separator(c)),
        "unprintable error: {shown:?}"
    );
    for internal in ["struct ", "Wire", "UniqueKeys", "enum "] {
        let quoted = input.contains(internal.trim_end());
        assert!(
            quoted || !reason.contains(internal),
            "an internal name in the error: {shown}"
        );
    }
    let position = reason.contains(" line ") && reason.contains(" column ");
    if path == "input" {
        assert!(position, "no position: {shown}");
        return;
    }
    let index_end = path.find(']').unwrap_or_else(|| panic!("no message index: {shown}"));
    assert!(
        path.starts_with('[') && path[1..index_end].parse::<usize>().is_ok(),
        "no message index: {shown}"
    );
    let field_in_path = path.len() > index_end + 1;
    let field_in_reason = reason.contains('`') || reason.starts_with("content[") || reason.starts_with("tool_calls[");
    // A syntax error is placed by its line and column, a data error by the field it names.
    assert!(
        position || field_in_path || field_in_reason,
        "no field or position named: {shown}"
    );
}
