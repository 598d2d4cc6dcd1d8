//! The timeouts of a networked store: chatmem's `chatmem_*_timeout_ms` URL parameters, the
//! builder settings of the same name, and the one rule that combines and checks them. The
//! PostgreSQL and MySQL stores read their URLs and settings through this, so both spell,
//! order and refuse them alike.

use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind};

/// URL parameter for every timeout at once, in milliseconds.
pub const TIMEOUT_PARAM: &str = "chatmem_timeout_ms";
/// URL parameter for the connect timeout, in milliseconds.
pub const CONNECT_TIMEOUT_PARAM: &str = "chatmem_connect_timeout_ms";
/// URL parameter for the pool timeout, in milliseconds.
pub const POOL_TIMEOUT_PARAM: &str = "chatmem_pool_timeout_ms";
/// URL parameter for the statement timeout, in milliseconds.
pub const STATEMENT_TIMEOUT_PARAM: &str = "chatmem_statement_timeout_ms";

/// Every `chatmem_*` URL parameter a store reads, as named in errors.
pub const TIMEOUT_PARAMS: [&str; 4] = [
    TIMEOUT_PARAM,
    CONNECT_TIMEOUT_PARAM,
    POOL_TIMEOUT_PARAM,
    STATEMENT_TIMEOUT_PARAM,
];

/// Timeouts as set, each `None` when not given: a builder's settings, or what a URL's
/// `chatmem_*` parameters say.
///
/// ```
/// use std::time::Duration;
/// use chatmem_sql::TimeoutSettings;
/// let url = "mysql://u@h/db?chatmem_timeout_ms=250&ssl=false";
/// let (rest, from_url) = TimeoutSettings::split_url(url, url.find('?'), "chatmem-mysql")?;
/// assert_eq!(rest, "mysql://u@h/db?ssl=false");
/// let builder = TimeoutSettings { statement: Some(Duration::from_secs(9)), ..Default::default() };
/// let t = builder.resolve(&from_url, Duration::from_secs(5), None)?;
/// assert_eq!((t.connect, t.statement), (Duration::from_millis(250), Duration::from_secs(9)));
/// # Ok::<(), chatmem::store::StoreError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeoutSettings {
    /// Every timeout at once, below the specific ones.
    pub timeout: Option<Duration>,
    /// Opening one connection.
    pub connect: Option<Duration>,
    /// Waiting for a free pooled connection.
    pub pool: Option<Duration>,
    /// One statement.
    pub statement: Option<Duration>,
}

