//! What `connect` refuses before trying, and how URLs are printed: never with a password,
//! in errors (the whole chain) or in `Debug`. Only the last test needs the test Redis.

use crate::common;

use std::time::Duration;

use chatmem::store::{StoreError, StoreErrorKind};
use chatmem_redis::RedisStore;

/// Every layer of `e`'s chain, outermost first.
fn chain(e: &StoreError) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push(c.to_string());
        cause = c.source();
    }
    out
}

/// `e`'s chain as printed in full, and its `Debug`.
fn everything_shown(e: &StoreError) -> String {
    format!("{} {e:?}", chain(e).join(": "))
}

/// No layer of the chain repeats the text of the layer below it.
fn assert_each_fact_once(e: &StoreError) {
    let layers = chain(e);
    for pair in layers.windows(2) {
        assert!(!pair[0].contains(&pair[1]), "repeated in the chain: {layers:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_errors_never_show_the_password() {
    // Nothing listens on port 1.
    for url in [
        "redis://secret@127.0.0.1:1",
        "redis://:pa#secret@127.0.0.1:1",
        "redis://127.0.0.1:1/0?password=secret",
    ] {
        let e = RedisStore::builder(url)
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(e.kind(), StoreErrorKind::Unavailable | StoreErrorKind::InvalidInput),
            "{url}: {e}"
        );
        let shown = everything_shown(&e);
        assert!(!shown.contains("secret"), "{url} leaked: {shown}");
        assert!(shown.contains("127.0.0.1:1"), "{url}: the URL is still named: {shown}");
        assert_each_fact_once(&e);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_printed_once() {
    let e = RedisStore::builder("redis://127.0.0.1:1")
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    let layers = chain(&e);
    let refused = layers.iter().filter(|l| l.to_lowercase().contains("refused")).count();
    assert_eq!(refused, 1, "{layers:?}");
    assert_each_fact_once(&e);
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_urls_are_refused_with_what_to_do_instead() {
    for url in [
        "rediss://user:secret@127.0.0.1:6380/0",
        "REDISS://127.0.0.1:6380",
        "valkeys://127.0.0.1:6380",
    ] {
        for e in [
            RedisStore::connect(url).await.unwrap_err(),
            RedisStore::builder(url).key_prefix("p").connect().await.unwrap_err(),
        ] {
            assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{url}: {e}");
            let text = e.to_string();
            assert!(text.contains("TLS"), "{text}");
            assert!(text.contains("not supported by chatmem-redis"), "{text}");
            assert!(text.contains("tunnel") && text.contains("private network"), "{text}");
            assert!(!everything_shown(&e).contains("secret"), "{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_timeouts_are_refused_naming_the_setting() {
    // Refused before connecting: nothing needs to listen.
    let url = "redis://127.0.0.1:1";
    let cases = [
        (RedisStore::builder(url).timeout(Duration::ZERO), "connect_timeout"),
        (
            RedisStore::builder(url).connect_timeout(Duration::ZERO),
            "connect_timeout",
        ),
        (
            RedisStore::builder(url).response_timeout(Duration::ZERO),
            "response_timeout",
        ),
    ];
    for (builder, setting) in cases {
        let e = builder.connect().await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains(setting), "{e}");
    }
    for bad in ["", "a{b", "a}"] {
        let e = RedisStore::builder(url).key_prefix(bad).connect().await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("key_prefix"), "{e}");
    }
}

/// chatmem's URL parameters are read and checked, and a parameter nobody reads is refused,
/// not ignored; all before any connection is tried.
#[tokio::test(flavor = "multi_thread")]
async fn url_parameters_are_read_or_refused_by_name() {
    for (url, named) in [
        (
            "redis://127.0.0.1:1/?chatmem_timeout_ms=abc",
            "chatmem_timeout_ms must be a whole number",
        ),
        (
            "redis://127.0.0.1:1/?chatmem_connect_timeout_ms=",
            "chatmem_connect_timeout_ms must be a whole number",
        ),
        (
            "redis://127.0.0.1:1/?chatmem_pool_timeout_ms=5",
            "unknown URL parameter chatmem_pool_timeout_ms",
        ),
        (
            "redis://127.0.0.1:1/?chatmem_timeout_ms=5&chatmem_timeout_ms=6",
            "chatmem_timeout_ms is given twice",
        ),
        ("redis://127.0.0.1:1/?bogus=1", "unknown URL parameter \"bogus\""),
        (
            "redis://127.0.0.1:1/?protocol=resp3&db=2",
            "unknown URL parameter \"db\"",
        ),
        (
            "redis://127.0.0.1:1/?chatmem_timeout_ms=0",
            "chatmem_timeout_ms must be longer than zero",
        ),
        (
            "redis://127.0.0.1:1/?chatmem_response_timeout_ms=0",
            "chatmem_response_timeout_ms must be longer than zero",
        ),
        (
            "redis+cluster://127.0.0.1:1,127.0.0.1:2?bogus=1",
            "unknown URL parameter \"bogus\"",
        ),
    ] {
        let e = RedisStore::builder(url).connect().await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{url}: {e}");
        assert!(e.to_string().contains(named), "{url}: {e}");
    }
}

/// The URL's timeouts bound connecting to a server that accepts and never answers; a
/// builder setting wins over the URL's.
#[tokio::test(flavor = "multi_thread")]
async fn url_timeouts_bound_connecting_and_the_builder_wins() {
    let server = chatmem_test::silent::listen().await;
    let silent = format!("redis://{}/", server.addr);
    for builder in [
        RedisStore::builder(&format!("{silent}?chatmem_connect_timeout_ms=300")),
        RedisStore::builder(&format!("{silent}?chatmem_timeout_ms=300&protocol=resp2")),
        RedisStore::builder(&format!("{silent}?chatmem_connect_timeout_ms=30000"))
            .connect_timeout(Duration::from_millis(300)),
        RedisStore::builder(&format!(
            "{silent}?chatmem_timeout_ms=30000&chatmem_connect_timeout_ms=300"
        )),
    ] {
        let start = std::time::Instant::now();
        let e = builder.connect().await.unwrap_err();
        let took = start.elapsed();
        assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
        assert!(
            took < Duration::from_secs(3),
            "took {took:?}, not the 300 ms asked for: {e}"
        );
    }
}

#[test]
fn builder_debug_hides_the_password() {
    for url in [
        "redis://user:secret@127.0.0.1:6379/0",
        "redis://secret@127.0.0.1:6379",
        "redis+cluster://user:secret@127.0.0.1:7000,127.0.0.1:7001",
        "redis+unix:///run/redis.sock?db=0&pass=secret",
    ] {
        let shown = format!("{:?}", RedisStore::builder(url));
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("127.0.0.1") || shown.contains("redis.sock"), "{shown}");
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn store_debug_hides_the_password() {
    let url = common::url();
    // A user name alone is sent as no credential at all, so the test server accepts it.
    let Some(rest) = url.strip_prefix("redis://").filter(|rest| !rest.contains('@')) else {
        panic!("the Debug test needs a redis:// URL without credentials");
    };
    let prefix = common::unique_prefix("debug");
    let store = common::store(&format!("redis://secret@{rest}"), &prefix).await;
    let shown = format!("{store:?}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("***@"), "{shown}");
    common::cleanup(&url, &prefix).await;
}
