//! Bearer tokens and tenants: which tenant a request speaks for. The tenant is part of every
//! stored key ([`Tenant::key`]), so one tenant's conversations are not even addressable by
//! another's requests. The key rule `<tenant>/<id>` and the lengths it depends on live here,
//! and nowhere else.

use std::collections::HashSet;
use std::path::Path;

use chatmem::facts::InvalidUserId;
use chatmem::{ConversationId, InvalidConversationId, UserId};
use serde::Deserialize;
use subtle::ConstantTimeEq;

/// The longest tenant name, in bytes.
///
/// ```
/// let name = "t".repeat(chatmem_server::MAX_TENANT_BYTES + 1);
/// let toml = format!("[[token]]\ntoken = \"a-long-random-token\"\ntenant = \"{name}\"\n");
/// assert!(chatmem_server::Auth::from_toml(&toml).is_err());
/// ```
pub const MAX_TENANT_BYTES: usize = 64;

/// The longest conversation id a client may give by default, in bytes
/// ([`Limits::max_id_bytes`](crate::Limits::max_id_bytes)): what [`chatmem::MAX_ID_BYTES`]
/// leaves of a stored key `<tenant>/<id>` after the longest tenant prefix, so every id within
/// it is stored for every tenant (256 − 64 − 1 = 191).
///
/// ```
/// use chatmem_server::{DEFAULT_MAX_ID_BYTES, Limits, MAX_TENANT_BYTES};
/// assert_eq!(Limits::default().max_id_bytes, DEFAULT_MAX_ID_BYTES);
/// assert_eq!(MAX_TENANT_BYTES + "/".len() + DEFAULT_MAX_ID_BYTES, chatmem::MAX_ID_BYTES);
/// ```
pub const DEFAULT_MAX_ID_BYTES: usize = chatmem::MAX_ID_BYTES - MAX_TENANT_BYTES - "/".len();

/// Bearer tokens from a TOML file, each mapped to a tenant; `write = false` makes a token
/// read-only (its writes answer 403 `read_only_token`):
///
/// ```toml
/// [[token]]
/// token = "s3cret-token-of-team-a"
/// tenant = "team-a"
///
/// [[token]]
/// token = "s3cret-reader-of-team-a"
/// tenant = "team-a"
/// write = false
/// ```
///
/// ```
/// let auth = chatmem_server::Auth::from_toml("[[token]]\ntoken = \"a-long-random-token\"\ntenant = \"team-a\"\n")?;
/// assert_eq!(auth.tenant_for("a-long-random-token").map(|t| t.name()), Some("team-a"));
/// assert!(auth.tenant_for("nope").is_none());
/// # Ok::<(), chatmem_server::AuthError>(())
/// ```
#[derive(Clone, Default)]
pub struct Auth {
    /// Every token with its tenant, compared one by one in constant time (not hashed into a
    /// map, whose lookup would stop at the first differing byte).
    tokens: Vec<(String, Tenant)>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens.
        f.debug_struct("Auth").field("tokens", &self.tokens.len()).finish()
    }
}

/// Why an auth file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The file could not be read.
    #[error("reading the auth file {path}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the expected TOML.
    #[error("the auth file is not valid: {0}")]
    Parse(String),
    /// A tenant name or token is not acceptable.
    #[error("the auth file is not valid: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    token: String,
    tenant: String,
    /// False: the token reads only (its writes are 403 `read_only_token`).
    #[serde(default = "writes_by_default")]
    write: bool,
}

fn writes_by_default() -> bool {
    true
}

