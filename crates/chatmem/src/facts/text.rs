//! A fact's text: what is accepted ([`clean_text`]) and when two texts say the same thing
//! ([`same_text`]).

use std::sync::LazyLock;

use regex_syntax::hir::{Class, HirKind};
use unicode_normalization::UnicodeNormalization;

/// Why a text cannot be a fact's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidFactText {
    /// Nothing but whitespace.
    #[error("fact text is empty")]
    Empty,
    /// Longer than the limit once its whitespace is collapsed.
    #[error("fact text is {bytes} bytes long; the limit is {max}")]
    TooLong {
        /// Its length in bytes, whitespace collapsed.
        bytes: usize,
        /// The limit ([`FactLimits::max_text_bytes`](super::FactLimits::max_text_bytes)).
        max: usize,
    },
    /// A control character other than whitespace (NUL, ESC, BEL, ...) at this byte of the
    /// text as given.
    #[error("fact text contains a control character at byte {0}")]
    ControlCharacter(usize),
    /// An invisible format character (a bidi override, a zero-width space, a tag character,
    /// ...) at this byte of the text as given.
    #[error("fact text contains an invisible character at byte {0}")]
    InvisibleCharacter(usize),
}

/// The text a fact keeps for `text`: its whitespace runs (line breaks and tabs included)
/// collapsed to one space and trimmed, so a fact is always one line.
///
/// Every fact is sent in the prompt of every conversation of its user, so text a reader
/// cannot see is refused rather than kept: control characters and the invisible format
/// characters of [`is_invisible_or_separator`](crate::printable::is_invisible_or_separator)
/// (bidi overrides, zero-width spaces, tag characters), except the zero-width joiner and
/// non-joiner, which shape Persian, Indic scripts and emoji.
///
/// ```
/// use chatmem::facts::{InvalidFactText, clean_text};
/// assert_eq!(clean_text("  Default delivery address:\n  12 Main St.\t", 500)?, "Default delivery address: 12 Main St.");
/// assert_eq!(clean_text(" \n ", 500), Err(InvalidFactText::Empty));
/// assert_eq!(clean_text("abc", 2), Err(InvalidFactText::TooLong { bytes: 3, max: 2 }));
/// # Ok::<(), InvalidFactText>(())
/// ```
///
/// # Errors
/// [`InvalidFactText`]: empty, longer than `max_bytes` (collapsed), or holding a control or
/// invisible character (where, in `text`).
pub fn clean_text(text: &str, max_bytes: usize) -> Result<String, InvalidFactText> {
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_control() {
            return Err(InvalidFactText::ControlCharacter(at));
        }
        if crate::printable::is_invisible_or_separator(c) && !matches!(c, '\u{200C}' | '\u{200D}') {
            return Err(InvalidFactText::InvisibleCharacter(at));
        }
    }
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        return Err(InvalidFactText::Empty);
    }
    if out.len() > max_bytes {
        return Err(InvalidFactText::TooLong {
            bytes: out.len(),
            max: max_bytes,
        });
    }
    Ok(out)
}

/// Whether `text` is already what [`clean_text`] keeps (of any length).
pub(crate) fn is_clean(text: &str) -> bool {
    clean_text(text, usize::MAX).is_ok_and(|clean| clean == text)
}

