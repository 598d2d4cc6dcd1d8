//! Bearer tokens and tenants: which tenant a request speaks for. The tenant is part of every
//! stored key ([`Tenant::key`]), so one tenant's conversations are not even addressable by
//! another's requests.

use std::collections::HashMap;
use std::path::Path;

use chatmem::ConversationId;
use serde::Deserialize;

/// Bearer tokens from a TOML file, each mapped to a tenant:
///
/// ```toml
/// [[token]]
/// token = "s3cret-token-of-team-a"
/// tenant = "team-a"
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
    tokens: HashMap<String, Tenant>,
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
    /// characters or given twice, or a tenant name that is not 1-64 of `A-Z a-z 0-9 _ - .`.
    pub fn from_toml(text: &str) -> Result<Self, AuthError> {
        let file: File = toml::from_str(text).map_err(|e| AuthError::Parse(e.message().to_owned()))?;
        if file.token.is_empty() {
            return Err(AuthError::Invalid("no [[token]] entries".into()));
        }
        let mut tokens = HashMap::new();
        for (i, entry) in file.token.into_iter().enumerate() {
            if entry.token.len() < 16 {
                return Err(AuthError::Invalid(format!(
                    "token #{} is shorter than 16 characters",
                    i + 1
                )));
            }
            let tenant = Tenant::new(&entry.tenant).map_err(AuthError::Invalid)?;
            if tokens.insert(entry.token, tenant).is_some() {
                return Err(AuthError::Invalid(format!("token #{} is given twice", i + 1)));
            }
        }
        Ok(Self { tokens })
    }

    /// The tenant of bearer token `token`, if it is one of ours.
    pub fn tenant_for(&self, token: &str) -> Option<&Tenant> {
        self.tokens.get(token)
    }
}

/// Whose conversations a request may see. Without auth there is one tenant whose keys are the
/// conversation ids themselves (so the server and the `chatmem` CLI share conversations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    name: String,
    /// `<name>/`, or empty for the tenant of a server without auth.
    prefix: String,
}

impl Tenant {
    /// The tenant of a server without auth.
    pub fn open() -> Self {
        Self {
            name: String::new(),
            prefix: String::new(),
        }
    }

    fn new(name: &str) -> Result<Self, String> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            return Err(format!(
                "tenant {:?} must be 1-64 characters of A-Z a-z 0-9 _ - .",
                chatmem::printable(name)
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            prefix: format!("{name}/"),
        })
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
    pub fn key(&self, id: &str) -> Result<ConversationId, chatmem::InvalidConversationId> {
        if id.is_empty() {
            return Err(chatmem::InvalidConversationId::Empty);
        }
        ConversationId::new(format!("{}{id}", self.prefix))
    }

    /// The id a client knows for stored key `key`, if the key is this tenant's.
    pub fn client_id<'a>(&self, key: &'a ConversationId) -> Option<&'a str> {
        key.as_str().strip_prefix(self.prefix.as_str())
    }

    /// Where this tenant's keys begin, for listing (`None`: from the start).
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }
}
