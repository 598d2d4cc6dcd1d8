//! The `chatmem` binary, run as a user would: stdin in, stdout and exit code out.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::support::{
    MYSQL, POSTGRES, REDIS, REDIS_CLUSTER, ServerStore, chatmem, chatmem_to, conv, fails, ok_json, roles, words,
};

#[test]
fn trim_follows_the_window_contract() {
    let out = ok_json(&["trim", "--max-messages", "5"], &conv("S_old U1 A1 U2 A2 U3 A3 S_new"));
    let texts: Vec<&str> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["S_new", "U2", "A2", "U3", "A3"]);
    let out = ok_json(&["trim", "--max-messages", "2"], &conv("U1 A1 U2 A2 U3"));
    assert_eq!(out, json!([{"role": "user", "content": "U3"}]));
    // Default 20 keeps everything here.
    assert_eq!(ok_json(&["trim"], &conv("U1 A1 U2")).as_array().unwrap().len(), 3);
}

#[test]
fn trim_keeps_tool_pairs_and_round_trips_fields() {
    let input = include_str!("../../../../examples/aftersale.json");
    let out = ok_json(&["trim", "--max-messages", "5", "--turn-boundary", "pair-safe"], input);
    // Four non-system messages fit: [R, A, U, A]; a tool result cannot start the run.
    assert_eq!(roles(&out), ["system", "assistant", "user", "assistant"]);

    let out = ok_json(&["trim", "--max-messages", "6", "--boundary", "pair-safe"], input);
    assert_eq!(
        roles(&out),
        ["system", "assistant", "tool", "assistant", "user", "assistant"]
    );
    assert_eq!(out[1]["tool_calls"][0]["function"]["name"], "order_status");
    assert_eq!(out[5]["reasoning_content"], "订单未发货，按店规可退。");
    // A token budget and each tokenizer, by either of its names (the core's).
    for tokenizer in ["cl100k", "o200k", "heuristic", "cl100k_base", "o200k_base"] {
        let out = ok_json(&["trim", "--max-tokens", "120", "--tokenizer", tokenizer], input);
        assert_eq!(roles(&out)[0], "system");
        assert!(out.as_array().unwrap().len() < 9);
    }
}

#[test]
fn count_prints_the_token_count() {
    let out = chatmem(&["count"], r#"[{"role":"user","content":"hello world"}]"#);
    // 3 (list) + 3 (message) + "user" 1 + "hello world" 2
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "9");
    let out = chatmem(&["count", "--tokenizer", "heuristic"], "[]");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
    let out = chatmem(&["count", "--tokenizer", "o200k_base"], "[]");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    fails(
        &["trim"],
        r#"[{"role":"user","content":"a"},{"role":"tool","content":"x"}]"#,
        "[1]",
    );
    fails(
        &["trim"],
        r#"[{"role":"user","content":"a"},{"role":"tool","content":"x"}]"#,
        "tool_call_id",
    );
    fails(&["count"], "not json", "input");
    fails(&["trim"], "", "stdin is empty");

    fails(
        &["count"],
        r#"[{"role":"user","content":"x"}] trailing"#,
        "trailing characters",
    );

    fails(&["trim", "--max-messages", "0"], "[]", "--max-messages");
    fails(
        &["trim", "--max-messages", "3", "--max-tokens", "9"],
        "[]",
        "cannot be used",
    );
    fails(
        &["trim", "--tokenizer", "gpt2"],
        "[]",
        "expected cl100k (or cl100k_base)",
    );
    fails(&["trim", "--boundary", "assistant"], "[]", "expected user or pair-safe");
    fails(&["frobnicate"], "", "frobnicate");
    fails(
        &["get", "--conversation", "", "--store", "memory:"],
        "",
        "conversation id is empty",
    );
    fails(
        &["get", "--conversation", "x", "--store", "ftp://x"],
        "",
        "unknown store URL",
    );
    fails(
        &["add", "--conversation", "x", "--store", "memory:", "--ttl", "soon"],
        "[]",
        "--ttl",
    );
}

