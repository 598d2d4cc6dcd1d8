//! Settings and connection strings: timeouts from the builder and from the URL, settings
//! refused rather than clamped, and passwords never printed.

use crate::common;

use std::time::{Duration, Instant};

use chatmem::store::{StoreError, StoreErrorKind, StoredMessage};
use chatmem::{Message, Retention, Store};
use chatmem_postgres::{MAX_STATEMENT_TIMEOUT, PostgresStore};

/// Nothing listens on port 1: connecting is refused at once.
const NOWHERE: &str = "postgres://postgres@127.0.0.1:1/test";

/// An error and all its sources, as a log line would print them.
fn chain(e: &StoreError) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(" <- ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_never_print_passwords() {
    for url in [
        "postgres://postgres@127.0.0.1:1/test?password=secret",
        "postgres://u:pa/ssecret@127.0.0.1:1/test",
        "postgres://u:pa#secret@127.0.0.1:1/test",
        "host=127.0.0.1 port=1 password=secret",
        // Refused before connecting: an '@' the driver would take into the host name, a
        // port that does not parse, a bad chatmem parameter, a key=value string that does
        // not parse.
        "postgres://u:pa@secret@127.0.0.1:1/test",
        "postgres://u:secret@127.0.0.1:notaport/test",
        "postgres://u:secret@127.0.0.1:1/test?chatmem_timeout_ms=soon",
        "host=127.0.0.1 port=1 password=secret and more",
    ] {
        let builder = PostgresStore::builder(url).timeout(Duration::from_secs(2));
        let debug = format!("{builder:?}");
        assert!(!debug.contains("secret"), "{url}: the builder printed {debug}");
        let err = builder.connect().await.expect_err("nothing listens on port 1");
        assert!(
            matches!(err.kind(), StoreErrorKind::Unavailable | StoreErrorKind::InvalidInput),
            "{url}: {err}"
        );
        let shown = format!("{} {err:?}", chain(&err));
        assert!(!shown.contains("secret"), "{url}: the error printed {shown}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_out_of_range_are_refused_by_name() {
    let refused = [
        (PostgresStore::builder(NOWHERE).pool_size(0), "pool_size"),
        (
            PostgresStore::builder(NOWHERE).connect_timeout(Duration::ZERO),
            "connect_timeout",
        ),
        (PostgresStore::builder(NOWHERE).timeout(Duration::ZERO), "timeout"),
        (
            PostgresStore::builder(NOWHERE).statement_timeout(Duration::from_micros(500)),
            "statement_timeout",
        ),
        (
            PostgresStore::builder(NOWHERE).statement_timeout(MAX_STATEMENT_TIMEOUT + Duration::from_millis(1)),
            "statement_timeout",
        ),
        (
            PostgresStore::builder(&format!("{NOWHERE}?chatmem_statement_timeout_ms=0")),
            "chatmem_statement_timeout_ms",
        ),
        (
            PostgresStore::builder(&format!("{NOWHERE}?chatmem_connect_timeout_ms=0")),
            "chatmem_connect_timeout_ms",
        ),
        (
            PostgresStore::builder(&format!("{NOWHERE}?sslmode=disable&chatmem_timeout_ms=0")),
            "chatmem_timeout_ms",
        ),
        (
            PostgresStore::builder(&format!("{NOWHERE}?chatmem_statement_timeout=5")),
            "chatmem_statement_timeout",
        ),
    ];
    for (builder, named) in refused {
        let shown = format!("{builder:?}");
        let err = builder.connect().await.expect_err("refused");
        assert_eq!(err.kind(), StoreErrorKind::InvalidInput, "{shown}: {err}");
        assert!(err.to_string().contains(named), "{shown}: {err}");
    }
    // The limits themselves are accepted (and huge timeouts do not overflow a deadline):
    // these get as far as connecting.
    let accepted = [
        PostgresStore::builder(NOWHERE).statement_timeout(MAX_STATEMENT_TIMEOUT),
        PostgresStore::builder(NOWHERE).statement_timeout(Duration::from_millis(1)),
        PostgresStore::builder(NOWHERE).pool_timeout(Duration::ZERO),
        PostgresStore::builder(NOWHERE)
            .pool_timeout(Duration::MAX)
            .connect_timeout(Duration::MAX),
        PostgresStore::builder(&format!(
            "{NOWHERE}?chatmem_timeout_ms=2000&chatmem_pool_timeout_ms=0&connect_timeout=2"
        )),
    ];
    for builder in accepted {
        let shown = format!("{builder:?}");
        let err = builder.connect().await.expect_err("nothing listens on port 1");
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{shown}: {err}");
    }
}

/// Holds the row lock of conversation `id` in `schema` until the returned client commits:
/// a store's commit to it waits meanwhile.
async fn lock_row(url: &str, schema: &str, id: &chatmem::ConversationId) -> deadpool_postgres::tokio_postgres::Client {
    let raw = common::raw_client(url).await;
    raw.batch_execute("BEGIN").await.expect("begin");
    raw.query(
        &format!("SELECT 1 FROM \"{schema}\".chatmem_conversations WHERE id = $1 FOR UPDATE"),
        &[&id.as_str()],
    )
    .await
    .expect("lock the row");
    raw
}

fn turn(first: u64) -> Vec<StoredMessage> {
    vec![
        StoredMessage::new(first, 2, Message::user("q")),
        StoredMessage::new(first + 1, 2, Message::assistant("a")),
    ]
}

/// A commit that waits `held` for a row lock: it fails with a short statement timeout and
/// succeeds once the statement timeout is raised above the wait, both through the builder
/// and through the URL, while every other timeout stays short.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn a_raised_statement_timeout_is_applied() {
    let _timed = chatmem_test::sql_suite::timed().await;
    let url = common::pg_url();
    const SHORT: Duration = Duration::from_millis(500);
    const HELD: Duration = Duration::from_millis(1500);
    let schema = common::fresh_schema("stmt_timeout");
    let setup = common::store_in(&url, &schema).await;
    let id = chatmem_test::unique_id("stmt-timeout");
    setup
        .commit(&id, chatmem_test::commit(0, turn(1), 1, Retention::KeepHistory))
        .await
        .expect("commit");
    let builder = |url: &str| PostgresStore::builder(url).schema(&schema).timeout(SHORT);

    // Short: the waiting commit gives up after the statement timeout, and so does its one
    // resend (which waits for the same row), having written nothing.
    let short = builder(&url).connect().await.expect("connect");
    let raw = lock_row(&url, &schema, &id).await;
    let start = Instant::now();
    let err = short
        .commit(&id, chatmem_test::commit(1, turn(3), 1, Retention::KeepHistory))
        .await
        .expect_err("the row stays locked past the statement timeout");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(start.elapsed() < 4 * SHORT, "took {:?}", start.elapsed());
    raw.batch_execute("COMMIT").await.expect("unlock");
    assert_eq!(setup.load(&id).await.expect("load").version, 1);

    // Raised: the same commit waits for the lock and succeeds.
    let mut raised = vec![("builder", builder(&url).statement_timeout(Duration::from_secs(20)))];
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        let with_params = format!("{url}{sep}chatmem_timeout_ms=500&chatmem_statement_timeout_ms=20000");
        raised.push(("URL", PostgresStore::builder(&with_params).schema(&schema)));
        // A builder method overrides the URL parameter: this one stays short.
        let overridden = PostgresStore::builder(&with_params)
            .schema(&schema)
            .statement_timeout(SHORT)
            .connect()
            .await
            .expect("connect");
        let raw = lock_row(&url, &schema, &id).await;
        let err = overridden
            .commit(&id, chatmem_test::commit(1, turn(3), 1, Retention::KeepHistory))
            .await
            .expect_err("the builder's short statement timeout wins");
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
        raw.batch_execute("COMMIT").await.expect("unlock");
    }
    for (version, (how, builder)) in (1..).zip(raised) {
        let store = builder.connect().await.expect("connect");
        let raw = lock_row(&url, &schema, &id).await;
        let (first, id) = (1 + 2 * version, id.clone());
        let waiting = tokio::spawn(async move {
            let start = Instant::now();
            let commit = chatmem_test::commit(version, turn(first), 1, Retention::KeepHistory);
            let done = store.commit(&id, commit).await;
            (done, start.elapsed())
        });
        tokio::time::sleep(HELD).await;
        raw.batch_execute("COMMIT").await.expect("unlock");
        let (done, took) = waiting.await.expect("join");
        assert_eq!(done.map_err(|e| chain(&e)), Ok(version + 1), "raised through the {how}");
        assert!(took >= HELD, "{how}: the commit did wait for the lock ({took:?})");
    }
    common::drop_schema(&url, &schema).await;
}
