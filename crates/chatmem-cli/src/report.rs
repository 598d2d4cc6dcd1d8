//! How the CLI reports: an error as one line that prints each fact once and never echoes a
//! control character from the input, and what a failed write to stdout means.

/// An error as one line: every layer of its chain, outermost first. chatmem's errors never
/// repeat their cause's text, so each fact appears once; line breaks become spaces and other
/// characters that could move the cursor, change the terminal or fake a line are escaped.
pub(crate) fn error_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        parts.push(c.to_string());
        cause = c.source();
    }
    chatmem::printable::printable(&parts.join(": ").replace(['\n', '\r'], " ")).into_owned()
}

/// Whether `e` is a write to a closed pipe (`chatmem list | head -1`): not an error worth a
/// word, the reader simply had enough.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_with_nothing_raw() {
        let e = anyhow::anyhow!("bad role \u{1b}]0;pwned\u{7}a\rb\u{2028}c").context("reading stdin");
        let line = error_line(e.as_ref());
        assert_eq!(line.lines().count(), 1, "{line:?}");
        assert!(
            line.chars()
                .all(|c| !c.is_control() && !chatmem::printable::is_invisible_or_separator(c)),
            "{line:?}"
        );
        assert!(line.starts_with("reading stdin: bad role \\u{1b}]0;pwned"), "{line:?}");
    }
}
