//! `chatmem serve`'s log lines: one JSON line per request with
//! `--log-format json`, naming its method, route template, status and the request id its error
//! body gives; never a conversation id or a message's text.

use serde_json::{Value, json};

use crate::support::Serve;

/// The log line of the answer to request `id` (the one with a `status`).
fn answer_line<'a>(lines: &'a [Value], id: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["span"]["request_id"] == id && l["status"].is_u64())
        .unwrap_or_else(|| panic!("no log line answers request {id}: {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_logs_each_request_as_json_without_ids_or_text() {
    const CONVERSATION: &str = "conv-7f3a9c-private";
    const UNKNOWN: &str = "conv-unknown-b81d2e";
    const TEXT: &str = "my card number is 4111-1111-1111-1111";
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("logs.db").display());
    let server = Serve::start(&["--store", &store, "--log-format", "json"], |command| {
        command.env("RUST_LOG", "info");
    })
    .await;
    let base = &server.base;
    let http = reqwest::Client::new();

    let r = http
        .get(format!("{base}/v1/conversations/{UNKNOWN}/messages"))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.expect("json");
    let failed_id = body["error"]["request_id"].as_str().expect("a request id").to_owned();

    let r = http
        .post(format!("{base}/v1/conversations/{CONVERSATION}/messages"))
        .json(&json!({"messages": [{"role": "user", "content": TEXT}]}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 200);
    let posted_id = r
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("an x-request-id")
        .to_owned();

    let out = server.stop();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);

    let lines: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {l}")))
        .collect();
    let failed = answer_line(&lines, &failed_id);
    assert_eq!(failed["level"], "INFO", "{failed}");
    assert_eq!(failed["status"], 404, "{failed}");
    assert_eq!(failed["span"]["method"], "GET", "{failed}");
    assert_eq!(failed["span"]["route"], "/v1/conversations/{id}/messages", "{failed}");
    assert!(failed["latency_ms"].is_number(), "{failed}");
    let posted = answer_line(&lines, &posted_id);
    assert_eq!(posted["status"], 200, "{posted}");
    assert_eq!(posted["span"]["method"], "POST", "{posted}");
    assert_eq!(posted["span"]["route"], "/v1/conversations/{id}/messages", "{posted}");

    for private in [CONVERSATION, UNKNOWN, TEXT, "4111"] {
        assert!(!stderr.contains(private), "the logs hold {private:?}:\n{stderr}");
    }
}
