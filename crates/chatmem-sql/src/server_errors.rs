//! The errors of a store whose server did not answer: the same facts, and so the same
//! texts, whatever the database.

use chatmem::store::{StoreError, StoreErrorKind};

/// The server did not answer `what` on `target` (a server name without password) within
/// the statement timeout: [`StoreErrorKind::Unavailable`].
///
/// ```
/// let e = chatmem_sql::statement_timed_out("loading", "mysql://u@h/db");
/// assert_eq!(e.kind(), chatmem::store::StoreErrorKind::Unavailable);
/// assert!(e.to_string().ends_with("loading on mysql://u@h/db: no answer within the statement timeout"));
/// ```
pub fn statement_timed_out(what: &str, target: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unavailable,
        format!("{what} on {target}: no answer within the statement timeout"),
    )
}

/// A commit that got no answer (lost connection, statement timeout) and whose resend
/// failed too, with `resend` the resend's error as the source: it may or may not have been
/// applied, and the text says so. A resend's failed version check is not this: it is a
/// known conflict, for the caller to report as such.
///
/// The kind is the resend's, except that a resend's [`Conflict`](StoreErrorKind::Conflict)
/// (deadlock, serialization failure) becomes [`Unavailable`](StoreErrorKind::Unavailable):
/// it says nothing about the first send.
///
/// ```
/// use chatmem::store::{StoreError, StoreErrorKind};
/// use chatmem_sql::outcome_unknown;
/// let resend = StoreError::new(StoreErrorKind::Conflict, "deadlock");
/// let e = outcome_unknown(resend, "committing", "postgres://u@h/db");
/// assert_eq!(e.kind(), StoreErrorKind::Unavailable);
/// assert!(e.to_string().contains("whether it was applied is unknown"));
/// ```
pub fn outcome_unknown(resend: StoreError, what: &str, target: &str) -> StoreError {
    let kind = match resend.kind() {
        StoreErrorKind::Conflict => StoreErrorKind::Unavailable,
        kind => kind,
    };
    StoreError::new(
        kind,
        format!(
            "{what} on {target}: no answer came and resending the commit failed too, so whether it was applied is unknown (reload to find out)"
        ),
    )
    .with_source(resend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_outcome_keeps_the_resends_kind_but_conflict() {
        for (resend, kind) in [
            (StoreErrorKind::Conflict, StoreErrorKind::Unavailable),
            (StoreErrorKind::Unavailable, StoreErrorKind::Unavailable),
            (StoreErrorKind::Other, StoreErrorKind::Other),
        ] {
            let e = outcome_unknown(StoreError::new(resend, "resend failed"), "committing", "db://h");
            assert_eq!(e.kind(), kind);
            assert!(e.to_string().contains(": committing on db://h: no answer came"), "{e}");
            let source = std::error::Error::source(&e).map(ToString::to_string);
            assert!(source.is_some_and(|s| s.contains("resend failed")));
        }
        assert_eq!(statement_timed_out("w", "t").kind(), StoreErrorKind::Unavailable);
    }
}
