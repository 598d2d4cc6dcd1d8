//! [`ErrorCode`]: every code an error of the server carries. SERVER.md's table of error
//! codes lists exactly these (a test compares them), and `/openapi.json` documents an error's
//! `code` as this enum.

use std::fmt;

/// The stable, machine-readable `code` of an error the server sends. Each variant says when
/// it is sent, and with which HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the request was malformed (a body, field, query, header or id); the message names
    /// what was wrong, and `param` the field when it is one.
    InvalidRequest,
    /// 400: the HTTP parser could not read the request at all (bytes outside HTTP's grammar,
    /// conflicting `Content-Length` or `Transfer-Encoding` headers); the connection is closed.
    BadRequest,
    /// 401: no valid bearer token (or, on the inspector's pages, no sign-in).
    Unauthorized,
    /// 403: without `--auth`, a `Host` that is neither loopback nor one of `--allowed-host`.
    ForbiddenHost,
    /// 403: an `Origin` that is another site's and not one of `--allowed-origin`.
    ForbiddenOrigin,
    /// 403: a write by a token given `write = false` in the auth file.
    ReadOnlyToken,
    /// 404: no such conversation (for this tenant), or no such route.
    NotFound,
    /// 405: a route that does not take the request's method.
    MethodNotAllowed,
    /// 408: the request's body did not arrive within the body timeout.
    BodyTimeout,
    /// 409: too many concurrent writers to the conversation; retrying may succeed.
    Contention,
    /// 409: a change to a user's facts that their other facts leave no room for (a key another
    /// fact has, a pin past the bounds, a fact that would leave at once); nothing was written.
    FactRefused,
    /// 413: over one of the server's limits (body, messages per request, text per message, id).
    TooLarge,
    /// 414: a request URI over the URI limit (or over 64 KiB, refused by the HTTP parser).
    UriTooLong,
    /// 415: a `POST` body not declared JSON.
    UnsupportedMediaType,
    /// 431: request headers over the header limit (or a head the HTTP parser cannot hold).
    HeaderTooLarge,
    /// 500: a failure of the server's own that no other code describes.
    Internal,
    /// 500: the store failed (its cause is logged, never answered).
    StoreError,
    /// 502: the upstream model failed (a 5xx or another status, named in the message, never
    /// its text), or its 2xx answer could not be read.
    UpstreamError,
    /// 502: the upstream refused chatmem's own credentials (its 401 or 403).
    UpstreamAuth,
    /// 502: the upstream could not be reached, or the connection to it broke.
    UpstreamUnavailable,
    /// The upstream's own status (400, 404, 409, 413, 422, 429): it refused the client's
    /// request with a body that is not OpenAI's error object, passed on as this code with its
    /// text (the key masked).
    UpstreamRefused,
    /// 503: the server has no upstream model, or its upstream settings cannot work.
    NoUpstream,
    /// 503: the store is down, or did not answer within the store timeout.
    StoreUnavailable,
    /// 504: the upstream did not answer within the upstream timeout.
    UpstreamTimeout,
}

impl ErrorCode {
    /// Every code, in the order SERVER.md lists them.
    pub const ALL: [Self; 24] = [
        Self::InvalidRequest,
        Self::BadRequest,
        Self::Unauthorized,
        Self::ForbiddenHost,
        Self::ForbiddenOrigin,
        Self::ReadOnlyToken,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::BodyTimeout,
        Self::Contention,
        Self::FactRefused,
        Self::TooLarge,
        Self::UriTooLong,
        Self::UnsupportedMediaType,
        Self::HeaderTooLarge,
        Self::Internal,
        Self::StoreError,
        Self::UpstreamError,
        Self::UpstreamAuth,
        Self::UpstreamUnavailable,
        Self::UpstreamRefused,
        Self::NoUpstream,
        Self::StoreUnavailable,
        Self::UpstreamTimeout,
    ];

    /// The code as it is written on the wire.
    ///
    /// ```
    /// use chatmem_server::ErrorCode;
    /// assert_eq!(ErrorCode::InvalidRequest.as_str(), "invalid_request");
    /// assert!(ErrorCode::ALL.contains(&ErrorCode::UpstreamTimeout));
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::BadRequest => "bad_request",
            Self::Unauthorized => "unauthorized",
            Self::ForbiddenHost => "forbidden_host",
            Self::ForbiddenOrigin => "forbidden_origin",
            Self::ReadOnlyToken => "read_only_token",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::BodyTimeout => "body_timeout",
            Self::Contention => "contention",
            Self::FactRefused => "fact_refused",
            Self::TooLarge => "too_large",
            Self::UriTooLong => "uri_too_long",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::HeaderTooLarge => "header_too_large",
            Self::Internal => "internal",
            Self::StoreError => "store_error",
            Self::UpstreamError => "upstream_error",
            Self::UpstreamAuth => "upstream_auth",
            Self::UpstreamUnavailable => "upstream_unavailable",
            Self::UpstreamRefused => "upstream_refused",
            Self::NoUpstream => "no_upstream",
            Self::StoreUnavailable => "store_unavailable",
            Self::UpstreamTimeout => "upstream_timeout",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use utoipa::PartialSchema;

    use super::*;

    /// SERVER.md's table of error codes lists exactly the enum's codes, in its order.
    #[test]
    fn the_documented_codes_are_the_enums() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../SERVER.md");
        let text = std::fs::read_to_string(path).expect("SERVER.md reads");
        let section = text
            .split_once("\n## Error codes\n")
            .map(|(_, rest)| rest.split("\n#").next().unwrap_or_default())
            .expect("SERVER.md has an `## Error codes` section");
        let documented: Vec<&str> = section
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split_once('`').map(|(code, _)| code))
            .collect();
        let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(documented, codes);
    }

    /// Every code is written as itself, once; the OpenAPI schema's enum is the same list.
    #[test]
    fn each_code_has_one_wire_string_and_the_schema_lists_them() {
        let written: HashSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(written.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).expect("a code serializes"), code.as_str());
        }
        let schema = serde_json::to_value(ErrorCode::schema()).expect("the schema serializes");
        let listed: Vec<&str> = schema["enum"]
            .as_array()
            .expect("an enum of strings")
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(listed, codes);
    }
}