#[test]
fn a_store_outlives_the_process_and_memory_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("m.db").display());
    let id = "app-user-42-aftersale";
    let turn1 = r#"[{"role":"system","content":"你是邻里仓售后。"},{"role":"user","content":"我的订单是 LC202610060018，还没发货。"},{"role":"assistant","content":"已查询。"}]"#;
    let out = chatmem(
        &["add", "--conversation", id, "--store", &url, "--max-messages", "6"],
        turn1,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A new process reads it back.
    let got = ok_json(
        &["get", "--conversation", id, "--store", &url, "--max-messages", "6"],
        "",
    );
    assert_eq!(roles(&got), ["system", "user", "assistant"]);
    assert!(got.to_string().contains("LC202610060018"));
    // CHATMEM_STORE works like --store.
    let out = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["list"])
        .env("CHATMEM_STORE", &url)
        .output()
        .expect("run");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{id}\n"));
    // Through memory: a new process sees nothing.
    chatmem(&["add", "--conversation", id, "--store", "memory:"], turn1);
    assert_eq!(
        ok_json(&["get", "--conversation", id, "--store", "memory:"], ""),
        json!([])
    );
    // KeepHistory keeps what the window evicts; clear removes everything.
    let more = conv("U2 A2 U3 A3");
    let out = chatmem(
        &[
            "add",
            "--conversation",
            id,
            "--store",
            &url,
            "--max-messages",
            "3",
            "--retention",
            "keep-history",
        ],
        &more,
    );
    assert!(out.status.success());
    assert_eq!(
        roles(&ok_json(
            &["get", "--conversation", id, "--store", &url, "--max-messages", "3"],
            ""
        )),
        ["system", "user", "assistant"]
    );
    assert_eq!(
        ok_json(&["history", "--conversation", id, "--store", &url], "")
            .as_array()
            .unwrap()
            .len(),
        7
    );
    assert!(
        chatmem(&["clear", "--conversation", id, "--store", &url], "")
            .status
            .success()
    );
    assert_eq!(ok_json(&["get", "--conversation", id, "--store", &url], ""), json!([]));
    let out = chatmem(&["purge", "--store", &url], "");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
}

/// The restart case through a shared server: what one process adds, another reads back.
fn a_server_store_outlives_the_process(server: ServerStore) {
    let (url, var) = (server.url(), server.var);
    let id = format!("cli-restart-{}-{}", std::process::id(), var);
    let out = chatmem(&["add", "--conversation", &id, "--store", &url], conv("S U1 A1"));
    assert!(out.status.success(), "{var}: {}", String::from_utf8_lossy(&out.stderr));
    let got = ok_json(&["get", "--conversation", &id, "--store", &url], "");
    assert_eq!(roles(&got), ["system", "user", "assistant"], "{var}");
    assert!(
        chatmem(&["clear", "--conversation", &id, "--store", &url], "")
            .status
            .success()
    );
}

#[test]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
fn postgres_outlives_the_process() {
    a_server_store_outlives_the_process(POSTGRES);
}

#[test]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
fn mysql_outlives_the_process() {
    a_server_store_outlives_the_process(MYSQL);
}

#[test]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
fn redis_outlives_the_process() {
    a_server_store_outlives_the_process(REDIS);
}

#[test]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
fn redis_cluster_outlives_the_process() {
    a_server_store_outlives_the_process(REDIS_CLUSTER);
}

