//! The message record stored as a sorted-set member: `<seq>:<tokens>:<message JSON>`.
//! The seq prefix keeps members unique (two equal messages are still two members) and lets
//! a reader name the record in a `Corrupt` error.

use chatmem::{ConversationId, Message, StoreError, StoreErrorKind, StoredMessage};

/// The member for `m`.
pub(crate) fn encode(m: &StoredMessage) -> Result<Vec<u8>, StoreError> {
    let json = message_json(&m.message, m.seq)?;
    let mut out = format!("{}:{}:", m.seq, m.tokens).into_bytes();
    out.extend_from_slice(json.as_bytes());
    Ok(out)
}

/// The JSON of a message, as `serde_json` writes it.
pub(crate) fn message_json(message: &Message, seq: u64) -> Result<String, StoreError> {
    serde_json::to_string(message).map_err(|e| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("message seq {seq} cannot be serialized"),
        )
        .with_source(e)
    })
}

/// Parses a member read from conversation `id`; `position` (its index in the reply) names
/// it when even its seq is unreadable.
pub(crate) fn decode(id: &ConversationId, record: &[u8], position: usize) -> Result<StoredMessage, StoreError> {
    let corrupt = |what: String| StoreError::new(StoreErrorKind::Corrupt, format!("conversation {id:?}: {what}"));
    let mut parts = record.splitn(3, |&b| b == b':');
    let (Some(seq), Some(tokens), Some(json)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(corrupt(format!("message record #{position} is not `seq:tokens:json`")));
    };
    let seq: u64 = parse_num(seq).ok_or_else(|| corrupt(format!("message record #{position} has no valid seq")))?;
    let tokens: u32 =
        parse_num(tokens).ok_or_else(|| corrupt(format!("message seq {seq} has an invalid token count")))?;
    let message = decode_message(id, json, seq)?;
    Ok(StoredMessage::new(seq, tokens, message))
}

/// Parses message JSON of conversation `id` stored at `seq`.
pub(crate) fn decode_message(id: &ConversationId, json: &[u8], seq: u64) -> Result<Message, StoreError> {
    serde_json::from_slice(json).map_err(|e| {
        StoreError::new(
            StoreErrorKind::Corrupt,
            format!("conversation {id:?}: message seq {seq} is not a valid message"),
        )
        .with_source(e)
    })
}

/// An unsigned decimal number, or `None`.
pub(crate) fn parse_num<T: std::str::FromStr>(bytes: &[u8]) -> Option<T> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
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
        assert!(
            e.context().contains("\"c\"") && e.context().contains("seq 9"),
            "{}",
            e.context()
        );
        assert_eq!(decode(&id, b"junk", 4).unwrap_err().kind(), StoreErrorKind::Corrupt);
    }
}
