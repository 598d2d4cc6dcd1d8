//! The inspector's sign-ins: a session is a random id the browser keeps in a cookie, and the
//! tenant it stands for, kept in this process. The cookie never holds the token; signing out
//! ends the session here (an old cookie opens nothing), and each session ends on its own after
//! [`SESSION_LIFETIME`]. Sessions are per process: a restart, or another instance behind the
//! same address, asks to sign in again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::auth::Tenant;
use crate::error::{ApiError, ErrorCode};

/// How long a session lasts.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The most sessions kept: past it, expired ones go first, then the oldest.
const MAX_SESSIONS: usize = 10_000;

/// The live sessions, by id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    live: Mutex<HashMap<String, Session>>,
}

#[derive(Debug, Clone)]
struct Session {
    tenant: Tenant,
    expires: Instant,
}

impl Sessions {
    /// A new session for `tenant`, from `now`: its id (32 bytes from the operating system's
    /// random source, as hex).
    ///
    /// # Errors
    /// A 500 when the random source fails: no session is made from weaker randomness.
    pub(crate) fn start(&self, tenant: Tenant, now: Instant) -> Result<String, ApiError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|_| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal,
                "no random session id could be made",
            )
        })?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut live = self.lock();
        if live.len() >= MAX_SESSIONS {
            live.retain(|_, s| s.expires > now);
        }
        if live.len() >= MAX_SESSIONS
            && let Some(oldest) = live.iter().min_by_key(|(_, s)| s.expires).map(|(id, _)| id.clone())
        {
            live.remove(&oldest);
        }
        live.insert(
            id.clone(),
            Session {
                tenant,
                expires: now + SESSION_LIFETIME,
            },
        );
        Ok(id)
    }

    /// The tenant of session `id` at `now`, if it is live (an expired one is forgotten).
    pub(crate) fn tenant(&self, id: &str, now: Instant) -> Option<Tenant> {
        let mut live = self.lock();
        match live.get(id) {
            Some(s) if s.expires > now => Some(s.tenant.clone()),
            Some(_) => {
                live.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends session `id` (signing out).
    pub(crate) fn end(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while the map was held cannot leave it half-changed: each change is one call.
        self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_random_lives_its_lifetime_and_ends_when_asked() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let a = sessions.start(Tenant::open(), now).expect("a session");
        let b = sessions.start(Tenant::open(), now).expect("another");
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(
            sessions
                .tenant(&a, now + SESSION_LIFETIME - Duration::from_secs(1))
                .is_some()
        );
        assert!(sessions.tenant(&a, now + SESSION_LIFETIME).is_none(), "expired");
        assert!(sessions.tenant(&a, now).is_none(), "an expired session is forgotten");
        sessions.end(&b);
        assert!(sessions.tenant(&b, now).is_none(), "ended");
        assert!(sessions.tenant("not-a-session", now).is_none());
    }

    #[test]
    fn the_oldest_session_goes_when_the_table_is_full() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let first = sessions.start(Tenant::open(), start).expect("first");
        for i in 1..MAX_SESSIONS {
            sessions
                .start(Tenant::open(), start + Duration::from_millis(i as u64))
                .expect("a session");
        }
        let later = start + Duration::from_secs(1);
        assert!(sessions.tenant(&first, later).is_some());
        let newest = sessions.start(Tenant::open(), later).expect("one more");
        assert!(sessions.tenant(&first, later).is_none(), "the oldest went");
        assert!(sessions.tenant(&newest, later).is_some());
        assert_eq!(sessions.lock().len(), MAX_SESSIONS);
    }
}
