//! What every handler shares: [`AppState`] (the memory, the configuration, the upstream) and
//! the request's [`RequestId`]. A leaf: the router (`app.rs`) builds them, handlers import them.

use std::sync::Arc;

use chatmem::{ChatMemory, Store};

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::ui::Sessions;
use crate::upstream::UpstreamPool;

/// What the handlers share: the memory (store and policy) and the configuration.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) memory: Arc<ChatMemory<Arc<dyn Store>>>,
    pub(crate) config: Arc<ServerConfig>,
    /// The upstream's connection pool, built once, or the 503 its routes answer.
    pub(crate) upstream: Result<Arc<UpstreamPool>, ApiError>,
    /// The inspector's signed-in browsers.
    pub(crate) sessions: Arc<Sessions>,
}

/// The id of one request, in its extensions, its log span and its response.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) String);
