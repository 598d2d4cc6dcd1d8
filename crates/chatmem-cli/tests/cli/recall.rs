//! `--recall K` and `chatmem recall`, run as a user would: an order number that left a
//! two-message window comes back just before the question that names it, `chatmem recall` shows
//! what it finds and why, and the flags that contradict recall are refused at start.

use std::process::Stdio;

use chatmem::recall::RECALL_HEADING;
use chatmem_test::upstream::{MockUpstream, roles_and_texts, text};
use serde_json::{Value, json};

use crate::support::{Serve, chatmem, fails, ok_json, refused, serve_command, words};

const ORDER: &str = "我的订单是 LC202610060018，还没发货。";
const FILLER: &str = "谢谢，辛苦了。";
const QUESTION: &str = "LC202610060018 能退吗？";

/// `chatmem chat --base-url … --store store args…` with `lines` on stdin, one user message a
/// line.
async fn chat(server: &MockUpstream, store: &str, lines: &[&str], args: &[&str]) -> std::process::Output {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    crate::support::chat_piped(server, store, args, &input).await
}

/// The three turns through `chatmem chat` over `store` with `args`: in one process for
/// `memory:` (gone with it), one process a turn otherwise (the index outlives each). The prompt
/// of the last model call.
async fn seed(store: &str, args: &[&str]) -> Vec<(String, String)> {
    let server = MockUpstream::start(vec![text("已为您催促发货。"), text("不客气。"), text("可以退。")]).await;
    let turns = [ORDER, FILLER, QUESTION];
    let runs: Vec<&[&str]> = match store {
        "memory:" => vec![&turns[..]],
        _ => turns.chunks(1).collect(),
    };
    for lines in runs {
        let out = chat(&server, store, lines, args).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), lines.len());
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    roles_and_texts(&requests[2])
}

/// The conversation of the seed, and its window of 2.
const SEED: [&str; 4] = ["--conversation", "app-user-42-aftersale", "--max-messages", "2"];

/// An SQLite store in `dir`.
fn sqlite(dir: &tempfile::TempDir) -> String {
    format!("sqlite:{}", dir.path().join("recall.db").display())
}

/// Seed: under a window of 2 the order message has left it by the third turn; with `--recall 3`
/// the model gets it back, under the recall heading, in the user message just before the
/// question, in one process or across three over SQLite; without, it does not see it at all.
#[tokio::test(flavor = "multi_thread")]
async fn chat_recalls_the_order_that_left_a_two_message_window_just_before_the_question() {
    let dir = tempfile::tempdir().expect("tempdir");
    for store in ["memory:".to_owned(), sqlite(&dir)] {
        let prompt = seed(&store, &[&SEED[..], &["--recall", "3"]].concat()).await;
        let n = prompt.len();
        assert!(n >= 2, "{store}: {prompt:?}");
        assert_eq!((prompt[n - 1].0.as_str(), prompt[n - 1].1.as_str()), ("user", QUESTION));
        let (role, recalled) = (&prompt[n - 2].0, &prompt[n - 2].1);
        assert_eq!(role, "user", "{store}: {prompt:?}");
        assert!(
            recalled.starts_with(&format!("{RECALL_HEADING}\n")),
            "{store}: {recalled}"
        );
        assert!(recalled.contains("#1 user"), "{store}: {recalled}");
        assert!(recalled.contains(ORDER), "{store}: {recalled}");
        // The window itself no longer holds it: only the recall brings it back.
        assert!(
            prompt[..n - 2].iter().all(|(_, t)| !t.contains("还没发货")),
            "{store}: {prompt:?}"
        );
    }

    let without = ["--conversation", "without-recall", "--max-messages", "2"];
    let prompt = seed(&sqlite(&dir), &without).await;
    assert_eq!(prompt.last().map(|(_, t)| t.as_str()), Some(QUESTION));
    assert!(
        prompt
            .iter()
            .all(|(_, t)| !t.contains("还没发货") && !t.starts_with(RECALL_HEADING)),
        "{prompt:?}"
    );
}

