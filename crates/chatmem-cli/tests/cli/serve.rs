//! `chatmem serve` as a process: SERVER.md's curl session through reqwest, the metrics
//! listener, the loopback rule, a clean exit on SIGTERM, and the Python example
//! (`examples/python/aftersale.py`, the official `openai` package) against a loopback upstream.

use std::process::{Command, Stdio};
use std::time::Duration;

use chatmem_test::loopback::free_port;
use chatmem_test::upstream::{MockUpstream, roles_and_texts, text};
use serde_json::{Value, json};

use crate::support::{Serve, refused, repo_path, serve_command, words};

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_the_memory_api_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("serve.db").display());
    let metrics_port = free_port();
    let metrics_listen = format!("127.0.0.1:{metrics_port}");
    let server = Serve::start(
        &[
            "--metrics-listen",
            &metrics_listen,
            "--store",
            &store,
            "--max-messages",
            "6",
        ],
        |_| {},
    )
    .await;
    let base = &server.base;
    let http = reqwest::Client::new();
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

    let out = server.stop();
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
    let args = ["--store", "memory:"];
    let out = serve_command("0.0.0.0:0", &args).output().expect("run");
    refused(&out, &args, &["without --auth"]);
}

/// An upstream URL that cannot work (no scheme) stops `serve` at start with one line naming
/// the flag, before it listens, rather than answering every chat completion with an error.
#[test]
fn a_bad_upstream_url_stops_serve_at_start() {
    let args = words("--store memory: --upstream-base-url localhost:18102");
    let mut child = serve_command("127.0.0.1:0", &args).spawn().expect("run");
    // A server that started would run on: give it 20 s to stop by itself.
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("serve started with a bad --upstream-base-url");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    refused(
        &out,
        &args,
        &["--upstream-base-url localhost:18102", "not http or https"],
    );
}

/// `examples/python/aftersale.py` with the official `openai` package (in the venv that
/// `examples/python/setup.sh` makes; `CHATMEM_TEST_PYTHON` is its python) against `chatmem
/// serve`, which calls a loopback upstream: turn 2 ("that order") reaches the upstream with the
/// order number from memory, and the example prints the answer.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PYTHON"]
async fn the_python_example_gets_memory_through_the_openai_package() {
    let python = crate::support::examples_python();
    const ORDER: &str = "LC202610060018";
    let upstream = MockUpstream::start(vec![
        text("订单 LC202610060018 尚未发货。"),
        text("LC202610060018 未发货，可以退。"),
    ])
    .await;
    let server = Serve::start(
        &[
            "--store",
            "memory:",
            "--max-messages",
            "6",
            "--upstream-base-url",
            &upstream.base_url,
        ],
        |command| {
            command.env("CHATMEM_UPSTREAM_API_KEY", "test-key"); // the key the loopback upstream checks
        },
    )
    .await;
    let base = &server.base;

    let example = repo_path("examples/python/aftersale.py");
    let run = tokio::process::Command::new(&python)
        .arg(example)
        .env("CHATMEM_BASE_URL", format!("{base}/v1"))
        .env("CHATMEM_MODEL", "mock-model")
        .env("CHATMEM_CONVERSATION", "app-user-42-aftersale")
        .env("NO_PROXY", "127.0.0.1,localhost") // loopback never goes through a proxy
        .env("no_proxy", "127.0.0.1,localhost")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the example finished within 60 s")
        .expect("run the venv's python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("assistant: LC202610060018 未发货，可以退。"),
        "the example printed the answer: {stdout}"
    );

    let requests = upstream.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    // Turn 2 brought only "那单能退吗？"; the upstream saw turn 1 from memory.
    let turn2 = roles_and_texts(&requests[1]);
    let roles: Vec<&str> = turn2.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert!(turn2[1].1.contains(ORDER), "{turn2:?}");
    assert_eq!(turn2[3].1, "那单能退吗？");
    assert_eq!(requests[1]["stream"], true, "turn 2 streamed");

    let out = server.stop();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The inspector's budget bar says what `chatmem get` prints for the same store and policy.
#[tokio::test(flavor = "multi_thread")]
async fn the_inspectors_budget_bar_matches_chatmem_get() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("inspector.db").display());
    let policy = ["--max-messages", "4", "--retention", "keep-history"];
    let seed = std::fs::read(repo_path("examples/aftersale.json")).expect("the seed");
    let mut add = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["add", "--conversation", "seed-003", "--store", &store])
        .args(policy)
        .stdin(Stdio::piped())
        .spawn()
        .expect("chatmem add");
    std::io::Write::write_all(&mut add.stdin.take().expect("stdin"), &seed).expect("the seed sent");
    assert!(add.wait().expect("add ends").success());
    let get = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["get", "--conversation", "seed-003", "--store", &store])
        .args(policy)
        .output()
        .expect("chatmem get");
    assert!(get.status.success());
    let window: Vec<Value> = serde_json::from_slice(&get.stdout).expect("get prints a JSON array");

    let server = Serve::start(&[&["--store", &store][..], &policy].concat(), |command| {
        command.stderr(Stdio::null());
    })
    .await;
    let base = &server.base;
    let page = reqwest::get(format!("{base}/ui/conversations/seed-003"))
        .await
        .expect("the page")
        .text()
        .await
        .expect("html");
    server.stop();
    assert!(
        page.contains(&format!("<strong>{} / 4 messages</strong>", window.len())),
        "chatmem get printed {} messages; the page says otherwise",
        window.len()
    );
    // What the page marks in the window is what get printed after the system message.
    assert_eq!(page.matches(" in-window\" id=\"m").count() + 1, window.len());
}

