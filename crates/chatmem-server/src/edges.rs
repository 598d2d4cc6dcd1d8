//! What a web page may not do to the server: the rules every request passes before a handler.
//!
//! A page in a browser can send requests to a server on the user's loopback: with DNS
//! rebinding (a name of the attacker's that resolves to `127.0.0.1`) it even reads the
//! answers, and a `POST` with `Content-Type: text/plain` needs no CORS preflight. So:
//!
//! - **Host** (only without auth: with auth a page has no token to send): a request's `Host`
//!   must be a loopback name (`localhost`, `127.0.0.1`, `[::1]`, any port) or one of
//!   [`ServerConfig::allowed_hosts`](crate::ServerConfig::allowed_hosts); otherwise 403
//!   `forbidden_host`. 403 rather than 421: a 421 invites clients to retry elsewhere, and
//!   nothing here is misrouted. A request without a `Host` (HTTP/1.0, or a test driving the
//!   router directly) is let through: a browser always sends one.
//! - **Origin** (always): a request whose `Origin` is neither its own (the `Origin`'s
//!   authority equals the `Host`) nor one of
//!   [`ServerConfig::allowed_origins`](crate::ServerConfig::allowed_origins) is refused with
//!   403 `forbidden_origin`, whatever its method; `Origin: null` (sandboxed frames, files) is
//!   cross-site. The listed origins get CORS (tower-http's [`CorsLayer`], built by [`cors`]).
//! - **Content type** (always): a `POST` body must be declared JSON (`application/json` or
//!   `application/*+json`, parameters such as `charset` allowed); otherwise, or without a
//!   `Content-Type`, 415 `unsupported_media_type`, before any handler reads it. That forces a
//!   page's write through a preflight, which an unlisted origin fails. It is checked once the
//!   route is known ([`require_json`]), so a method a route does not take is answered 405
//!   whatever its body.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::ServerConfig;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{CONVERSATION_HEADER, USER_HEADER};
use crate::state::RequestId;

/// The loopback names a server without auth answers to (ports aside).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The rules, from the configuration, in the form the middleware checks them.
#[derive(Debug, Clone)]
pub(crate) struct Edges {
    /// `None`: any `Host` (a server with auth). Otherwise lower-case names, with or without a
    /// port.
    hosts: Option<Vec<String>>,
    /// Lower-case origins (`scheme://host[:port]`).
    origins: Vec<String>,
}

impl Edges {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let hosts = config.auth.is_none().then(|| {
            LOOPBACK_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .chain(config.allowed_hosts.iter().map(|h| normalize_host(h)))
                .collect()
        });
        let origins = config.allowed_origins.iter().map(|o| normalize_origin(o)).collect();
        Self { hosts, origins }
    }

    /// The refusal of this request, if it breaks a rule.
    fn check(&self, request: &Request) -> Result<(), ApiError> {
        let headers = request.headers();
        let host = headers
            .get(header::HOST)
            .map(|v| v.to_str().unwrap_or_default())
            .or_else(|| request.uri().authority().map(|a| a.as_str()))
            .map(normalize_host);
        if let (Some(allowed), Some(host)) = (&self.hosts, &host)
            && !allowed.iter().any(|a| host_matches(a, host))
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::ForbiddenHost,
                "this server answers only to a loopback Host (localhost, 127.0.0.1, [::1]) or one given with --allowed-host",
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = normalize_origin(origin.to_str().unwrap_or_default());
            let own = host.as_deref().is_some_and(|h| authority_of(&origin) == Some(h));
            if !own && !self.origins.contains(&origin) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::ForbiddenOrigin,
                    "requests from another site's page are refused; list its origin with --allowed-origin to allow it",
                ));
            }
        }
        Ok(())
    }
}

/// The middleware of the Host and Origin rules: refuses a request that breaks one, in the one
/// error shape.
pub(crate) async fn guard(State(edges): State<Arc<Edges>>, request: Request, next: Next) -> Response {
    match edges.check(&request) {
        Ok(()) => next.run(request).await,
        Err(e) => refuse(&request, e),
    }
}