impl Auth {
    /// Reads the TOML file at `path`.
    ///
    /// # Errors
    /// [`AuthError`] when the file cannot be read or is not valid.
    pub fn from_file(path: &Path) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// Parses the TOML text of an auth file.
    ///
    /// # Errors
    /// [`AuthError`] when it is not valid: unknown keys, no tokens, a token shorter than 16
    /// characters or given twice, or a tenant name that is not 1 to [`MAX_TENANT_BYTES`] of
    /// `A-Z a-z 0-9 _ - .`.
    pub fn from_toml(text: &str) -> Result<Self, AuthError> {
        let file: File = toml::from_str(text).map_err(|e| AuthError::Parse(e.message().to_owned()))?;
        if file.token.is_empty() {
            return Err(AuthError::Invalid("no [[token]] entries".into()));
        }
        let mut tokens = Vec::with_capacity(file.token.len());
        let mut seen = HashSet::new();
        for (i, entry) in file.token.into_iter().enumerate() {
            // A request's token is read without the white space around it (RFC 7235), so a
            // file token with some could never match: refused here, not at the first request.
            if entry.token.trim() != entry.token {
                return Err(AuthError::Invalid(format!(
                    "token #{} has white space at its start or end",
                    i + 1
                )));
            }
            if entry.token.len() < 16 {
                return Err(AuthError::Invalid(format!(
                    "token #{} is shorter than 16 characters",
                    i + 1
                )));
            }
            let mut tenant = Tenant::new(&entry.tenant).map_err(AuthError::Invalid)?;
            tenant.writes = entry.write;
            if !seen.insert(entry.token.clone()) {
                return Err(AuthError::Invalid(format!("token #{} is given twice", i + 1)));
            }
            tokens.push((entry.token, tenant));
        }
        Ok(Self { tokens })
    }

    /// The tenant of bearer token `token`, if it is one of ours.
    pub fn tenant_for(&self, token: &str) -> Option<&Tenant> {
        // Every entry is compared, each in constant time for tokens of its length, so how long
        // an answer takes does not tell how much of a guess was right.
        let mut found = None;
        for (known, tenant) in &self.tokens {
            if bool::from(known.as_bytes().ct_eq(token.as_bytes())) {
                found = Some(tenant);
            }
        }
        found
    }
}

/// The token of an `Authorization` header value of the `Bearer` scheme, `None` for another
/// scheme or none. The scheme is matched without regard to case (RFC 7235: `bearer`, `BEARER`)
/// and the white space around the token is not part of it.
///
/// ```
/// use chatmem_server::bearer_token;
/// assert_eq!(bearer_token("Bearer token-of-team-a-000"), Some("token-of-team-a-000"));
/// assert_eq!(bearer_token("bearer  token-of-team-a-000 "), Some("token-of-team-a-000"));
/// assert_eq!(bearer_token("Basic dXNlcjpwdw=="), None);
/// assert_eq!(bearer_token("Bearer"), None);
/// ```
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whose conversations a request may see. Without auth there is one tenant whose keys are the
/// conversation ids themselves (so the server and the `chatmem` CLI share conversations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    name: String,
    /// Whether the token may write (`write = false` in the auth file: it may not).
    writes: bool,
    /// `<name>/`, where the tenant's keys begin; `None` for the tenant of a server without auth.
    prefix: Option<ConversationId>,
}

impl Tenant {
    /// The tenant of a server without auth.
    pub fn open() -> Self {
        Self {
            name: String::new(),
            writes: true,
            prefix: None,
        }
    }

