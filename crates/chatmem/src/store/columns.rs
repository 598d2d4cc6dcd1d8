//! Converting between chatmem's numbers and a SQL store's signed 64-bit columns, in both
//! directions, with the database's limits passed in.

use std::time::Duration;

use crate::error::StoreError;
use crate::error::StoreErrorKind;
use crate::id::ConversationId;

/// `value` as a signed 64-bit column, `column_type` naming it in the error
/// ("MySQL's BIGINT").
///
/// ```
/// use chatmem::store::to_bigint;
/// assert_eq!(to_bigint(7, "sequence", "SQL's BIGINT")?, 7);
/// let e = to_bigint(u64::MAX, "sequence", "SQL's BIGINT").unwrap_err();
/// assert!(e.to_string().contains("is beyond what SQL's BIGINT holds"));
/// # Ok::<(), chatmem::store::StoreError>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::InvalidInput`] above `i64::MAX`.
pub fn to_bigint(value: u64, what: &str, column_type: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("{what} {value} is beyond what {column_type} holds"),
        )
    })
}

/// A TTL in microseconds, or `None` (never expires) beyond `max`, the longest the
/// database's timestamps can hold an expiry for: as `ChatMemory::ttl` documents, a TTL too
/// long to represent never expires.
///
/// ```
/// use std::time::Duration;
/// let max = Duration::from_secs(3600);
/// assert_eq!(chatmem::store::ttl_micros(Duration::from_secs(2), max), Some(2_000_000));
/// assert_eq!(chatmem::store::ttl_micros(Duration::from_secs(3601), max), None);
/// ```
pub fn ttl_micros(ttl: Duration, max: Duration) -> Option<i64> {
    if ttl > max {
        return None;
    }
    i64::try_from(ttl.as_micros()).ok()
}

/// A stored NOT NULL counter of conversation `id` (version, window start, next sequence)
/// as a u64; NULL or negative is [`StoreError::corrupt`], naming `column`.
///
/// ```
/// use chatmem::ConversationId;
/// use chatmem::store::{StoreErrorKind, stored_counter};
/// let id = ConversationId::new("c1")?;
/// assert_eq!(stored_counter(&id, Some(3), "version")?, 3);
/// let e = stored_counter(&id, None, "version").unwrap_err();
/// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
/// assert!(e.to_string().contains("version is NULL"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::Corrupt`] for NULL or a negative value.
pub fn stored_counter(id: &ConversationId, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
    match value.map(u64::try_from) {
        Some(Ok(v)) => Ok(v),
        Some(Err(_)) => Err(StoreError::corrupt(
            id,
            format!("{column} is {}", value.unwrap_or_default()),
        )),
        None => Err(StoreError::corrupt(id, format!("{column} is NULL"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_too_long_to_store_never_expire() {
        let max = Duration::from_secs(5_000 * 366 * 24 * 3600);
        assert_eq!(ttl_micros(Duration::from_secs(2), max), Some(2_000_000));
        assert!(ttl_micros(max, max).is_some());
        assert_eq!(ttl_micros(max + Duration::from_secs(1), max), None);
        assert_eq!(ttl_micros(Duration::MAX, Duration::MAX), None, "beyond i64 micros");
    }

    #[test]
    fn counters_and_bigints() {
        let id = ConversationId::new("c").unwrap();
        assert_eq!(stored_counter(&id, Some(0), "next_seq").unwrap(), 0);
        let e = stored_counter(&id, Some(-4), "next_seq").unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert!(e.to_string().contains("next_seq is -4"), "{e}");
        assert_eq!(to_bigint(i64::MAX as u64, "v", "T").unwrap(), i64::MAX);
        let e = to_bigint(1 << 63, "window start", "T").unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::InvalidInput);
    }
}
