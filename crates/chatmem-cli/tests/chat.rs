//! `chatmem chat` driven through a pipe against a real OpenAI-protocol server on loopback.

#[allow(dead_code, unreachable_pub)]
#[path = "../../chatmem-advisor/tests/support/mod.rs"]
mod support;

use std::process::Stdio;

use support::{MockServer, roles_and_texts, text};
use tokio::io::AsyncWriteExt;

const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
const ORDER: &str = "LC202610060018";

async fn chat(server: &MockServer, store: &str, input: &str) -> std::process::Output {
    chat_with(
        server,
        store,
        input,
        &["--conversation", "app-user-42-aftersale", "--max-messages", "6"],
    )
    .await
}

async fn chat_with(server: &MockServer, store: &str, input: &str, args: &[&str]) -> std::process::Output {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["chat", "--system", SYSTEM])
        .args(args)
        .args([
            "--base-url",
            &server.base_url,
            "--model",
            "mock-model",
            "--store",
            store,
        ])
        .env("OPENAI_API_KEY", "test-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chatmem chat");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).await.expect("write");
    drop(stdin);
    child.wait_with_output().await.expect("wait")
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_chat_remembers_the_order_across_processes() {
    let server = MockServer::start(vec![
        text("订单 LC202610060018 尚未发货。"),
        text("LC202610060018 未发货，可以退。"),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("chat.db").display());

    let first = chat(&server, &store, "我的订单是 LC202610060018，还没发货。\n").await;
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        "订单 LC202610060018 尚未发货。\n"
    );

    // A new process continues the conversation from the SQLite store.
    let second = chat(&server, &store, "那单能退吗？\n").await;
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(
        String::from_utf8_lossy(&second.stdout),
        "LC202610060018 未发货，可以退。\n"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let turn2 = roles_and_texts(&requests[1]);
    let roles: Vec<&str> = turn2.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(turn2[0].1, SYSTEM);
    assert!(turn2[1].1.contains(ORDER));
    assert_eq!(turn2[3].1, "那单能退吗？");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_api_key_names_the_variable() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args([
            "chat",
            "--conversation",
            "c",
            "--provider",
            "deepseek",
            "--store",
            "memory:",
        ])
        .env_remove("DEEPSEEK_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("DEEPSEEK_API_KEY"), "{err}");
}

/// 30 turns, each a separate process: with `--evict-to 5` most prompts begin with the previous
/// prompt (a provider's prefix cache serves them); without it almost none do. The budget holds
/// either way.
#[tokio::test(flavor = "multi_thread")]
async fn block_eviction_keeps_prompt_prefixes_across_processes() {
    const TURNS: usize = 30;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("prefix.db").display());
    let mut stable = Vec::new();
    for (conversation, extra) in [("sliding", None), ("blocks", Some("5"))] {
        let server = MockServer::start((0..TURNS).map(|n| text(&format!("answer {n}"))).collect()).await;
        let mut args = vec!["--conversation", conversation, "--max-messages", "10"];
        if let Some(n) = extra {
            args.extend(["--evict-to", n]);
        }
        for n in 0..TURNS {
            let out = chat_with(&server, &store, &format!("question {n} about {ORDER}\n"), &args).await;
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        let prompts: Vec<Vec<(String, String)>> = server.requests().iter().map(roles_and_texts).collect();
        assert_eq!(prompts.len(), TURNS);
        assert!(prompts.iter().all(|p| p.len() <= 10), "a prompt exceeded the budget");
        let starts_with_previous = prompts.windows(2).filter(|w| w[1].starts_with(&w[0])).count();
        stable.push(starts_with_previous);
    }
    let (sliding, blocks) = (stable[0], stable[1]);
    eprintln!(
        "prompts beginning with the previous prompt, of {}: sliding {sliding}, --evict-to 5 {blocks}",
        TURNS - 1
    );
    // Deterministic: 20 of 29 with the option (an eviction every third turn), 4 without.
    assert!(
        blocks >= 15,
        "with --evict-to only {blocks} of {} prompts began with the previous one",
        TURNS - 1
    );
    assert!(
        sliding <= 5,
        "without --evict-to {sliding} prompts began with the previous one"
    );
    assert!(
        blocks >= 3 * sliding.max(1),
        "block eviction {blocks}, sliding {sliding}"
    );
}