#[test]
fn an_unreachable_server_is_one_clear_line_without_the_password() {
    for url in [
        "postgres://app:s3cret@127.0.0.1:1/db",
        "postgres://postgres@127.0.0.1:1/test?password=s3cret",
        "postgres://u:pa/ss3cret@127.0.0.1:1/test",
        "mysql://app:s3cret@127.0.0.1:1/db",
        "mysql://root:pa%2Fs3cret@127.0.0.1:1/test?chatmem_timeout_ms=500",
        "redis://s3cret@127.0.0.1:1",
        "redis://:pa#s3cret@127.0.0.1:1",
        "redis://127.0.0.1:1/0?password=s3cret",
        "rediss://u:s3cret@127.0.0.1:1",
        "host=127.0.0.1 port=1 password=s3cret",
    ] {
        let out = chatmem(&["get", "--conversation", "x", "--store", url], "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{url}: {err}");
        assert!(!err.contains("s3cret"), "{url} leaked: {err}");
        assert!(
            err.matches("127.0.0.1:1").count() <= 1,
            "{url}: the server is named once: {err}"
        );
    }
}

#[test]
fn a_full_stdout_is_one_line_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("full.db").display());
    let one = r#"[{"role":"user","content":"x"}]"#;
    let cases: [(&[&str], &str); 4] = [
        (&["count"], one),
        (&["trim", "--max-messages", "4"], one),
        (&["purge", "--store", &store], ""),
        (&["get", "--conversation", "c", "--store", &store], ""),
    ];
    // `purge` and `get` open an existing store only.
    let add = chatmem_to(&["add", "--conversation", "c", "--store", &store], one, Stdio::null());
    assert!(add.status.success(), "{}", String::from_utf8_lossy(&add.stderr));
    for (args, stdin) in cases {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = chatmem_to(args, stdin, Stdio::from(full));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("writing to stdout"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pipe.db");
    let store = format!("sqlite:{}", path.display());
    // Enough ids that `list` is still writing when the reader has gone (made in-process: 300
    // `chatmem add` runs would take most of a minute).
    let memory = chatmem::ChatMemory::new(chatmem_sqlite::SqliteStore::open(&path).await.expect("open"));
    for n in 0..300 {
        let id = chatmem::ConversationId::new(format!("conversation-{n:04}")).expect("id");
        memory.add(&id, [chatmem::Message::user("x")]).await.expect("add");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["list", "--store", &store])
        .env_remove("CHATMEM_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chatmem");
    drop(child.stdout.take()); // the reader goes away at once, like `| head -0`
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.is_empty(), "a closed pipe says nothing: {err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn control_characters_in_input_are_escaped_in_errors() {
    let hostile = "[{\"role\":\"\\u001b]0;pwned\\u0007a\\rb\\u2028c\",\"content\":\"x\"}]";
    let out = chatmem(&["count"], hostile);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.trim_end_matches('\n')
            .chars()
            .all(|c| !c.is_control() && !chatmem::printable::is_invisible_or_separator(c)),
        "raw control characters on stderr: {err:?}"
    );
    assert!(err.contains("\\u{1b}"), "{err:?}");
}

#[test]
fn summary_flags_are_checked_before_anything_runs() {
    for (args, needle) in [
        // serve: requests name their own model, so the summary model must be named.
        ("serve --store memory: --summarize", "--summary-model"),
        (
            "serve --store memory: --summarize --summary-model m",
            "--upstream-base-url",
        ),
        // The summary flags mean nothing without --summarize.
        ("chat --conversation c --store memory: --summary-model m", "--summarize"),
        (
            "chat --conversation c --store memory: --summarize --summary-max-tokens 0",
            "at least 1",
        ),
    ] {
        fails(&words(args), "", needle);
    }
}

/// Every command with a window policy takes the whole `PolicySpec`: `serve`'s flags are the
/// server's configured policy.
#[test]
fn every_policy_command_takes_every_policy_flag() {
    for command in ["trim", "add", "get", "chat", "serve"] {
        let out = chatmem(&[command, "--help"], "");
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in [
            "--max-messages",
            "--max-tokens",
            "--evict-to",
            "--tokenizer",
            "--boundary",
        ] {
            assert!(help.contains(flag), "{command} --help lacks {flag}");
        }
    }
}