/// `chatmem serve` takes the window flags' clearing: its window sends old tool results as
/// placeholders while history keeps them; a bad setting stops it at start with one line naming
/// the field.
#[tokio::test(flavor = "multi_thread")]
async fn serve_clears_old_tool_results_from_its_window_only() {
    let record = |n: usize| {
        let lines: Vec<Value> = (0..30)
            .map(|i| json!({"sku": format!("SKU-{n}-{i}"), "qty": i}))
            .collect();
        json!({"order": n, "lines": lines}).to_string()
    };
    let mut messages = vec![json!({"role": "user", "content": "Where are my orders?"})];
    for n in 1..=2 {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{n}"), "type": "function", "function": {"name": "get_order", "arguments": "{}"}}
        ]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{n}"), "content": record(n)}));
    }
    let server = Serve::start(
        &words("--store memory: --retention keep-history --max-tokens 4000 --clear-tool-results 1 --clear-trigger-tokens 50"),
        |_| {},
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/conversations/agent/messages", server.base);
    let r = http
        .post(&url)
        .json(&json!({"messages": messages}))
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 200);
    let content = |body: &Value, i: usize| body["messages"][i]["content"].as_str().expect("text").to_owned();
    let window: Value = http.get(&url).send().await.expect("GET").json().await.expect("JSON");
    assert!(
        content(&window, 2).starts_with("[cleared: get_order result for call call_1, "),
        "{window}"
    );
    assert_eq!(content(&window, 4), record(2));
    let history: Value = http
        .get(format!("{}/v1/conversations/agent/history", server.base))
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON");
    assert_eq!(content(&history, 2), record(1));
    assert!(server.stop().status.success());

    for (args, needles) in [
        (
            "--store memory: --clear-tool-results 0",
            &["clear_tool_results.keep"][..],
        ),
        (
            "--store memory: --max-tokens 4000 --clear-tool-results 1 --clear-trigger-tokens 10 --clear-at-least-tokens 20",
            &["clear_tool_results.trigger_tokens"][..],
        ),
        ("--store memory: --clear-inputs", &["--clear-tool-results"][..]),
    ] {
        let args = words(args);
        let out = serve_command("127.0.0.1:0", &args).output().expect("run");
        refused(&out, &args, needles);
    }
}