/// The setters every SQL store's builder shares (a struct with fields `timeouts:
/// TimeoutSettings`, `pool_size: usize` and `migrate: bool`): `timeout`, `connect_timeout`,
/// `pool_timeout`, `statement_timeout`, `pool_size` and `migrate`. Their docs point to the
/// invoking crate's `#settings` section (its table of settings, URL parameters and defaults,
/// and what its server does with each) and name its `DEFAULT_TIMEOUT`, `DEFAULT_POOL_SIZE`
/// and `SCHEMA_VERSION`, which that crate defines.
///
/// ```
/// use std::time::Duration;
/// use chatmem_sql::TimeoutSettings;
///
/// #[derive(Default)]
/// pub struct Builder { timeouts: TimeoutSettings, pool_size: usize, migrate: bool }
/// impl Builder {
///     chatmem_sql::sql_builder_setters!();
/// }
/// let b = Builder::default().timeout(Duration::from_secs(1)).statement_timeout(Duration::from_secs(2)).pool_size(3);
/// assert_eq!((b.timeouts.timeout, b.timeouts.statement), (Some(Duration::from_secs(1)), Some(Duration::from_secs(2))));
/// assert_eq!((b.pool_size, b.migrate), (3, false));
/// ```
#[macro_export]
macro_rules! sql_builder_setters {
    () => {
        /// Sets the connect, pool and statement timeouts at once (each default
        /// [`DEFAULT_TIMEOUT`](crate::DEFAULT_TIMEOUT)); one of those also called on the
        /// builder wins. URL parameter: `chatmem_timeout_ms`; see [the settings](crate#settings).
        pub fn timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.timeouts.timeout = ::std::option::Option::Some(timeout);
            self
        }

        /// The most opening one connection may take, handshake included (default
        /// [`DEFAULT_TIMEOUT`](crate::DEFAULT_TIMEOUT)); must be longer than zero. URL
        /// parameter: `chatmem_connect_timeout_ms`; see [the settings](crate#settings).
        pub fn connect_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.timeouts.connect = ::std::option::Option::Some(timeout);
            self
        }

        /// The most an operation waits for a pooled connection when all
        /// [`pool_size`](Self::pool_size) are busy (default
        /// [`DEFAULT_TIMEOUT`](crate::DEFAULT_TIMEOUT)); zero means fail at once rather than
        /// wait. Past it the operation fails with
        /// [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable). URL
        /// parameter: `chatmem_pool_timeout_ms`; see [the settings](crate#settings).
        pub fn pool_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.timeouts.pool = ::std::option::Option::Some(timeout);
            self
        }

        /// The most one statement may take (default
        /// [`DEFAULT_TIMEOUT`](crate::DEFAULT_TIMEOUT)), at least 1 ms: how long the client
        /// waits for its answer, and a limit the server applies too ([the
        /// settings](crate#settings) say how). URL parameter: `chatmem_statement_timeout_ms`.
        pub fn statement_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.timeouts.statement = ::std::option::Option::Some(timeout);
            self
        }

        /// How many connections the pool may open (default
        /// [`DEFAULT_POOL_SIZE`](crate::DEFAULT_POOL_SIZE)); zero is refused by
        /// [`connect`](Self::connect).
        pub fn pool_size(mut self, size: usize) -> Self {
            self.pool_size = size;
            self
        }

        /// Whether [`connect`](Self::connect) creates or upgrades chatmem's tables (default:
        /// true). With false it writes nothing: it only checks that they are at
        /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION), so that a program that only reads (the
        /// CLI's `get`, `history`, `list`, `export`) never creates tables in a database it was
        /// pointed at by mistake. Missing or older tables are then
        /// [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput)
        /// naming them and the server.
        pub fn migrate(mut self, migrate: bool) -> Self {
            self.migrate = migrate;
            self
        }
    };
}

/// The timeouts a store runs with, once builder, URL and default are combined and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening one connection; longer than zero.
    pub connect: Duration,
    /// Waiting for a free pooled connection; zero fails at once.
    pub pool: Duration,
    /// One statement; at least 1 ms.
    pub statement: Duration,
}

