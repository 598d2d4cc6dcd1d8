//! [`LoadConfig`]: how hard and how long to load the server.

use std::time::Duration;

use crate::error::LoadError;

/// How long to run, with how many connections, over how many conversations, and which share
/// of requests are window reads (the rest are turn commits).
///
/// ```
/// let c = chatmem_loadtest::LoadConfig::default();
/// assert_eq!((c.connections, c.conversations), (200, 1_000));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// How long the measured phase lasts (default 60 s).
    pub duration: Duration,
    /// Concurrent connections, each with one request in flight at a time (default 200).
    pub connections: usize,
    /// Conversations the requests are spread over, uniformly (default 1,000).
    pub conversations: usize,
    /// The share of requests that read a window, from 0 to 1 (default 0.5).
    pub read_share: f64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(60),
            connections: 200,
            conversations: 1_000,
            read_share: 0.5,
        }
    }
}

impl LoadConfig {
    /// Checks every setting; the error names the one out of range.
    ///
    /// # Errors
    /// [`LoadError::InvalidConfig`] for zero connections, conversations or duration, or a
    /// read share outside 0..=1.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |s: &str| Err(LoadError::InvalidConfig(s.into()));
        if self.duration.is_zero() {
            return bad("the duration must be longer than zero");
        }
        if self.connections == 0 {
            return bad("connections must be at least 1");
        }
        if self.conversations == 0 {
            return bad("conversations must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.read_share) {
            return bad("the read share must be from 0 to 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_settings_are_refused() {
        assert!(LoadConfig::default().validate().is_ok());
        for c in [
            LoadConfig {
                connections: 0,
                ..LoadConfig::default()
            },
            LoadConfig {
                conversations: 0,
                ..LoadConfig::default()
            },
            LoadConfig {
                duration: Duration::ZERO,
                ..LoadConfig::default()
            },
            LoadConfig {
                read_share: 1.5,
                ..LoadConfig::default()
            },
            LoadConfig {
                read_share: f64::NAN,
                ..LoadConfig::default()
            },
        ] {
            assert!(matches!(c.validate(), Err(LoadError::InvalidConfig(_))), "{c:?}");
        }
    }
}
