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

/// What is printed instead of a text that cannot be shown safely.
pub const HIDDEN_URL: &str = "<URL not shown>";

/// `url` with every password hidden, safe to print in an error or a log.
///
/// - User info: everything between `://` (or the scheme's `:`) and the **last** `@` is the
///   user info (a password may hold an unencoded `/`, `#`, `?` or `@`); a user name before
///   the first `:` stays, the rest becomes `***`. A user info without `:` is a user name and
///   stays (`mysql://root@db`), except in a Redis URL, where it may be a password
///   (`redis://secret@host`, as older clients wrote it) and becomes `***`.
/// - Query parameters named like a secret (`password`, `pass`, `pwd`, `token`, ...) keep
///   their name, not their value; a `#fragment` is dropped.
/// - Text that does not start with a scheme:
///   - a key-value connection string (`host=db password=secret`, libpq's form: `key=value`
///     pairs, a value bare or in single quotes) keeps its keys and every value but a
///     secret's (`password=***`);
///   - other text holding `=` (a malformed connection string, which could hold a password
///     in a form not recognised here) is not shown at all: [`HIDDEN_URL`];
///   - text holding `@` is shown from its last `@` on, after `***`;
///   - the rest (a file path such as `data/x.db`) is shown as it is: no driver reads a
///     password from it, and seeing what was typed is what tells a typo.
///
/// ```
/// use chatmem::store::redact_url;
/// assert_eq!(redact_url("postgres://app:s3cret@db:5432/x"), "postgres://app:***@db:5432/x");
/// assert_eq!(redact_url("redis://secret@127.0.0.1:6379"), "redis://***@127.0.0.1:6379");
/// assert_eq!(redact_url("mysql://root@127.0.0.1:3306/test"), "mysql://root@127.0.0.1:3306/test");
/// assert_eq!(redact_url("postgres://u:pa/ss?w#rd@db/x"), "postgres://u:***@db/x");
/// assert_eq!(redact_url("postgres://db/x?password=s3cret&sslmode=disable"), "postgres://db/x?password=***&sslmode=disable");
/// assert_eq!(redact_url("host=db password=s3cret"), "host=db password=***");
/// assert_eq!(redact_url("Server=db;Password=s3cret"), chatmem::store::HIDDEN_URL);
/// assert_eq!(redact_url("data/x.db"), "data/x.db");
/// assert_eq!(redact_url("sqlite:/var/lib/app/mem.db"), "sqlite:/var/lib/app/mem.db");
/// ```
pub fn redact_url(url: &str) -> String {
    let colon = url.find(':').filter(|&colon| {
        let scheme = &url[..colon];
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let Some(colon) = colon else {
        return redact_without_scheme(url);
    };
    let (prefix, rest) = match url[colon + 1..].strip_prefix("//") {
        Some(rest) => (&url[..colon + 3], rest),
        None => (&url[..=colon], &url[colon + 1..]),
    };
    let mut out = String::from(prefix);
    // Without `//` too: `u:pw@db/x`, a URL missing its `postgres://`, still holds a password.
    let rest = if let Some(at) = rest.rfind('@') {
        let userinfo = &rest[..at];
        let plain_name = |user: &str| !user.contains(['/', '?', '#']);
        match userinfo.split_once(':') {
            Some((user, _)) if plain_name(user) => {
                out.push_str(user);
                out.push_str(":***@");
            }
            // After `scheme://` only: in `u:secret@db`, read as scheme `u`, it is a password.
            None if prefix.ends_with("//")
                && plain_name(userinfo)
                && !url[..colon].to_ascii_lowercase().starts_with("redis") =>
            {
                out.push_str(userinfo);
                out.push('@');
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

/// A text without a scheme: a key-value connection string with its secrets hidden, other
/// text with a `=` hidden whole, user info before an `@` hidden, the rest as it is.
fn redact_without_scheme(text: &str) -> String {
    if let Some(shown) = redact_key_values(text) {
        return shown;
    }
    if text.contains('=') {
        return HIDDEN_URL.to_string();
    }
    match text.rfind('@') {
        Some(at) => format!("***@{}", &text[at + 1..]),
        None => text.to_string(),
    }
}

/// `text` as libpq's `key=value` connection string with every secret's value `***`; `None`
/// unless the whole text is in that form and no other value holds a `=` (such as
/// `Server=db;Password=x`, where the password would be inside another key's value).
fn redact_key_values(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut pairs = 0;
    loop {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        if rest.is_empty() {
            return (pairs > 0).then_some(out);
        }
        let key_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
        let (key, after_key) = rest.split_at(key_len);
        let after_eq = after_key.trim_start().strip_prefix('=')?.trim_start();
        if key.is_empty() {
            return None;
        }
        let value_len = value_len(after_eq)?;
        let value = &after_eq[..value_len];
        if is_secret(key) {
            out.push_str(&rest[..rest.len() - after_eq.len()]);
            out.push_str("***");
        } else if value.contains('=') {
            return None;
        } else {
            out.push_str(&rest[..rest.len() - after_eq.len() + value_len]);
        }
        rest = &after_eq[value_len..];
        pairs += 1;
    }
}

/// The length of the value at the start of `text`: up to the closing quote of a quoted
/// value (`None` if it has none), else up to whitespace; a backslash escapes the next
/// character in both.
fn value_len(text: &str) -> Option<usize> {
    let quoted = text.starts_with('\'');
    let mut chars = text.char_indices().skip(usize::from(quoted));
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next()?;
            }
            '\'' if quoted => return Some(i + 1),
            c if !quoted && c.is_whitespace() => return Some(i),
            _ => {}
        }
    }
    (!quoted).then_some(text.len())
}

fn is_secret(name: &str) -> bool {
    SECRET_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s))
}

/// A store URL that prints (with `{:?}` and `{}`) only as [`redact_url`] shows it: a builder
/// holding one derives `Debug` and cannot print the password.
///
/// ```
/// use chatmem::store::SecretUrl;
/// let url = SecretUrl::from("postgres://app:s3cret@db/x");
/// assert_eq!(url.expose(), "postgres://app:s3cret@db/x");
/// assert_eq!(format!("{url:?} {url}"), "\"postgres://app:***@db/x\" postgres://app:***@db/x");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// The URL as given, password included: for the driver only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SecretUrl {
    fn from(url: &str) -> Self {
        Self(url.to_owned())
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&redact_url(&self.0), f)
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
    }
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
            "password = 'a secret'",
            "host=db password='it''s \\' secret'",
            "host=db password='unterminated secret",
            "host=db password=\\ secret",
            "Server=db;Password=secret",
            "host=db options='-c password=secret'",
            "u:secret@db/x",
            "secret@db/x",
            "postgres//u:secret@db/x",
        ];
        for url in secret_forms {
            let shown = redact_url(url);
            assert!(!shown.contains("secret"), "{url:?} printed as {shown:?}");
        }
    }

    #[test]
    fn what_is_not_secret_stays_readable() {
        assert_eq!(redact_url("data/x.db"), "data/x.db");
        assert_eq!(redact_url("./my data/x.db"), "./my data/x.db");
        assert_eq!(redact_url("memory"), "memory");
        assert_eq!(redact_url("u:secret@db/x"), "u:***@db/x");
        assert_eq!(redact_url("secret@db/x"), "***@db/x");
        assert_eq!(
            redact_url("host=127.0.0.1 port=1  password = 'a b' dbname=test"),
            "host=127.0.0.1 port=1  password = *** dbname=test"
        );
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("memory:"), "memory:");
        assert_eq!(redact_url("sqlite:/tmp/a.db?mode=ro"), "sqlite:/tmp/a.db?mode=ro");
        assert_eq!(
            redact_url("redis+cluster://u:pw@h1:7000,h2:7001"),
            "redis+cluster://u:***@h1:7000,h2:7001"
        );
        // A user name alone holds no password (the drivers read it as the user), except in
        // Redis URLs.
        assert_eq!(
            redact_url("postgres://app@db/x?sslmode=disable"),
            "postgres://app@db/x?sslmode=disable"
        );
        assert_eq!(
            redact_url("mysql://root@127.0.0.1:1/test"),
            "mysql://root@127.0.0.1:1/test"
        );
        assert_eq!(redact_url("rediss://secret@h:6380"), "rediss://***@h:6380");
        assert_eq!(
            redact_url("redis+cluster://secret@h1:7000"),
            "redis+cluster://***@h1:7000"
        );
        assert_eq!(
            redact_url("redis://:pw@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
    }
}