impl TimeoutSettings {
    /// Splits `url` into the URL its driver parses and chatmem's own parameters, which the
    /// drivers would refuse as unknown. `query` is the byte index of the `?` that starts the
    /// query, found where the store's driver finds it (drivers differ in which `@` ends the
    /// credentials, and a password may hold a `?`); `None` or an index that is not a `?`
    /// returns the URL as it is. `store` names the crate in errors.
    ///
    /// ```
    /// use chatmem::store::StoreErrorKind;
    /// use chatmem_sql::TimeoutSettings;
    /// let url = "postgres://h/db?chatmem_timeout_ms=5s";
    /// let err = TimeoutSettings::split_url(url, url.find('?'), "chatmem-postgres").unwrap_err();
    /// assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
    /// assert!(err.to_string().contains("chatmem_timeout_ms"));
    /// ```
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] naming the parameter: an unknown `chatmem_*`, one
    /// given twice, or one that is not a whole number of milliseconds.
    pub fn split_url(url: &str, query: Option<usize>, store: &str) -> Result<(String, Self), StoreError> {
        let (rest, values) = chatmem::store::split_ms_params(url, query, &TIMEOUT_PARAMS, store)?;
        let found = match values[..] {
            [timeout, connect, pool, statement] => Self {
                timeout,
                connect,
                pool,
                statement,
            },
            _ => Self::default(),
        };
        Ok((rest, found))
    }

    /// Combines these builder settings with the URL's: each timeout from the first of its
    /// builder setting, the builder's `timeout`, its URL parameter, the URL's
    /// `chatmem_timeout_ms`, `default`; then checks them. `statement_limit` is the
    /// database's longest statement timeout and the database's name, if it has one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use chatmem_sql::TimeoutSettings;
    /// let zero = TimeoutSettings { connect: Some(Duration::ZERO), ..Default::default() };
    /// let err = zero.resolve(&TimeoutSettings::default(), Duration::from_secs(5), None).unwrap_err();
    /// assert!(err.to_string().ends_with("connect_timeout must be longer than zero"));
    /// ```
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] naming the setting or URL parameter the bad value came
    /// from: a zero connect timeout, a statement timeout under 1 ms or over the limit.
    pub fn resolve(
        &self,
        from_url: &TimeoutSettings,
        default: Duration,
        statement_limit: Option<(Duration, &str)>,
    ) -> Result<Timeouts, StoreError> {
        let pick = |builder: Option<Duration>, name: &'static str, url: Option<Duration>, url_name: &'static str| {
            builder
                .map(|t| (t, name))
                .or(self.timeout.map(|t| (t, "timeout")))
                .or(url.map(|t| (t, url_name)))
                .or(from_url.timeout.map(|t| (t, TIMEOUT_PARAM)))
                .unwrap_or((default, name))
        };
        let (connect, connect_name) = pick(self.connect, "connect_timeout", from_url.connect, CONNECT_TIMEOUT_PARAM);
        let (pool, _) = pick(self.pool, "pool_timeout", from_url.pool, POOL_TIMEOUT_PARAM);
        let (statement, statement_name) = pick(
            self.statement,
            "statement_timeout",
            from_url.statement,
            STATEMENT_TIMEOUT_PARAM,
        );
        let invalid = |why: String| StoreError::new(StoreErrorKind::InvalidInput, why);
        if connect.is_zero() {
            return Err(invalid(format!("{connect_name} must be longer than zero")));
        }
        match statement_limit {
            Some((max, database)) if statement < Duration::from_millis(1) || statement > max => {
                return Err(invalid(format!(
                    "{statement_name} must be from 1 ms to {} ms ({database}'s limit), not {statement:?}",
                    max.as_millis()
                )));
            }
            None if statement < Duration::from_millis(1) => {
                return Err(invalid(format!("{statement_name} must be at least 1 ms")));
            }
            _ => {}
        }
        Ok(Timeouts {
            connect,
            pool,
            statement,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    fn split(url: &str) -> Result<(String, TimeoutSettings), StoreError> {
        TimeoutSettings::split_url(url, url.find('?'), "chatmem-test")
    }

    #[test]
    fn chatmem_parameters_are_taken_out() {
        let (rest, found) =
            split("db://h/db?sslmode=disable&chatmem_statement_timeout_ms=30000&chatmem_timeout_ms=250").unwrap();
        assert_eq!(rest, "db://h/db?sslmode=disable");
        assert_eq!(
            found,
            TimeoutSettings {
                timeout: ms(250),
                statement: ms(30_000),
                ..TimeoutSettings::default()
            }
        );
        let (rest, found) = split("db://h/db?chatmem_connect_timeout_ms=1&chatmem_pool_timeout_ms=0").unwrap();
        assert_eq!(rest, "db://h/db");
        assert_eq!((found.connect, found.pool), (ms(1), ms(0)));
        for unchanged in ["db://h/db", "db://h/db?application_name=x"] {
            assert_eq!(
                split(unchanged).unwrap(),
                (unchanged.to_owned(), TimeoutSettings::default())
            );
        }
        // No query, or an index that is not at a '?': nothing to take out.
        let url = "db://h/db?chatmem_timeout_ms=x";
        assert_eq!(TimeoutSettings::split_url(url, None, "s").unwrap().0, url);
        assert_eq!(TimeoutSettings::split_url(url, Some(999), "s").unwrap().0, url);
        assert_eq!(TimeoutSettings::split_url(url, Some(2), "s").unwrap().0, url);
    }

    #[test]
    fn bad_chatmem_parameters_are_named() {
        for (url, named) in [
            (
                "db://h/db?chatmem_statement_timeout_ms=30s",
                "chatmem_statement_timeout_ms",
            ),
            ("db://h/db?chatmem_timeout_ms=-1", "chatmem_timeout_ms"),
            ("db://h/db?chatmem_pool_timeout_ms", "chatmem_pool_timeout_ms"),
            (
                "db://h/db?chatmem_statment_timeout_ms=5",
                "chatmem-test reads chatmem_timeout_ms",
            ),
            ("db://h/db?chatmem_timeout_ms=5&chatmem_timeout_ms=6", "given twice"),
        ] {
            let err = split(url).unwrap_err();
            assert_eq!(err.kind(), StoreErrorKind::InvalidInput, "{url}");
            assert!(err.to_string().contains(named), "{url}: {err}");
        }
    }

    #[test]
    fn builder_wins_over_url_and_specific_over_general() {
        let five = Duration::from_secs(5);
        let url = TimeoutSettings {
            timeout: ms(100),
            pool: ms(7),
            ..TimeoutSettings::default()
        };
        let builder = TimeoutSettings {
            statement: ms(3),
            ..TimeoutSettings::default()
        };
        let t = builder.resolve(&url, five, None).unwrap();
        assert_eq!(
            t,
            Timeouts {
                connect: Duration::from_millis(100),
                pool: Duration::from_millis(7),
                statement: Duration::from_millis(3),
            }
        );
        let all = TimeoutSettings {
            timeout: ms(9),
            ..builder
        };
        assert_eq!(all.resolve(&url, five, None).unwrap().pool, Duration::from_millis(9));
        let none = TimeoutSettings::default();
        let t = none.resolve(&TimeoutSettings::default(), five, None).unwrap();
        assert_eq!((t.connect, t.pool, t.statement), (five, five, five));
    }

    #[test]
    fn bad_timeouts_name_where_they_came_from() {
        let five = Duration::from_secs(5);
        let limit = Some((Duration::from_millis(1000), "TestDB"));
        let url_zero = TimeoutSettings {
            timeout: ms(0),
            ..TimeoutSettings::default()
        };
        let err = TimeoutSettings::default().resolve(&url_zero, five, None).unwrap_err();
        assert!(
            err.to_string()
                .ends_with(": chatmem_timeout_ms must be longer than zero"),
            "{err}"
        );
        let tiny = TimeoutSettings {
            connect: ms(1),
            statement: Some(Duration::from_micros(10)),
            ..TimeoutSettings::default()
        };
        let err = tiny.resolve(&TimeoutSettings::default(), five, None).unwrap_err();
        assert!(
            err.to_string().ends_with(": statement_timeout must be at least 1 ms"),
            "{err}"
        );
        let err = tiny.resolve(&TimeoutSettings::default(), five, limit).unwrap_err();
        assert!(
            err.to_string().contains("from 1 ms to 1000 ms (TestDB's limit)"),
            "{err}"
        );
        let url_long = TimeoutSettings {
            statement: ms(1001),
            ..TimeoutSettings::default()
        };
        let err = TimeoutSettings::default().resolve(&url_long, five, limit).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .contains(": chatmem_statement_timeout_ms must be from 1 ms"),
            "{err}"
        );
        assert!(TimeoutSettings::default().resolve(&url_long, five, None).is_ok());
    }
}