/// `--show-memory` prints what each model call is sent, recalled messages included: its last
/// block is the last request the model received, message for message.
#[tokio::test(flavor = "multi_thread")]
async fn show_memory_prints_what_the_model_is_sent_with_what_was_recalled() {
    let server = MockUpstream::start(vec![text("已为您催促发货。"), text("不客气。"), text("可以退。")]).await;
    let args = [&SEED[..], &["--recall", "3", "--show-memory"]].concat();
    let out = chat(&server, "memory:", &[ORDER, FILLER, QUESTION], &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.rsplit("--- memory: ").next().unwrap_or_default();
    let sent = roles_and_texts(&server.requests()[2]);
    assert!(last.starts_with(&format!("{} message(s)\n", sent.len())), "{stderr}");
    let lines: Vec<&str> = last.lines().skip(1).take_while(|l| *l != "---").collect();
    assert_eq!(lines.len(), sent.len(), "{stderr}");
    for (line, (role, text)) in lines.iter().zip(&sent) {
        let first = text.lines().next().unwrap_or_default();
        assert!(line.starts_with(&format!("{role}: {first}")), "{line} / {role}: {text}");
    }
    assert!(lines.iter().any(|l| l.contains(RECALL_HEADING)), "{stderr}");
}

/// What the SQLite store in `dir` holds: each file with its bytes, but the `-shm` index and
/// an empty WAL, which a read-only reader may leave behind and which hold no data.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| {
            let path = e.expect("dir entry").path();
            let bytes = std::fs::read(&path).expect("read");
            (path.display().to_string(), bytes)
        })
        .filter(|(path, bytes)| !(path.ends_with("-shm") || path.ends_with("-wal") && bytes.is_empty()))
        .collect();
    found.sort();
    found
}

/// After the seed over SQLite, `chatmem recall` prints the order message as recalled, with
/// its score and why, exactly as the server's `GET …/recall` over the same file; it writes
/// nothing.
#[tokio::test(flavor = "multi_thread")]
async fn chatmem_recall_prints_what_the_chat_recalled_as_the_server_does_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = sqlite(&dir);
    seed(&store, &[&SEED[..], &["--recall", "3"]].concat()).await;
    let before = files(dir.path());
    let recall = [
        "recall",
        "--conversation",
        SEED[1],
        "--k",
        "3",
        "--store",
        &store,
        QUESTION,
    ];
    let found = ok_json(&recall, "");
    let hits = found["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 1, "{found}");
    let hit = &hits[0];
    assert_eq!(
        (hit["seq"].as_u64(), hit["role"].as_str()),
        (Some(1), Some("user")),
        "{hit}"
    );
    assert_eq!(hit["content"], ORDER);
    assert_eq!(
        (hit["lexical_rank"].as_u64(), hit["outcome"].as_str()),
        (Some(1), Some("injected"))
    );
    assert!(hit["score"].as_f64().is_some_and(|s| s > 0.0), "{hit}");
    // The words of the question may come separately; the floor decides.
    let strict = [
        &recall[..7],
        &["--recall-min-relevance", "1", "LC202610060018", "能退吗？"],
    ]
    .concat();
    assert_eq!(ok_json(&strict, "")["hits"][0]["outcome"], "below_threshold");
    let after = files(dir.path());
    assert!(
        !after.is_empty() && after == before,
        "chatmem recall wrote to the store"
    );

    let server = Serve::start(&words(&format!("--store {store} --recall 3")), |_| {}).await;
    let api: Value = reqwest::Client::new()
        .get(format!("{}/v1/conversations/{}/recall", server.base, SEED[1]))
        .query(&[("q", QUESTION), ("k", "3")])
        .send()
        .await
        .expect("GET recall")
        .json()
        .await
        .expect("JSON");
    assert_eq!(api["hits"], found["hits"], "the server's answer: {api}");
}

#[test]
fn recall_of_a_conversation_that_does_not_exist_prints_no_hits_as_history_prints_nothing() {
    assert_eq!(
        ok_json(&words("history --conversation nobody --store memory:"), ""),
        json!([])
    );
    assert_eq!(
        ok_json(
            &words("recall --conversation nobody --k 3 --store memory: LC202610060018"),
            ""
        ),
        json!({"hits": []})
    );
    // An id the others refuse, refused the same way.
    fails(
        &["recall", "--conversation", "", "--k", "3", "--store", "memory:", "x"],
        "",
        "conversation id is empty",
    );
}