/// The middleware of the content-type rule, layered on the routes' handlers (`app.rs`), so it
/// runs only for a request a handler is about to take: a method the route does not serve is
/// answered 405 first (by the method-not-allowed fallback, no handler), a `POST` a handler
/// serves without a JSON `Content-Type` 415 (a `PATCH` too), before its handler.
pub(crate) async fn require_json(request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::POST | Method::PATCH)
        && !is_json(request.headers().get(header::CONTENT_TYPE))
    {
        let e = ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::UnsupportedMediaType,
            "a POST or PATCH body must be JSON: send Content-Type: application/json",
        );
        return refuse(&request, e);
    }
    next.run(request).await
}

/// `e` as the answer to `request`, naming its id.
fn refuse(request: &Request, e: ApiError) -> Response {
    tracing::debug!(
        status = e.status().as_u16(),
        code = e.code().as_str(),
        "refused at the edge"
    );
    match request.extensions().get::<RequestId>() {
        Some(id) => e.with_request_id(&id.0).into_response(),
        None => e.into_response(),
    }
}

/// CORS for the listed origins: their preflights are answered with the methods and headers
/// the API takes, their answers carry `Access-Control-Allow-Origin` (and `Vary: Origin`).
/// `None` when no origin is listed (no page may call the server).
pub(crate) fn cors(config: &ServerConfig) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> = config
        .allowed_origins
        .iter()
        .filter_map(|o| match HeaderValue::from_str(&normalize_origin(o)) {
            Ok(v) => Some(v),
            Err(_) => {
                tracing::warn!(origin = %o, "an allowed origin that is not a header value is ignored");
                None
            }
        })
        .collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static(CONVERSATION_HEADER),
                HeaderName::from_static(USER_HEADER),
            ])
            .expose_headers([HeaderName::from_static("x-request-id")])
            .max_age(Duration::from_secs(600)),
    )
}

/// Lower case, without a trailing dot on the name (`LocalHost.:8080` is `localhost:8080`).
fn normalize_host(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let (name, port) = split_port(&host);
    match port {
        Some(port) => format!("{}:{port}", name.trim_end_matches('.')),
        None => name.trim_end_matches('.').to_owned(),
    }
}

/// Lower case, without a trailing `/` (origins compare as strings).
fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// `name` and `port` of `host` (`[::1]:8080` is `[::1]` and `8080`).
fn split_port(host: &str) -> (&str, Option<&str>) {
    let colon = if host.starts_with('[') {
        host.find(']')
            .map(|end| end + 1)
            .filter(|&i| host[i..].starts_with(':'))
    } else {
        host.rfind(':')
    };
    match colon {
        Some(i) => (&host[..i], Some(&host[i + 1..])),
        None => (host, None),
    }
}

/// Whether `host` (normalized) is `allowed`: the same name and port, or the same name when
/// `allowed` gives no port.
fn host_matches(allowed: &str, host: &str) -> bool {
    allowed == host || (split_port(allowed).1.is_none() && split_port(host).0 == allowed)
}

/// The `host[:port]` of an origin (`http://localhost:8080` is `localhost:8080`).
fn authority_of(origin: &str) -> Option<&str> {
    origin.split_once("://").map(|(_, authority)| authority)
}

/// Whether a `Content-Type` declares JSON: `application/json` or `application/*+json`, with
/// any parameters.
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", "json")) => true,
        Some(("application", sub)) => sub.len() > "+json".len() && sub.ends_with("+json"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_match_with_or_without_a_port() {
        let config = ServerConfig {
            allowed_hosts: vec!["Chat.Example".into(), "api.example:9000".into()],
            ..ServerConfig::default()
        };
        let edges = Edges::new(&config);
        let allowed = edges.hosts.as_deref().unwrap_or_default();
        let ok = |h: &str| allowed.iter().any(|a| host_matches(a, &normalize_host(h)));
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.:8080",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:8080",
            "chat.example:443",
            "api.example:9000",
        ] {
            assert!(ok(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.2",
            "[::2]:8080",
            "api.example:9001",
            "api.example",
            "",
        ] {
            assert!(!ok(host), "{host}");
        }
    }

    #[test]
    fn json_content_types_are_recognized() {
        let json = |v: &'static str| is_json(Some(&HeaderValue::from_static(v)));
        assert!(json("application/json"));
        assert!(json("Application/JSON; charset=utf-8"));
        assert!(json("application/merge-patch+json"));
        assert!(!json("application/+json"));
        assert!(!json("text/plain"));
        assert!(!json("text/plain; charset=application/json"));
        assert!(!json("application/x-www-form-urlencoded"));
        assert!(!json("multipart/form-data; boundary=x"));
        assert!(!is_json(None));
    }
}
