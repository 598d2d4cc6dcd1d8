//! The connection URL: chatmem's own `chatmem_*` parameters taken out of it (the driver
//! refuses parameters it does not know), and the name it is printed by.

use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind};

/// URL parameter for every timeout at once, in milliseconds.
pub(crate) const TIMEOUT_PARAM: &str = "chatmem_timeout_ms";
/// URL parameter for the connect timeout, in milliseconds.
pub(crate) const CONNECT_TIMEOUT_PARAM: &str = "chatmem_connect_timeout_ms";
/// URL parameter for the pool timeout, in milliseconds.
pub(crate) const POOL_TIMEOUT_PARAM: &str = "chatmem_pool_timeout_ms";
/// URL parameter for the statement timeout, in milliseconds.
pub(crate) const STATEMENT_TIMEOUT_PARAM: &str = "chatmem_statement_timeout_ms";

const PARAMS: [&str; 4] = [
    TIMEOUT_PARAM,
    CONNECT_TIMEOUT_PARAM,
    POOL_TIMEOUT_PARAM,
    STATEMENT_TIMEOUT_PARAM,
];

/// The timeouts a URL sets through chatmem's parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UrlTimeouts {
    pub(crate) timeout: Option<Duration>,
    pub(crate) connect: Option<Duration>,
    pub(crate) pool: Option<Duration>,
    pub(crate) statement: Option<Duration>,
}

/// Splits `url` into the URL the driver parses and chatmem's own parameters.
///
/// # Errors
/// [`StoreErrorKind::InvalidInput`] naming the parameter: unknown `chatmem_*`, given twice,
/// or not a whole number of milliseconds.
pub(crate) fn split(url: &str) -> Result<(String, UrlTimeouts), StoreError> {
    let mut found = UrlTimeouts::default();
    let after_creds = url.rfind('@').map_or(0, |at| at + 1);
    let Some(q) = url[after_creds..].find('?').map(|q| after_creds + q) else {
        return Ok((url.to_owned(), found));
    };
    let mut kept = Vec::new();
    let invalid = |why: String| StoreError::new(StoreErrorKind::InvalidInput, why);
    for param in url[q + 1..].split('&') {
        let name = param.split_once('=').map_or(param, |(name, _)| name);
        if !name.starts_with("chatmem_") {
            kept.push(param);
            continue;
        }
        let slot = match name {
            TIMEOUT_PARAM => &mut found.timeout,
            CONNECT_TIMEOUT_PARAM => &mut found.connect,
            POOL_TIMEOUT_PARAM => &mut found.pool,
            STATEMENT_TIMEOUT_PARAM => &mut found.statement,
            _ => {
                return Err(invalid(format!(
                    "unknown URL parameter {name}: chatmem-mysql reads {}",
                    PARAMS.join(", ")
                )));
            }
        };
        if slot.is_some() {
            return Err(invalid(format!("URL parameter {name} is given twice")));
        }
        let ms = param
            .split_once('=')
            .and_then(|(_, value)| value.parse::<u64>().ok())
            .ok_or_else(|| invalid(format!("URL parameter {name} must be a whole number of milliseconds")))?;
        *slot = Some(Duration::from_millis(ms));
    }
    let mut rest = url[..q].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatmem_parameters_are_taken_out() {
        let (rest, found) =
            split("mysql://u:p?w@h/db?prefer_socket=false&chatmem_statement_timeout_ms=30000&chatmem_timeout_ms=250")
                .unwrap();
        assert_eq!(rest, "mysql://u:p?w@h/db?prefer_socket=false");
        assert_eq!(found.timeout, Some(Duration::from_millis(250)));
        assert_eq!(found.statement, Some(Duration::from_millis(30_000)));
        let (rest, found) = split("mysql://h/db?chatmem_connect_timeout_ms=1&chatmem_pool_timeout_ms=0").unwrap();
        assert_eq!(rest, "mysql://h/db");
        assert_eq!(
            (found.connect, found.pool),
            (Some(Duration::from_millis(1)), Some(Duration::ZERO))
        );
        assert_eq!(
            split("mysql://h/db").unwrap(),
            ("mysql://h/db".to_owned(), UrlTimeouts::default())
        );
    }

    #[test]
    fn bad_chatmem_parameters_are_named() {
        for (url, named) in [
            (
                "mysql://h/db?chatmem_statement_timeout_ms=30s",
                "chatmem_statement_timeout_ms",
            ),
            ("mysql://h/db?chatmem_pool_timeout_ms", "chatmem_pool_timeout_ms"),
            (
                "mysql://h/db?chatmem_statment_timeout_ms=5",
                "chatmem_statment_timeout_ms",
            ),
            ("mysql://h/db?chatmem_timeout_ms=5&chatmem_timeout_ms=6", "given twice"),
        ] {
            let err = split(url).unwrap_err();
            assert_eq!(err.kind(), StoreErrorKind::InvalidInput, "{url}");
            assert!(err.to_string().contains(named), "{url}: {err}");
        }
    }
}
