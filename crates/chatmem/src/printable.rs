//! Text that is safe to print on one terminal line: the rule conversation ids follow and that
//! every error quoting input applies.

use std::borrow::Cow;

/// Whether `c` is a line or paragraph separator (`U+2028`, `U+2029`) or an invisible format
/// character (Unicode category Cf: bidi overrides and isolates, zero-width spaces and joiners,
/// the byte-order mark, soft hyphen, tags): characters that split a line or make two
/// different strings look alike. Control characters are [`char::is_control`].
///
/// ```
/// assert!(chatmem::printable::is_invisible_or_separator('\u{2028}'));
/// assert!(chatmem::printable::is_invisible_or_separator('\u{202e}')); // right-to-left override
/// assert!(!chatmem::printable::is_invisible_or_separator('订'));
/// ```
pub fn is_invisible_or_separator(c: char) -> bool {
    matches!(
        c,
        '\u{2028}'
            | '\u{2029}'
            | '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

/// `text` with every character that is unsafe on a terminal line — controls (ESC, BEL, CR,
/// NEL, …) and [`is_invisible_or_separator`] — escaped as `\u{…}`, so an error quoting input
/// can neither drive the terminal nor become several lines.
///
/// ```
/// assert_eq!(chatmem::printable::printable("a\u{1b}]0;x\u{7}b"), "a\\u{1b}]0;x\\u{7}b");
/// assert_eq!(chatmem::printable::printable("订单 LC202610060018"), "订单 LC202610060018");
/// ```
pub fn printable(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || is_invisible_or_separator(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