/// Two turns, each with one call whose result is a big JSON record.
fn tool_turns() -> String {
    let record = |id: &str| format!("{{\"order\":\"{id}\",\"lines\":\"{}\"}}", "x".repeat(800));
    json!([
        {"role": "user", "content": "where is LC202610060018?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{\"order\":\"LC202610060018\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": record("LC202610060018")},
        {"role": "assistant", "content": "Not shipped yet."},
        {"role": "user", "content": "and LC202610060019?"},
        {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get_order", "arguments": "{\"order\":\"LC202610060019\"}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": record("LC202610060019")},
        {"role": "assistant", "content": "Shipped."},
    ])
    .to_string()
}

#[test]
fn trim_and_get_send_old_tool_results_cleared_and_history_keeps_them() {
    let input = tool_turns();
    let flags = [
        "--max-tokens",
        "4000",
        "--clear-tool-results",
        "1",
        "--clear-trigger-tokens",
        "100",
    ];
    let trim: Vec<&str> = ["trim"].into_iter().chain(flags).collect();
    let out = ok_json(&trim, &input);
    let content = |v: &serde_json::Value, i: usize| v[i]["content"].as_str().unwrap_or_default().to_owned();
    assert_eq!(out.as_array().unwrap().len(), 8, "every message stays");
    assert!(
        content(&out, 2).starts_with("[cleared: get_order result for call c1, "),
        "{}",
        content(&out, 2)
    );
    assert_eq!(out[2]["tool_call_id"], "c1");
    assert!(
        content(&out, 6).contains("LC202610060019"),
        "the newest use stays whole"
    );
    // --clear-inputs sends the cleared call's arguments as {}.
    let inputs: Vec<&str> = trim.iter().copied().chain(["--clear-inputs"]).collect();
    let out = ok_json(&inputs, &input);
    assert_eq!(out[1]["tool_calls"][0]["function"]["arguments"], "{}");
    assert_eq!(
        out[5]["tool_calls"][0]["function"]["arguments"],
        "{\"order\":\"LC202610060019\"}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("m.db").display());
    let at = ["--conversation", "tools", "--store", &url];
    let add: Vec<&str> = ["add"].into_iter().chain(at).chain(flags).collect();
    let out = chatmem(&add, &input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let get: Vec<&str> = ["get"].into_iter().chain(at).chain(flags).collect();
    let got = ok_json(&get, "");
    assert!(content(&got, 2).starts_with("[cleared: "), "{}", content(&got, 2));
    // Without the flags the same window is sent whole: memory never changed.
    let whole: Vec<&str> = ["get"].into_iter().chain(at).chain(["--max-tokens", "4000"]).collect();
    assert!(content(&ok_json(&whole, ""), 2).contains("LC202610060018"));
    let history: Vec<&str> = ["history"].into_iter().chain(at).collect();
    let history = ok_json(&history, "");
    let original: serde_json::Value = serde_json::from_str(&input).unwrap();
    assert_eq!(
        history[2]["content"], original[2]["content"],
        "history holds the original bytes"
    );
}

#[test]
fn bad_clearing_settings_are_refused_naming_the_field() {
    let input = tool_turns();
    fails(
        &["trim", "--clear-tool-results", "0"],
        &input,
        "clear_tool_results.keep",
    );
    fails(
        &["trim", "--clear-tool-results", "1001"],
        &input,
        "clear_tool_results.keep",
    );
    fails(
        &[
            "trim",
            "--max-tokens",
            "4000",
            "--clear-tool-results",
            "3",
            "--clear-trigger-tokens",
            "10",
            "--clear-at-least-tokens",
            "20",
        ],
        &input,
        "clear_tool_results.trigger_tokens",
    );
    fails(
        &[
            "trim",
            "--max-tokens",
            "4000",
            "--clear-tool-results",
            "3",
            "--clear-trigger-tokens",
            "5000",
        ],
        &input,
        "max_tokens",
    );
    fails(&["trim", "--clear-inputs"], &input, "--clear-tool-results");
    fails(
        &["trim", "--clear-tool-results", "3", "--clear-trigger-tokens", "-1"],
        &input,
        "-1",
    );
}
