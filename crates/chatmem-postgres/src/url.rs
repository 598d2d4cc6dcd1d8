//! The connection string: chatmem's own `chatmem_*` URL parameters taken out of it (the
//! driver refuses parameters it does not know), and the name it is printed by.

use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind, redact_url};
use deadpool_postgres::tokio_postgres::Config;
use deadpool_postgres::tokio_postgres::config::Host;

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

/// Whether `url` is in the URL form (rather than `key=value` pairs).
pub(crate) fn is_url_form(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Splits `url` into the connection string the driver parses and chatmem's own
/// parameters. A `key=value` connection string is returned as it is.
///
/// The query is found where the driver finds it: after the first `@`, if any, at the
/// first `?`.
pub(crate) fn split(url: &str) -> Result<(String, UrlTimeouts), StoreError> {
    let mut found = UrlTimeouts::default();
    if !is_url_form(url) {
        return Ok((url.to_owned(), found));
    }
    let after_creds = url.find('@').map_or(0, |at| at + 1);
    let Some(q) = url[after_creds..].find('?').map(|q| after_creds + q) else {
        return Ok((url.to_owned(), found));
    };
    let mut kept = Vec::new();
    for param in url[q + 1..].split('&') {
        let name = param.split_once('=').map_or(param, |(name, _)| name);
        if !name.starts_with("chatmem_") {
            kept.push(param);
            continue;
        }
        let invalid = |why: String| StoreError::new(StoreErrorKind::InvalidInput, why);
        let slot = match name {
            TIMEOUT_PARAM => &mut found.timeout,
            CONNECT_TIMEOUT_PARAM => &mut found.connect,
            POOL_TIMEOUT_PARAM => &mut found.pool,
            STATEMENT_TIMEOUT_PARAM => &mut found.statement,
            _ => {
                return Err(invalid(format!(
                    "unknown URL parameter {name}: chatmem-postgres reads {}",
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

/// The server a parsed connection string points at, fit for errors and logs.
///
/// The URL form is printed through [`redact_url`], which works on the text and so cannot be
/// fooled by how the driver's lenient parser split it; a `key=value` string is re-described
/// from the parsed config as `postgres://user@host:port/database`, without its password, so
/// that every error names a server in one form.
///
/// # Errors
/// [`StoreErrorKind::InvalidInput`] when the driver parsed an `@` into a host name: a
/// password with an unencoded `@` (the driver splits at the first one), which would
/// otherwise be sent as a host name.
pub(crate) fn describe(url: &str, config: &Config) -> Result<String, StoreError> {
    let has_at = config
        .get_hosts()
        .iter()
        .any(|host| matches!(host, Host::Tcp(name) if name.contains('@')));
    if has_at {
        return Err(StoreError::new(
            StoreErrorKind::InvalidInput,
            format!(
                "the PostgreSQL URL {} has an '@' in its host name: write an '@' in the password as %40",
                redact_url(url)
            ),
        ));
    }
    if is_url_form(url) {
        return Ok(redact_url(url));
    }
    let user = config.get_user().unwrap_or("");
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let db = config.get_dbname().unwrap_or(user);
    let at = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    Ok(format!("postgres://{at}{}/{db}", hosts.join(",")))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    #[test]
    fn chatmem_parameters_are_taken_out() {
        let (rest, found) =
            split("postgres://u:p?w@h/db?sslmode=disable&chatmem_statement_timeout_ms=30000&chatmem_timeout_ms=250")
                .unwrap();
        assert_eq!(rest, "postgres://u:p?w@h/db?sslmode=disable");
        assert_eq!(
            found,
            UrlTimeouts {
                timeout: ms(250),
                statement: ms(30_000),
                ..UrlTimeouts::default()
            }
        );
        let (rest, found) = split("postgresql://h/db?chatmem_connect_timeout_ms=1&chatmem_pool_timeout_ms=0").unwrap();
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!((found.connect, found.pool), (ms(1), ms(0)));
        for unchanged in [
            "postgres://h/db",
            "postgres://h/db?application_name=x",
            "host=h chatmem_timeout_ms=5",
        ] {
            assert_eq!(
                split(unchanged).unwrap(),
                (unchanged.to_owned(), UrlTimeouts::default())
            );
        }
    }

    #[test]
    fn bad_chatmem_parameters_are_named() {
        for (url, named) in [
            (
                "postgres://h/db?chatmem_statement_timeout_ms=30s",
                "chatmem_statement_timeout_ms",
            ),
            ("postgres://h/db?chatmem_timeout_ms=-1", "chatmem_timeout_ms"),
            ("postgres://h/db?chatmem_pool_timeout_ms", "chatmem_pool_timeout_ms"),
            (
                "postgres://h/db?chatmem_statment_timeout_ms=5",
                "chatmem_statment_timeout_ms",
            ),
            (
                "postgres://h/db?chatmem_timeout_ms=5&chatmem_timeout_ms=6",
                "given twice",
            ),
        ] {
            let err = split(url).unwrap_err();
            assert_eq!(err.kind(), StoreErrorKind::InvalidInput, "{url}");
            assert!(err.to_string().contains(named), "{url}: {err}");
        }
    }

    #[test]
    fn described_without_passwords() {
        let shown = |url: &str| describe(url, &Config::from_str(url).unwrap());
        assert_eq!(
            shown("postgres://alice:s3cret@db.example:6543/app").unwrap(),
            "postgres://alice:***@db.example:6543/app"
        );
        assert_eq!(
            shown("host=h port=6543 user=u password=s3cret dbname=d").unwrap(),
            "postgres://u@h:6543/d"
        );
        let err = shown("postgres://u:pa@s3cret@db/x").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
