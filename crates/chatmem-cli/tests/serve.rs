//! `chatmem serve` as a process: the README's curl session through reqwest, the metrics
//! listener, the loopback rule, and a clean exit on SIGTERM.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_the_memory_api_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("serve.db").display());
    let port = free_port();
    let metrics_port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-listen",
            &format!("127.0.0.1:{metrics_port}"),
            "--store",
            &store,
            "--max-messages",
            "6",
        ])
        .env_remove("CHATMEM_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chatmem serve");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let started = Instant::now();
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("{base}/v1/conversations/app-user-42-aftersale/messages");
    let r = http
        .post(&url)
        .json(&json!({"messages": [
            {"role": "system", "content": "你是邻里仓售后。"},
            {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
            {"role": "assistant", "content": "收到。"}
        ]}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 200);
    let window: Value = http.get(&url).send().await.expect("get").json().await.expect("json");
    assert_eq!(window["messages"].as_array().map(Vec::len), Some(3));

    // The metrics listener shows what the main listener did; the document lists the routes.
    let metrics = http
        .get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("chatmem_commits_total 1"), "{metrics}");
    let doc: Value = http
        .get(format!("{base}/openapi.json"))
        .send()
        .await
        .expect("openapi")
        .json()
        .await
        .expect("json");
    assert!(doc["paths"]["/v1/conversations/{id}/messages"]["post"].is_object());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // What the server stored, the CLI reads from the same file.
    let get = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["get", "--conversation", "app-user-42-aftersale", "--store", &store])
        .output()
        .expect("get");
    let stored: Value = serde_json::from_slice(&get.stdout).expect("json");
    assert_eq!(stored.as_array().map(Vec::len), Some(3));
}

#[test]
fn without_auth_only_loopback_is_allowed() {
    let out = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["serve", "--listen", "0.0.0.0:0", "--store", "memory:"])
        .env_remove("CHATMEM_STORE")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("without --auth"), "{err}");
}