    fn new(name: &str) -> Result<Self, String> {
        let ok = !name.is_empty()
            && name.len() <= MAX_TENANT_BYTES
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            return Err(format!(
                "tenant {:?} must be 1-{MAX_TENANT_BYTES} characters of A-Z a-z 0-9 _ - .",
                chatmem::printable::printable(name)
            ));
        }
        // Cannot fail for a name checked above; refused rather than trusted all the same.
        let prefix = ConversationId::new(format!("{name}/")).map_err(|e| e.to_string())?;
        Ok(Self {
            name: name.to_owned(),
            writes: true,
            prefix: Some(prefix),
        })
    }

    /// Whether the request may write: false for a token given `write = false` in the auth
    /// file, true otherwise (and without auth).
    pub fn can_write(&self) -> bool {
        self.writes
    }

    /// `Ok` when the request may write, else 403 `read_only_token`.
    pub(crate) fn check_write(&self) -> Result<(), crate::error::ApiError> {
        if self.writes {
            Ok(())
        } else {
            Err(crate::error::ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                crate::error::ErrorCode::ReadOnlyToken,
                "this token reads only (write = false in the auth file)",
            ))
        }
    }

    /// The tenant's name (empty without auth).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stored key of the tenant's conversation `id`: `<tenant>/<id>` (a tenant name holds
    /// no `/`, so keys of two tenants never meet).
    ///
    /// # Errors
    /// The id's error when the id (with the prefix) is not a valid conversation id.
    ///
    /// ```
    /// let auth = chatmem_server::Auth::from_toml("[[token]]\ntoken = \"a-long-random-token\"\ntenant = \"team-a\"\n")?;
    /// let tenant = auth.tenant_for("a-long-random-token").expect("a tenant");
    /// let key = tenant.key("c1")?;
    /// assert_eq!(key.as_str(), "team-a/c1");
    /// assert_eq!(tenant.client_id(&key), Some("c1"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(&self, id: &str) -> Result<ConversationId, InvalidConversationId> {
        if id.is_empty() {
            return Err(InvalidConversationId::Empty);
        }
        ConversationId::new(format!("{}{id}", self.prefix_str()))
    }

    /// The stored id of the tenant's user `id`: `<tenant>/<id>`, by the rule of
    /// [`key`](Tenant::key), so one tenant's users' facts are not addressable by another's
    /// requests.
    ///
    /// # Errors
    /// The user id's error when the id (with the prefix) is not a valid user id.
    ///
    /// ```
    /// let auth = chatmem_server::Auth::from_toml("[[token]]\ntoken = \"a-long-random-token\"\ntenant = \"team-a\"\n")?;
    /// let tenant = auth.tenant_for("a-long-random-token").expect("a tenant");
    /// assert_eq!(tenant.user("u-42")?.as_str(), "team-a/u-42");
    /// assert!(tenant.user("").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn user(&self, id: &str) -> Result<UserId, InvalidUserId> {
        if id.is_empty() {
            return Err(InvalidUserId::Empty);
        }
        UserId::new(format!("{}{id}", self.prefix_str()))
    }

    /// The id a client knows for stored key `key`, if the key is this tenant's.
    pub fn client_id<'a>(&self, key: &'a ConversationId) -> Option<&'a str> {
        key.as_str().strip_prefix(self.prefix_str())
    }

    /// Where a listing of this tenant's keys starts (`None`: from the first key). Every key
    /// of the tenant sorts after its prefix, so a listing from here stops at the first key
    /// [`client_id`](Tenant::client_id) does not claim.
    pub(crate) fn list_start(&self) -> Option<&ConversationId> {
        self.prefix.as_ref()
    }

    /// Where the tenant's keys begin: `<name>/`, or `""` without auth.
    pub(crate) fn prefix_str(&self) -> &str {
        self.prefix.as_ref().map_or("", ConversationId::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_keys_begin_at_its_list_start_and_only_it_claims_them() {
        let a = Tenant::new("a").expect("a valid name");
        let ab = Tenant::new("a-b").expect("a valid name");
        let key = a.key("x/y").expect("a valid id");
        assert_eq!(key.as_str(), "a/x/y");
        assert!(a.list_start().is_some_and(|start| start < &key));
        assert_eq!(a.client_id(&key), Some("x/y"));
        assert_eq!(ab.client_id(&key), None);
        assert_eq!(a.key(""), Err(InvalidConversationId::Empty));
        // Without auth the key is the id.
        let open = Tenant::open();
        assert_eq!(open.key("x").map(|k| k.as_str().to_owned()), Ok("x".to_owned()));
        assert_eq!(open.list_start(), None);
        // The longest id the server takes by default is a key for the longest tenant name,
        // and not one byte more.
        let longest = Tenant::new(&"t".repeat(MAX_TENANT_BYTES)).expect("the longest name");
        assert!(longest.key(&"i".repeat(DEFAULT_MAX_ID_BYTES)).is_ok());
        assert!(longest.key(&"i".repeat(DEFAULT_MAX_ID_BYTES + 1)).is_err());
        // The longest name is accepted, one byte more is not.
        assert!(Tenant::new(&"t".repeat(MAX_TENANT_BYTES)).is_ok());
        assert!(Tenant::new(&"t".repeat(MAX_TENANT_BYTES + 1)).is_err());
    }
}
