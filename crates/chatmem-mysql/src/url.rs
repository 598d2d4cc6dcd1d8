//! The connection URL: chatmem's own `chatmem_*` parameters taken out of it (the driver
//! refuses parameters it does not know), and the name it is printed by.

use chatmem::store::StoreError;
use chatmem_sql::TimeoutSettings;

/// Splits `url` into the URL the driver parses and chatmem's own parameters.
///
/// The query starts at the first `?` after the last `@`, if any: the driver (WHATWG URL
/// parsing) ends the credentials at the last `@`, so a password may hold a `?`.
///
/// # Errors
/// [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput) naming the
/// parameter: unknown `chatmem_*`, given twice, or not a whole number of milliseconds.
pub(crate) fn split(url: &str) -> Result<(String, TimeoutSettings), StoreError> {
    let after_creds = url.rfind('@').map_or(0, |at| at + 1);
    let query = url[after_creds..].find('?').map(|q| after_creds + q);
    TimeoutSettings::split_url(url, query, "chatmem-mysql")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chatmem::store::StoreErrorKind;

    use super::*;

    // The parameters' parsing is tested in chatmem::store; here, where this driver's query
    // starts and the crate's name in errors.
    #[test]
    fn the_query_starts_after_the_last_at() {
        let (rest, found) = split("mysql://u:p?w@h/db?prefer_socket=false&chatmem_timeout_ms=250").unwrap();
        assert_eq!(rest, "mysql://u:p?w@h/db?prefer_socket=false");
        assert_eq!(found.timeout, Some(Duration::from_millis(250)));
        let (rest, _) = split("mysql://u:a@b?c@h/db?chatmem_pool_timeout_ms=0").unwrap();
        assert_eq!(rest, "mysql://u:a@b?c@h/db");
        assert_eq!(
            split("mysql://h/db").unwrap(),
            ("mysql://h/db".to_owned(), TimeoutSettings::default())
        );
        let err = split("mysql://h/db?chatmem_statment_timeout_ms=5").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
        assert!(err.to_string().contains("chatmem-mysql reads"), "{err}");
    }
}
