//! [`JsonFieldError`] and [`deserialize_json`]: JSON input read with the path of every field
//! tracked, so an error names the field that was wrong. The one formatter of such errors:
//! [`parse_messages`](crate::parse_messages), the server's request bodies and the CLI's
//! import lines all read JSON through it.

use std::fmt;

use serde::Deserialize;

/// JSON input that could not be read as the expected type: where (the field path, such as
/// `messages[1].role`; none when the input as a whole was wrong) and why.
///
/// Displayed as ``field `messages[1].role`: reason``, or the reason alone when no field is
/// named. A data error's reason leaves out serde_json's ` at line L column C` (the path says
/// more); a syntax error keeps it (it finds the spot in the input). Path and reason are
/// escaped with [`printable`](crate::printable::printable): both may quote the input.
///
/// ```
/// #[derive(serde::Deserialize, Debug)]
/// struct Policy {
///     max_messages: usize,
/// }
/// #[derive(serde::Deserialize, Debug)]
/// struct Body {
///     policy: Policy,
/// }
/// let mut de = serde_json::Deserializer::from_str(r#"{"policy": {"max_messages": -1}}"#);
/// let e = chatmem::deserialize_json::<_, Body>(&mut de).unwrap_err();
/// assert_eq!(e.path(), Some("policy.max_messages"));
/// assert_eq!(e.to_string(), "field `policy.max_messages`: invalid value: integer `-1`, expected usize");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct JsonFieldError {
    path: Option<String>,
    reason: String,
}

impl JsonFieldError {
    /// The field path (`messages[1].role`, `[3].tool_calls[0].id`), or `None` when the input
    /// as a whole was wrong (not JSON, or not even the right kind of value).
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// What was wrong, without the path.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    fn new(e: &serde_path_to_error::Error<serde_json::Error>) -> Self {
        let inner = e.inner();
        let Some(path) = field_path(e.path()) else {
            // The input itself: serde_json's line and column say where.
            return Self {
                path: None,
                reason: crate::printable::printable(&inner.to_string()).into_owned(),
            };
        };
        let reason = inner.to_string();
        // A syntax error's line and column find it in the input; a data error's path says more.
        let reason = if inner.is_syntax() || inner.is_eof() {
            reason.as_str()
        } else {
            strip_position(&reason)
        };
        Self {
            path: Some(crate::printable::printable(&path).into_owned()),
            reason: crate::printable::printable(reason).into_owned(),
        }
    }
}

/// `path` as `a.b[2]`, without the unknown segments at its end (a key that could not be read
/// names no field: the field is the one around it); `None` when no field is left.
fn field_path(path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let known = segments.iter().rposition(|s| !matches!(s, Segment::Unknown))? + 1;
    let mut out = String::new();
    for (i, segment) in segments[..known].iter().enumerate() {
        if i > 0 && !matches!(segment, Segment::Seq { .. }) {
            out.push('.');
        }
        out.push_str(&segment.to_string());
    }
    Some(out)
}

impl fmt::Display for JsonFieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "field `{path}`: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// Reads one `T` from `de` (JSON text's deserializer, or a `serde_json::Value` already
/// parsed), tracking the field path, so that an error names the field. What follows the value
/// is left for the caller to check (`de.end()`), each in its own words.
///
/// # Errors
/// [`JsonFieldError`] when the input is not JSON or not a `T`.
///
/// ```
/// let mut de = serde_json::Deserializer::from_str(r#"{"a": [1, "x"]}"#);
/// let e = chatmem::deserialize_json::<_, std::collections::HashMap<String, Vec<u8>>>(&mut de)
///     .unwrap_err();
/// assert_eq!(e.to_string(), "field `a[1]`: invalid type: string \"x\", expected u8");
/// ```
pub fn deserialize_json<'de, D, T>(de: D) -> Result<T, JsonFieldError>
where
    D: serde::Deserializer<'de, Error = serde_json::Error>,
    T: Deserialize<'de>,
{
    serde_path_to_error::deserialize(de).map_err(|e| JsonFieldError::new(&e))
}

/// serde_json appends " at line L column C"; inside a field the path says more.
fn strip_position(reason: &str) -> &str {
    match reason.rfind(" at line ") {
        Some(at) if reason[at..].contains(" column ") => &reason[..at],
        _ => reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error<T: serde::de::DeserializeOwned + fmt::Debug>(json: &str) -> JsonFieldError {
        let mut de = serde_json::Deserializer::from_str(json);
        deserialize_json::<_, T>(&mut de).expect_err(json)
    }

    #[test]
    fn names_the_field_and_keeps_positions_only_where_they_help() {
        // A data error inside a field: the path, no position.
        let e = error::<Vec<Vec<u8>>>("[[1], [2, -1]]");
        assert_eq!(e.path(), Some("[1][1]"));
        assert_eq!(
            e.to_string(),
            "field `[1][1]`: invalid value: integer `-1`, expected u8"
        );
        // A syntax error inside a field: the path and the position.
        let e = error::<Vec<Vec<u8>>>("[[1], [2,");
        assert_eq!(e.path(), Some("[1]"));
        assert!(e.reason().ends_with("at line 1 column 9"), "{e}");
        // A key that cannot be read names the field around it.
        let e = error::<Vec<std::collections::HashMap<String, u8>>>("[{}, {]");
        assert_eq!(e.path(), Some("[1]"));
        assert!(e.reason().starts_with("key must be a string at line 1"), "{e}");
        // The input as a whole: no path, the position.
        let e = error::<std::collections::HashMap<String, u8>>("{]");
        assert_eq!(e.path(), None);
        let e = error::<Vec<u8>>("{}");
        assert_eq!(e.path(), None);
        assert_eq!(
            e.to_string(),
            "invalid type: map, expected a sequence at line 1 column 0"
        );
    }

    #[test]
    fn quoted_input_is_escaped() {
        let e = error::<std::collections::HashMap<String, u8>>("{\"k\\u001b\": \"v\\u0007\"}");
        assert!(!e.to_string().chars().any(char::is_control), "{e:?}");
        assert!(e.path().is_some_and(|p| p.starts_with('k')), "{e:?}");
    }
}
