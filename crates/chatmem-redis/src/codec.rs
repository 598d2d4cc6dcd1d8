//! The framing of a message stored as a sorted-set member: `<seq>:<tokens>:<message JSON>`.
//! The seq prefix keeps members unique (two equal messages are still two members) and lets
//! a reader name the record in a `Corrupt` error. The JSON itself is chatmem's one message
//! encoding ([`StoredMessage::message_json`] / [`StoredMessage::from_json`]).

use chatmem::{ConversationId, StoreError, StoredMessage};

/// The member for `m`.
pub(crate) fn encode(m: &StoredMessage) -> Result<Vec<u8>, StoreError> {
    let json = m.message_json()?;
    let mut out = format!("{}:{}:", m.seq, m.tokens).into_bytes();
    out.extend_from_slice(json.as_bytes());
    Ok(out)
}

/// Parses a member read from conversation `id`; `position` (its index in the reply) names
/// it when even its seq is unreadable.
pub(crate) fn decode(id: &ConversationId, record: &[u8], position: usize) -> Result<StoredMessage, StoreError> {
    let mut parts = record.splitn(3, |&b| b == b':');
    let (Some(seq), Some(tokens), Some(json)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(StoreError::corrupt(
            id,
            format!("message record #{position} is not `seq:tokens:json`"),
        ));
    };
    let seq: u64 = parse_num(seq)
        .ok_or_else(|| StoreError::corrupt(id, format!("message record #{position} has no valid seq")))?;
    let tokens: u32 = parse_num(tokens)
        .ok_or_else(|| StoreError::corrupt(id, format!("message seq {seq} has an invalid token count")))?;
    StoredMessage::from_json(id, seq, tokens, json)
}

/// An unsigned decimal number, or `None`.
pub(crate) fn parse_num<T: std::str::FromStr>(bytes: &[u8]) -> Option<T> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use chatmem::{Message, StoreErrorKind};

    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let id = ConversationId::new("c").unwrap();
        let m = StoredMessage::new(7, 3, Message::user("a:b:c"));
        let bytes = encode(&m).unwrap();
        assert!(bytes.starts_with(b"7:3:{"));
        assert_eq!(decode(&id, &bytes, 0).unwrap(), m);
        let e = decode(&id, b"9:1:{\"role\":\"wizard\"}", 0).unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert_eq!(e.conversation(), Some(&id));
        assert!(e.context().contains("seq 9"), "{}", e.context());
        for (junk, says) in [
            (&b"junk"[..], "record #4"),
            (b"x:1:{}", "record #4"),
            (b"5:-1:{}", "seq 5"),
        ] {
            let e = decode(&id, junk, 4).unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::Corrupt);
            assert_eq!(e.conversation(), Some(&id));
            assert!(e.context().contains(says), "{}", e.context());
            assert!(!e.context().contains("\"c\""), "the id is named once: {e}");
        }
    }
}
