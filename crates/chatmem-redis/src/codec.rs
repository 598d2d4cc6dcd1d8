//! The framing of a message stored as a sorted-set member:
//! `<seq>:<tokens>[@<counter>]:<message JSON>`. The seq prefix keeps members unique (two
//! equal messages are still two members) and lets a reader name the record in a `Corrupt`
//! error. `@<counter>` is the [`StoredMessage::counted_by`] name, present only when one is
//! recorded (members written by layout 1 have none and read back as `None`); in it `%` and
//! `:` are written `%25` and `%3A`, so every name, the empty one included, round-trips and
//! the member still splits at its first two `:`. The JSON itself is chatmem's one message
//! encoding ([`StoredMessage::message_json`] / [`StoredMessage::from_json`]).

use std::borrow::Cow;

use chatmem::ConversationId;
use chatmem::store::{StoreError, StoredMessage};

/// The member for `m`.
pub(crate) fn encode(m: &StoredMessage) -> Result<Vec<u8>, StoreError> {
    let json = m.message_json()?;
    let mut out = format!("{}:{}", m.seq, m.tokens);
    if let Some(counter) = &m.counted_by {
        out.push('@');
        escape_into(&mut out, counter);
    }
    out.push(':');
    let mut out = out.into_bytes();
    out.extend_from_slice(json.as_bytes());
    Ok(out)
}

/// Parses a member read from conversation `id`; `position` (its index in the reply) names
/// it when even its seq is unreadable.
pub(crate) fn decode(id: &ConversationId, record: &[u8], position: usize) -> Result<StoredMessage, StoreError> {
    let mut parts = record.splitn(3, |&b| b == b':');
    let (Some(seq), Some(counted), Some(json)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(StoreError::corrupt(
            id,
            format!("message record #{position} is not `seq:tokens:json`"),
        ));
    };
    let seq: u64 = parse_num(seq)
        .ok_or_else(|| StoreError::corrupt(id, format!("message record #{position} has no valid seq")))?;
    // The token count ends at the first `@`: digits never hold one, a counter name may.
    let (tokens, counter) = match counted.iter().position(|&b| b == b'@') {
        Some(at) => (&counted[..at], Some(&counted[at + 1..])),
        None => (counted, None),
    };
    let tokens: u32 = parse_num(tokens)
        .ok_or_else(|| StoreError::corrupt(id, format!("message seq {seq} has an invalid token count")))?;
    let counted_by = counter
        .map(|c| {
            unescape(c).ok_or_else(|| StoreError::corrupt(id, format!("message seq {seq} has an invalid counter name")))
        })
        .transpose()?;
    let mut m = StoredMessage::from_json(id, seq, tokens, json)?;
    m.counted_by = counted_by.map(Into::into);
    Ok(m)
}

/// An unsigned decimal number, or `None`.
pub(crate) fn parse_num<T: std::str::FromStr>(bytes: &[u8]) -> Option<T> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Appends `name` to `out` with `%` and `:` escaped.
fn escape_into(out: &mut String, name: &str) {
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

/// The counter name written by [`escape_into`]; `None` for anything it never writes (an
/// unknown escape, invalid UTF-8). Borrowed when nothing was escaped (chatmem's own names).
fn unescape(bytes: &[u8]) -> Option<Cow<'_, str>> {
    if !bytes.contains(&b'%') {
        return std::str::from_utf8(bytes).ok().map(Cow::Borrowed);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let (escape, tail) = tail.split_at_checked(2)?;
            out.push(match escape {
                b"25" => b'%',
                b"3A" => b':',
                _ => return None,
            });
            rest = tail;
        } else {
            out.push(b);
            rest = tail;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use chatmem::Message;
    use chatmem::store::StoreErrorKind;

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
            (b"5:@c:{}", "seq 5"),
            (b"6:1@%3:{}", "seq 6"),
            (b"6:1@%41:{}", "seq 6"),
            (b"6:1@\xff:{}", "seq 6"),
        ] {
            let e = decode(&id, junk, 4).unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::Corrupt);
            assert_eq!(e.conversation(), Some(&id));
            assert!(e.context().contains(says), "{}", e.context());
            assert!(!e.context().contains("\"c\""), "the id is named once: {e}");
        }
    }

    #[test]
    fn counter_names_round_trip_whatever_they_hold() {
        let id = ConversationId::new("c").unwrap();
        let m = StoredMessage::new(7, 3, Message::user("a:b@c")).counted_by("cl100k_base");
        let bytes = encode(&m).unwrap();
        assert!(
            bytes.starts_with(b"7:3@cl100k_base:{"),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(decode(&id, &bytes, 0).unwrap(), m);
        for (name, written) in [
            ("", "7:3@:{"),
            ("a:b", "7:3@a%3Ab:{"),
            ("100%", "7:3@100%25:{"),
            ("%3A", "7:3@%253A:{"),
            ("x@y", "7:3@x@y:{"),
            ("@", "7:3@@:{"),
            ("分词:器", "7:3@分词%3A器:{"),
        ] {
            let m = StoredMessage::new(7, 3, Message::user("hi")).counted_by(name);
            let bytes = encode(&m).unwrap();
            assert!(
                bytes.starts_with(written.as_bytes()),
                "{name:?}: {}",
                String::from_utf8_lossy(&bytes)
            );
            assert_eq!(decode(&id, &bytes, 0).unwrap(), m, "{name:?}");
        }
        // A member written before counters were recorded reads back without one.
        let old = decode(&id, br#"2:6:{"role":"user","content":"u"}"#, 0).unwrap();
        assert_eq!(old, StoredMessage::new(2, 6, Message::user("u")));
    }
}
