//! [`Marker`]: the tag that opens every generated message, naming its conversation, turn and
//! part, so a history read back can be checked message by message.

use std::fmt;

/// Conversation index, turn number, and whether it is the turn's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Marker {
    pub(crate) conversation: usize,
    pub(crate) turn: u32,
    pub(crate) answer: bool,
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = if self.answer { 'a' } else { 'u' };
        write!(f, "[lt c{} t{} {part}]", self.conversation, self.turn)
    }
}

impl Marker {
    /// The marker a message text opens with, if it opens with one.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (tag, _) = text.strip_prefix("[lt c")?.split_once(']')?;
        let (conversation, rest) = tag.split_once(" t")?;
        let (turn, part) = rest.split_once(' ')?;
        let answer = match part {
            "u" => false,
            "a" => true,
            _ => return None,
        };
        Some(Self {
            conversation: conversation.parse().ok()?,
            turn: turn.parse().ok()?,
            answer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_reads_back_from_its_text() {
        let m = Marker {
            conversation: 17,
            turn: 4_000_000,
            answer: true,
        };
        assert_eq!(Marker::parse(&format!("{m} 订单已发货")), Some(m));
        let u = Marker { answer: false, ..m };
        assert_eq!(Marker::parse(&u.to_string()), Some(u));
        for text in [
            "",
            "hello",
            "[lt c1 t2 x] no",
            "[lt c1 t2 u no",
            "[lt c-1 t2 u]",
            "x[lt c1 t2 u]",
        ] {
            assert_eq!(Marker::parse(text), None, "{text:?}");
        }
    }
}
