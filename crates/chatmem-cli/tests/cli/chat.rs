//! `chatmem chat` driven through a pipe against a real OpenAI-protocol server on loopback.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chatmem_test::upstream::{MockUpstream, Reply, Responder, roles_and_texts, text};
use serde_json::Value;

const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
const ORDER: &str = "LC202610060018";

async fn chat(server: &MockUpstream, store: &str, input: &str) -> std::process::Output {
    chat_with(
        server,
        store,
        input,
        &["--conversation", "app-user-42-aftersale", "--max-messages", "6"],
    )
    .await
}

async fn chat_with(server: &MockUpstream, store: &str, input: &str, args: &[&str]) -> std::process::Output {
    crate::support::chat_piped(server, store, &[&["--system", SYSTEM][..], args].concat(), input).await
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_chat_remembers_the_order_across_processes() {
    let server = MockUpstream::start(vec![
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
        let server = MockUpstream::start((0..TURNS).map(|n| text(&format!("answer {n}"))).collect()).await;
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

/// The summary model's name in the summary tests.
const SUMMARY_MODEL: &str = "summary-model";

/// An upstream that behaves like a model following the after-sale system prompt: a chat
/// answer names the order number if it appears anywhere in the prompt, and asks for it
/// otherwise. Summary calls (model `summary-model`) keep every line they are given, like a
/// faithful summarizer, or fail with 500 while `fail_summaries` is set.
fn after_sale_upstream(fail_summaries: Arc<AtomicBool>) -> Responder {
    Arc::new(move |request: &Value| {
        let texts: Vec<(String, String)> = roles_and_texts(request);
        if request["model"] == SUMMARY_MODEL {
            if fail_summaries.load(Ordering::SeqCst) {
                return Reply::Status(500);
            }
            let input = &texts.last().expect("a summary request has input").1;
            return text(&chatmem_test::scribe_summary(input).expect("a summary request"));
        }
        let order = texts.iter().find_map(|(_, t)| {
            let at = t.find("LC")?;
            let id = t.get(at..at + ORDER.len())?;
            id[2..].chars().all(|c| c.is_ascii_digit()).then(|| id.to_string())
        });
        match order {
            Some(order) => text(&format!("订单 {order} 未发货，可以退款。")),
            None => text("请提供订单号。"),
        }
    })
}

const TURNS_003: [&str; 4] = [
    "我的订单是 LC202610060018，还没发货。",
    "物流一直没有更新。",
    "我有点着急。",
    "那单能退吗？",
];

/// Seed 003 with a 3-message window over 4 turns, each a separate `chatmem chat` process:
/// turn 1 has left the window by turn 4, yet with `--summarize` the order number reaches the
/// model in the summary and the answer names it; without, it does not; another conversation
/// never sees it.
#[tokio::test(flavor = "multi_thread")]
async fn a_summary_keeps_the_order_number_after_it_left_a_small_window() {
    let server = MockUpstream::start_with(after_sale_upstream(Arc::default())).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("summary.db").display());
    let summarize = ["--summarize", "--summary-model", SUMMARY_MODEL];
    let mut answers = std::collections::BTreeMap::new();
    for (conversation, extra) in [("with-summary", &summarize[..]), ("without-summary", &[][..])] {
        let mut last = String::new();
        for turn in TURNS_003 {
            let args = [&["--conversation", conversation, "--max-messages", "3"][..], extra].concat();
            let out = chat_with(&server, &store, &format!("{turn}\n"), &args).await;
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            last = String::from_utf8_lossy(&out.stdout).into_owned();
        }
        answers.insert(conversation, last);
    }
    let other = ["--conversation", "another-customer", "--max-messages", "3"];
    let out = chat_with(&server, &store, "我想换货。\n", &[&other[..], &summarize[..]].concat()).await;
    assert!(out.status.success());

    let requests = server.requests();
    let chats: Vec<Vec<(String, String)>> = requests
        .iter()
        .filter(|r| r["model"] != SUMMARY_MODEL)
        .map(roles_and_texts)
        .collect();
    assert_eq!(chats.len(), 9);
    let (with, without, another) = (&chats[3], &chats[7], &chats[8]);
    for prompt in [with, without] {
        assert!(
            prompt.iter().all(|(_, t)| t != TURNS_003[0]),
            "turn 1's message is still in the window: {prompt:?}"
        );
        assert_eq!(prompt.last().map(|(_, t)| t.as_str()), Some(TURNS_003[3]));
    }
    assert_eq!(with[0].0, "system");
    assert!(with[0].1.starts_with(SYSTEM) && with[0].1.contains("Summary of the earlier conversation:"));
    assert!(
        with[0].1.contains(ORDER),
        "the summary carries the order: {:?}",
        with[0].1
    );
    assert_eq!(
        with.iter().filter(|(r, _)| r == "system").count(),
        1,
        "one system message"
    );
    assert!(answers["with-summary"].contains(ORDER), "{}", answers["with-summary"]);
    assert!(without.iter().all(|(_, t)| !t.contains(ORDER)), "{without:?}");
    assert!(
        !answers["without-summary"].contains(ORDER),
        "{}",
        answers["without-summary"]
    );
    assert!(another.iter().all(|(_, t)| !t.contains(ORDER)), "{another:?}");
    // Summary calls: only on turns that evicted (turns 2-4 of the summarized conversation).
    let summaries = requests.iter().filter(|r| r["model"] == SUMMARY_MODEL).count();
    assert_eq!(summaries, 3);

    // `chatmem get` shows the window as the model will see it: the summary in the system message.
    let got = std::process::Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args([
            "get",
            "--conversation",
            "with-summary",
            "--max-messages",
            "3",
            "--store",
            &store,
        ])
        .output()
        .expect("get");
    let window: Value = serde_json::from_slice(&got.stdout).expect("get prints JSON");
    assert!(
        window[0]["content"].as_str().unwrap_or_default().contains(ORDER),
        "{window}"
    );
}

/// The summary model fails: the turn is answered and committed anyway, the evicted messages
/// stay stored across processes, and a later turn summarizes them.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_summary_never_breaks_a_turn_and_a_later_turn_catches_up() {
    let failing = Arc::new(AtomicBool::new(true));
    let server = MockUpstream::start_with(after_sale_upstream(failing.clone())).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("flaky.db").display());
    let args = [
        "--conversation",
        "flaky",
        "--max-messages",
        "3",
        "--summarize",
        "--summary-model",
        SUMMARY_MODEL,
    ];
    for turn in &TURNS_003[..3] {
        let out = chat_with(&server, &store, &format!("{turn}\n"), &args).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let history = std::process::Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["history", "--conversation", "flaky", "--store", &store])
        .output()
        .expect("history");
    let history: Value = serde_json::from_slice(&history.stdout).expect("JSON");
    assert_eq!(
        history.as_array().map(Vec::len),
        Some(7),
        "system + 3 turns, nothing deleted: {history}"
    );

    failing.store(false, Ordering::SeqCst);
    let out = chat_with(&server, &store, &format!("{}\n", TURNS_003[3]), &args).await;
    assert!(out.status.success());
    // Turn 4's prompt was made before its summary: the summary lands with turn 4, so turn 5 sees it.
    let out = chat_with(&server, &store, "什么时候到账？\n", &args).await;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(ORDER),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let last = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["model"] != SUMMARY_MODEL)
        .expect("a chat");
    assert!(roles_and_texts(&last)[0].1.contains(ORDER));
}
