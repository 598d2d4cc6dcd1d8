//! What a conversation id promises for any text, asserted: a valid id is the text itself,
//! prints as itself, and round-trips through `FromStr`, `Display` and serde; a refused one is
//! refused for the reason (and at the byte) its error says.
//!
//! Used by the fuzz target `conversation_id` and by the core crate's `fuzz_smoke` test.

use chatmem::{ConversationId, InvalidConversationId, MAX_ID_BYTES};

/// One fuzz input: the bytes as text (lossily, so every input tests something).
pub fn check_bytes(data: &[u8]) {
    check_text(&String::from_utf8_lossy(data));
}

/// The id rules for `text`.
pub fn check_text(text: &str) {
    let unsafe_char = |c: char| c.is_control() || chatmem::printable::is_invisible_or_separator(c);
    match ConversationId::new(text) {
        Ok(id) => {
            assert_eq!(id.as_str(), text);
            assert_eq!(id.to_string(), text);
            assert_eq!(text.parse::<ConversationId>().as_ref(), Ok(&id));
            assert_eq!(ConversationId::try_from(text.to_owned()).as_ref(), Ok(&id));
            let json = serde_json::to_string(&id).expect("an id encodes");
            assert_eq!(
                serde_json::from_str::<ConversationId>(&json).ok().as_ref(),
                Some(&id),
                "{json}"
            );
            assert!(!text.is_empty() && text.len() <= MAX_ID_BYTES);
            assert_eq!(chatmem::printable::printable(text), text, "a valid id prints as itself");
            assert!(!text.chars().any(unsafe_char));
        }
        Err(e) => {
            // The same text through serde is refused too.
            let json = serde_json::Value::from(text).to_string();
            assert!(serde_json::from_str::<ConversationId>(&json).is_err());
            let first_unsafe = text.char_indices().find(|&(_, c)| unsafe_char(c));
            match e {
                InvalidConversationId::Empty => assert!(text.is_empty()),
                InvalidConversationId::TooLong(n) => assert!(n == text.len() && n > MAX_ID_BYTES),
                InvalidConversationId::ControlCharacter(at) => {
                    assert!(text.len() <= MAX_ID_BYTES);
                    let first_control = text.char_indices().find(|(_, c)| c.is_control()).map(|(i, _)| i);
                    assert_eq!(first_control, Some(at), "{text:?}");
                }
                InvalidConversationId::InvisibleCharacter(at) => {
                    assert!(text.len() <= MAX_ID_BYTES && !text.chars().any(char::is_control));
                    assert_eq!(first_unsafe.map(|(i, _)| i), Some(at), "{text:?}");
                }
                other => panic!("a new kind of invalid id, {other:?}: state its rule here"),
            }
            assert!(
                !e.to_string().chars().any(unsafe_char),
                "the error quotes nothing unsafe"
            );
        }
    }
}