/// The form in which fact texts are compared: NFKC (full-width `ＡＢＣ１` is `abc1`),
/// punctuation (Unicode's `\p{P}`: `.,;:!?'"-_()[]{}#%&*@/`, `。，！`, …) removed, lowercased
/// (Unicode's mapping, with `ß` as `ss` and a final `ς` as `σ`, as full case folding has
/// them), whitespace runs collapsed to one space and trimmed. Symbols (`$`, `€`, `+`, `=`) and
/// every letter and digit are kept.
///
/// ```
/// use chatmem::facts::comparable_text;
/// assert_eq!(comparable_text("  Default delivery ADDRESS: 12 Main St. "), "default delivery address 12 main st");
/// assert_eq!(comparable_text("Allergic to nuts!"), comparable_text("allergic   to nuts"));
/// assert_eq!(comparable_text("住在上海。"), "住在上海");
/// assert_ne!(comparable_text("costs $5"), comparable_text("costs €5"));
/// ```
pub fn comparable_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.nfkc() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if is_punctuation(c) {
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        match c {
            'ß' | 'ẞ' => out.push_str("ss"),
            'ς' => out.push('σ'),
            c if c.is_ascii() => out.push(c.to_ascii_lowercase()),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// Whether two fact texts say the same thing: equal once case, spacing and punctuation are
/// set aside ([`comparable_text`]).
///
/// ```
/// assert!(chatmem::facts::same_text("Lives in Berlin.", "lives in  BERLIN"));
/// assert!(!chatmem::facts::same_text("Lives in Berlin", "Lived in Berlin"));
/// ```
pub fn same_text(a: &str, b: &str) -> bool {
    a == b || comparable_text(a) == comparable_text(b)
}

/// `\p{P}`'s ranges, sorted, from `regex-syntax`'s Unicode tables (the ones the counters'
/// pre-tokenizer also reads).
static PUNCTUATION: LazyLock<Vec<(char, char)>> = LazyLock::new(|| {
    match regex_syntax::Parser::new().parse(r"\p{P}").as_ref().map(|h| h.kind()) {
        Ok(HirKind::Class(Class::Unicode(class))) => class.ranges().iter().map(|r| (r.start(), r.end())).collect(),
        // A constant pattern: never reached (a test checks the table is there).
        _ => Vec::new(),
    }
});

fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation() && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~');
    }
    PUNCTUATION
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_punctuation_table_is_unicodes_and_ascii_agrees_with_it() {
        assert!(PUNCTUATION.len() > 100, "{}", PUNCTUATION.len());
        for c in [
            '。', '，', '！', '—', '«', '»', '¿', '‘', '’', '“', '”', '…', '、', '「',
        ] {
            assert!(is_punctuation(c), "{c:?}");
        }
        for c in ['€', '£', '©', '°', '中', 'é', '１', '😀', ' '] {
            assert!(!is_punctuation(c), "{c:?}");
        }
        // The ASCII shortcut says what the table says.
        for b in 0u8..128 {
            let c = char::from(b);
            let in_table = PUNCTUATION.iter().any(|&(lo, hi)| (lo..=hi).contains(&c));
            assert_eq!(is_punctuation(c), in_table, "{c:?}");
        }
    }

    #[test]
    fn texts_are_compared_with_case_spacing_and_punctuation_aside() {
        for (a, b) in [
            (
                "Default delivery address: 12 Main St.",
                "default delivery address 12 main st",
            ),
            ("Allergic to nuts", "  ALLERGIC\tto\n nuts!!! "),
            ("e-mail: ada@example.com", "email adaexamplecom"),
            ("Straße", "STRASSE"),
            ("ΟΔΟΣ", "οδος"),
            ("ＬＣ２０２６", "lc2026"),
            ("住在 上海。", " 住在  上海 "),
            ("Café", "cafe\u{301}"),
        ] {
            assert!(
                same_text(a, b),
                "{a:?} {b:?}: {:?} {:?}",
                comparable_text(a),
                comparable_text(b)
            );
        }
        for (a, b) in [
            ("Lives in Berlin", "Lived in Berlin"),
            ("costs $5", "costs €5"),
            ("a+b", "ab"),
            ("12", "1 2"),
        ] {
            assert!(!same_text(a, b), "{a:?} {b:?}");
        }
        assert_eq!(comparable_text(" ... "), "");
        assert_eq!(comparable_text("a - b"), "a b");
    }

    #[test]
    fn clean_text_collapses_whitespace_and_refuses_what_cannot_be_seen() {
        assert_eq!(
            clean_text("a\r\n\tb\u{2028}c\u{a0}d\u{3000}e", 100).unwrap(),
            "a b c d e"
        );
        assert_eq!(clean_text("x", 1).unwrap(), "x");
        assert_eq!(clean_text("", 10), Err(InvalidFactText::Empty));
        assert_eq!(clean_text("\u{85}\u{b}", 10), Err(InvalidFactText::Empty));
        // The limit applies to what is kept.
        assert_eq!(clean_text("  a   b  ", 3).unwrap(), "a b");
        assert_eq!(
            clean_text("订单订单", 11),
            Err(InvalidFactText::TooLong { bytes: 12, max: 11 })
        );
        assert_eq!(clean_text("ab\u{0}c", 10), Err(InvalidFactText::ControlCharacter(2)));
        assert_eq!(clean_text("a\u{1b}[31m", 10), Err(InvalidFactText::ControlCharacter(1)));
        for (text, at) in [
            ("x\u{202e}y", 1),
            ("zero\u{200b}width", 4),
            ("tag\u{e0041}", 3),
            ("\u{feff}a", 0),
        ] {
            assert_eq!(
                clean_text(text, 100),
                Err(InvalidFactText::InvisibleCharacter(at)),
                "{text:?}"
            );
        }
        // Joiners shape scripts and emoji: kept.
        for text in ["می\u{200c}خواهم", "👨\u{200d}👩\u{200d}👧"] {
            assert_eq!(clean_text(text, 100).unwrap(), text);
        }
        assert!(is_clean("a b"));
        assert!(!is_clean(" a b"));
        assert!(!is_clean("a  b"));
        assert!(!is_clean(""));
    }
}
