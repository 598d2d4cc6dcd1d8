//! [`redact_url`]: a store URL made safe to print. The one function every store and the CLI
//! use, so that no copy forgets a form.
//!
//! Done on the text rather than with a URL parser: store URLs are often not valid URLs
//! (`redis+cluster://u:pw@h1:7000,h2:7001`, passwords with an unencoded `/`, `#` or `?`,
//! which the drivers accept), and a parse failure must never print the password.

/// Query parameters whose value is a secret.
const SECRET_PARAMS: &[&str] = &[
    "password",
    "pass",
    "passwd",
    "pwd",
    "sslpassword",
    "secret",
    "token",
    "auth",
    "api_key",
    "apikey",
];

/// What is printed instead of a URL that cannot be shown safely.
pub const HIDDEN_URL: &str = "<URL not shown>";

/// `url` with every password hidden, safe to print in an error or a log.
///
/// - User info: everything between `://` and the **last** `@` is the user info (a password
///   may hold an unencoded `/`, `#`, `?` or `@`); a user name before the first `:` stays,
///   the rest becomes `***`. A user info without `:` becomes `***` too (`redis://secret@host`
///   passes a password that way).
/// - Query parameters named like a secret (`password`, `pass`, `pwd`, `token`, ...) keep
///   their name, not their value; a `#fragment` is dropped.
/// - Text that does not start with a scheme (`host=db password=secret`, a key-value
///   connection string) is not shown at all: [`HIDDEN_URL`].
///
/// ```
/// use chatmem::redact_url;
/// assert_eq!(redact_url("postgres://app:s3cret@db:5432/x"), "postgres://app:***@db:5432/x");
/// assert_eq!(redact_url("redis://secret@127.0.0.1:6379"), "redis://***@127.0.0.1:6379");
/// assert_eq!(redact_url("postgres://u:pa/ss?w#rd@db/x"), "postgres://u:***@db/x");
/// assert_eq!(redact_url("postgres://db/x?password=s3cret&sslmode=disable"), "postgres://db/x?password=***&sslmode=disable");
/// assert_eq!(redact_url("host=db password=s3cret"), chatmem::HIDDEN_URL);
/// assert_eq!(redact_url("sqlite:/var/lib/app/mem.db"), "sqlite:/var/lib/app/mem.db");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some(colon) = url.find(':') else {
        return HIDDEN_URL.to_string();
    };
    let scheme = &url[..colon];
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return HIDDEN_URL.to_string();
    }
    let (prefix, rest) = match url[colon + 1..].strip_prefix("//") {
        Some(rest) => (&url[..colon + 3], rest),
        None => (&url[..=colon], &url[colon + 1..]),
    };
    let mut out = String::from(prefix);
    let rest = if prefix.ends_with("//")
        && let Some(at) = rest.rfind('@')
    {
        let userinfo = &rest[..at];
        match userinfo.split_once(':') {
            Some((user, _)) if !user.contains(['/', '?', '#']) => {
                out.push_str(user);
                out.push_str(":***@");
            }
            _ => out.push_str("***@"),
        }
        &rest[at + 1..]
    } else {
        rest
    };
    // A fragment is never needed to name a store, and may hold anything.
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    match rest.split_once('?') {
        None => out.push_str(rest),
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((name, _)) if is_secret(name) => format!("{name}=***"),
                    _ => param.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
    }
    out
}

fn is_secret(name: &str) -> bool {
    SECRET_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form a password was seen to leak in, and forms that must stay readable.
    #[test]
    fn no_password_survives() {
        let secret_forms = [
            "postgres://app:s3cret@db:5432/x",
            "postgres://u:pa/ssecret@db/x",
            "postgres://u:pa?ssecret@db/x",
            "postgres://u:pa#ssecret@db/x",
            "postgres://u:pa@ssecret@db/x",
            "redis://:pa#secret@127.0.0.1:6379",
            "redis://secret@127.0.0.1:6379",
            "rediss://user:secret@h:6380/0",
            "redis+cluster://u:secret@h1:7000,h2:7001",
            "postgres://postgres@127.0.0.1:47001/test?password=secret",
            "postgres://postgres@127.0.0.1/test?sslmode=disable&PASSWORD=secret",
            "redis://127.0.0.1:6379/0?pass=secret",
            "redis+unix:///run/redis.sock?db=0&password=secret",
            "host=127.0.0.1 user=postgres password=secret dbname=test",
            "  postgres://u:secret@h/x",
            "postgres://h/x#secret",
            "",
        ];
        for url in secret_forms {
            let shown = redact_url(url);
            assert!(!shown.contains("secret"), "{url:?} printed as {shown:?}");
        }
    }

    #[test]
    fn what_is_not_secret_stays_readable() {
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("memory:"), "memory:");
        assert_eq!(redact_url("sqlite:/tmp/a.db?mode=ro"), "sqlite:/tmp/a.db?mode=ro");
        assert_eq!(
            redact_url("redis+cluster://u:pw@h1:7000,h2:7001"),
            "redis+cluster://u:***@h1:7000,h2:7001"
        );
        assert_eq!(
            redact_url("postgres://app@db/x?sslmode=disable"),
            "postgres://***@db/x?sslmode=disable"
        );
        assert_eq!(
            redact_url("redis://:pw@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
    }
}
