//! The connection string: chatmem's own `chatmem_*` URL parameters taken out of it (the
//! driver refuses parameters it does not know), and the name it is printed by.

use chatmem::store::{StoreError, StoreErrorKind, redact_url};
use chatmem_sql::TimeoutSettings;
use deadpool_postgres::tokio_postgres::Config;
use deadpool_postgres::tokio_postgres::config::Host;

/// Whether `url` is in the URL form (rather than `key=value` pairs).
pub(crate) fn is_url_form(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Splits `url` into the connection string the driver parses and chatmem's own
/// parameters. A `key=value` connection string is returned as it is.
///
/// The query is found where the driver finds it: after the first `@`, if any, at the
/// first `?`.
pub(crate) fn split(url: &str) -> Result<(String, TimeoutSettings), StoreError> {
    if !is_url_form(url) {
        return Ok((url.to_owned(), TimeoutSettings::default()));
    }
    let after_creds = url.find('@').map_or(0, |at| at + 1);
    let query = url[after_creds..].find('?').map(|q| after_creds + q);
    TimeoutSettings::split_url(url, query, "chatmem-postgres")
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
    use std::time::Duration;

    use super::*;

    // The parameters' parsing is tested in chatmem::store; here, which strings have a
    // query, where it starts for this driver, and the crate's name in errors.
    #[test]
    fn the_query_starts_after_the_first_at() {
        let (rest, found) = split("postgres://u:p?w@h/db?sslmode=disable&chatmem_statement_timeout_ms=30000").unwrap();
        assert_eq!(rest, "postgres://u:p?w@h/db?sslmode=disable");
        assert_eq!(found.statement, Some(Duration::from_millis(30_000)));
        let (rest, found) = split("postgresql://h/db?chatmem_connect_timeout_ms=1").unwrap();
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(found.connect, Some(Duration::from_millis(1)));
        for unchanged in [
            "postgres://h/db",
            "postgres://h/db?application_name=x",
            "host=h chatmem_timeout_ms=5",
        ] {
            assert_eq!(
                split(unchanged).unwrap(),
                (unchanged.to_owned(), TimeoutSettings::default())
            );
        }
        let err = split("postgres://h/db?chatmem_statment_timeout_ms=5").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
        assert!(err.to_string().contains("chatmem-postgres reads"), "{err}");
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