#[test]
fn a_bad_k_floor_or_budget_is_refused_naming_its_flag() {
    for k in ["0", "101", "x", "-1"] {
        fails(
            &["add", "--conversation", "c", "--store", "memory:", "--recall", k],
            "[]",
            "--recall <K>",
        );
        fails(
            &["recall", "--conversation", "c", "--store", "memory:", "--k", k, "q"],
            "",
            "--k <K>",
        );
    }
    fails(
        &words("add --conversation c --store memory: --recall 3 --recall-min-relevance 1.5"),
        "[]",
        "--recall-min-relevance",
    );
    fails(
        &words("add --conversation c --store memory: --recall 3 --recall-min-relevance -0.5"),
        "[]",
        "--recall-min-relevance",
    );
    fails(
        &words("add --conversation c --store memory: --recall 3 --recall-max-tokens 0"),
        "[]",
        "--recall-max-tokens",
    );
    // The floor and the budget mean nothing without --recall.
    fails(
        &words("add --conversation c --store memory: --recall-min-relevance 0.5"),
        "[]",
        "--recall <K>",
    );
    fails(
        &words("recall --conversation c --store memory: --k 3 --recall-min-relevance 2 q"),
        "",
        "--recall-min-relevance",
    );
    fails(&words("recall --conversation c --store memory: --k 3"), "", "<QUERY>");
    fails(&words("recall --conversation c --store memory: q"), "", "--k <K>");
}

/// `--recall` keeps what leaves the window: `--retention drop-evicted` with it is refused at
/// start by every command that takes it, in one line, before a store is created.
#[test]
fn recall_with_drop_evicted_is_refused_at_start_and_creates_no_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("never.db");
    let store = format!("sqlite:{}", path.display());
    let contradiction = ["--recall", "3", "--retention", "drop-evicted", "--store", &store];
    let said = "--recall searches the messages that left the window, so it keeps them: it cannot be combined with --retention drop-evicted";
    for command in [
        &["add", "--conversation", "c"][..],
        &["get", "--conversation", "c"],
        &["chat", "--conversation", "c", "--provider", "ollama"],
    ] {
        let args = [command, &contradiction[..]].concat();
        refused(&chatmem(&args, "[]"), &args, &[said]);
    }
    let out = serve_command("127.0.0.1:0", &contradiction)
        .stdin(Stdio::null())
        .output()
        .expect("run chatmem serve");
    refused(&out, &["serve"], &[said]);
    assert!(!path.exists(), "a refused start created {}", path.display());
}

/// `serve --recall` keeps what leaves the window without `--retention`, and its turns recall:
/// the prompt dry run sends the order message back just before the question.
#[tokio::test(flavor = "multi_thread")]
async fn serve_with_recall_keeps_evicted_messages_and_recalls_them_into_the_prompt() {
    let mut kept = Vec::new();
    let mut prompts = Vec::new();
    for extra in ["", "--recall 3"] {
        let args = [words("--store memory: --max-messages 2"), words(extra)].concat();
        let server = Serve::start(&args, |_| {}).await;
        let http = reqwest::Client::new();
        let conversation = format!("{}/v1/conversations/c", server.base);
        let body = json!({"messages": [
            {"role": "user", "content": ORDER}, {"role": "assistant", "content": "已为您催促发货。"},
            {"role": "user", "content": FILLER}, {"role": "assistant", "content": "不客气。"}
        ]});
        let r = http
            .post(format!("{conversation}/messages"))
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 200);
        let history: Value = http
            .get(format!("{conversation}/history"))
            .send()
            .await
            .expect("history")
            .json()
            .await
            .expect("JSON");
        kept.push(history["messages"].as_array().map(Vec::len));
        let prompt: Value = http
            .post(format!("{conversation}/prompt"))
            .json(&json!({"messages": [{"role": "user", "content": QUESTION}]}))
            .send()
            .await
            .expect("prompt")
            .json()
            .await
            .expect("JSON");
        prompts.push(prompt);
        let out = server.stop();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(kept, [Some(2), Some(4)], "without --recall, then with");
    assert_eq!(prompts[0]["recalled"]["seqs"], json!([]), "{}", prompts[0]);
    assert_eq!(prompts[1]["recalled"]["seqs"], json!([1]), "{}", prompts[1]);
    let messages = roles_and_texts(&prompts[1]);
    let n = messages.len();
    assert_eq!(messages[n - 1].1, QUESTION);
    assert!(
        messages[n - 2].1.starts_with(RECALL_HEADING) && messages[n - 2].1.contains(ORDER),
        "{messages:?}"
    );
}
