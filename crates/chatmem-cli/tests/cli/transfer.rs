//! `chatmem export` and `chatmem import`, run as a user would: a lossless round trip through
//! every store, refusal and replacement of existing conversations, malformed input.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{MYSQL, POSTGRES, REDIS, REDIS_CLUSTER, fails, ok};

fn sqlite(dir: &Path, name: &str) -> String {
    format!("sqlite:{}", dir.join(name).display())
}

/// What a user sees of conversation `id` in `store`: `get` and `history`.
fn views(store: &str, id: &str) -> (Vec<u8>, Vec<u8>) {
    (
        ok(&["get", "--store", store, "--conversation", id], b""),
        ok(&["history", "--store", store, "--conversation", id], b""),
    )
}

fn add(store: &str, id: &str, flags: &[&str], messages: &Value) {
    let mut args = vec!["add", "--store", store, "--conversation", id];
    args.extend_from_slice(flags);
    ok(&args, messages.to_string().as_bytes());
}

/// Conversations that exercise every stored field, named with `prefix`; returns their ids.
fn seed(store: &str, prefix: &str) -> Vec<String> {
    let aftersale: Value = serde_json::from_str(include_str!("../../../../examples/aftersale.json")).expect("example");
    let id = |name: &str| format!("{prefix}{name}");
    // Tool calls, Chinese text, a system message, reasoning; evicted messages kept as history.
    add(
        store,
        &id("aftersale-history"),
        &["--max-messages", "4", "--retention", "keep-history"],
        &aftersale,
    );
    // The same with evicted messages deleted: the first kept seq is above 1.
    add(store, &id("aftersale-dropped"), &["--max-messages", "4"], &aftersale);
    // Names, content parts, metadata, a failed tool result; a token window and a second
    // tokenizer, so that counts and counter names differ.
    let parts = json!([
        {"role": "system", "content": "用中文回答。"},
        {"role": "user", "name": "alice", "content": [
            {"type": "text", "text": "这张图里是什么？"},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png", "detail": "low"}}
        ], "metadata": {"source": "app"}},
        {"role": "assistant", "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "vision", "arguments": "{\"q\":\"图\"}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_9", "content": "timeout", "is_error": true},
        {"role": "assistant", "content": "看不清，请再发一次。"},
    ]);
    add(
        store,
        &id("parts"),
        &[
            "--max-tokens",
            "120",
            "--tokenizer",
            "heuristic",
            "--retention",
            "keep-history",
        ],
        &parts,
    );
    // Only a system message.
    add(
        store,
        &id("system-only"),
        &[],
        &json!([{"role": "system", "content": "只有规则"}]),
    );
    // 20,000 messages in two batches, most evicted but kept: more than one import commit.
    for half in 0..2 {
        let batch: Vec<Value> = (0..10_000)
            .map(|i| {
                let n = half * 10_000 + i;
                if n % 2 == 0 {
                    json!({"role": "user", "content": format!("第 {n} 条：订单 LC{n:012} 怎么样了？")})
                } else {
                    json!({"role": "assistant", "content": format!("reply {n}")})
                }
            })
            .collect();
        add(
            store,
            &id("long"),
            &[
                "--max-messages",
                "50",
                "--tokenizer",
                "heuristic",
                "--retention",
                "keep-history",
            ],
            &Value::from(batch),
        );
    }
    let mut ids: Vec<String> = ["aftersale-history", "aftersale-dropped", "parts", "system-only", "long"]
        .iter()
        .map(|n| id(n))
        .collect();
    ids.sort();
    ids
}

fn export_ids(store: &str, ids: &[String]) -> Vec<u8> {
    let mut args = vec!["export", "--store", store];
    for id in ids {
        args.extend(["--conversation", id.as_str()]);
    }
    ok(&args, b"")
}

/// A source SQLite file seeded by [`seed`], then each of `stores` and last a second SQLite
/// file, each hop by export and import: every export is the same bytes (seqs, token counts,
/// counters, system message, window start), and `get` and `history` print the same everywhere.
fn round_trip_through(stores: &[String]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = sqlite(dir.path(), "source.db");
    let prefix = format!("xfer-{}-{}-", std::process::id(), fastrand::u32(..));
    let ids = seed(&source, &prefix);
    let export = ok(&["export", "--store", &source], b"");
    let text = String::from_utf8(export.clone()).expect("UTF-8");
    assert_eq!(text.lines().count(), ids.len(), "one line per conversation");
    let long: Value = serde_json::from_str(text.lines().find(|l| l.contains("long")).expect("long")).expect("JSON");
    assert_eq!(long["messages"].as_array().expect("messages").len(), 20_000);
    assert!(long["window_start"].as_u64().expect("window_start") > 19_000);
    let expected: Vec<_> = ids.iter().map(|id| views(&source, id)).collect();
    let kept = ids
        .iter()
        .position(|id| id.ends_with("aftersale-history"))
        .expect("seeded");
    assert!(
        expected[kept].1.len() > expected[kept].0.len(),
        "some history is outside the window"
    );

    let mut stores = stores.to_vec();
    stores.push(sqlite(dir.path(), "target.db"));
    let mut from = source.clone();
    for to in &stores {
        ok(&["import", "--store", to], &export_ids(&from, &ids));
        let again = export_ids(to, &ids);
        assert!(again == export, "export from {to} differs from the source's");
        for (id, seen) in ids.iter().zip(&expected) {
            assert!(views(to, id) == *seen, "{id} in {to} reads differently");
        }
        from = to.clone();
    }
    // The whole of the last store, by `list`, is the whole of the first.
    assert!(ok(&["export", "--store", &from], b"") == export);
    for store in &stores {
        for id in &ids {
            ok(&["clear", "--store", store, "--conversation", id], b"");
        }
    }
}

/// SQLite → SQLite.
#[test]
fn a_round_trip_between_sqlite_files_is_lossless() {
    round_trip_through(&[]);
}

/// SQLite → PostgreSQL → MySQL → Redis → Redis Cluster → SQLite.
#[test]
#[ignore = "needs CHATMEM_TEST_PG_URL, CHATMEM_TEST_MYSQL_URL, CHATMEM_TEST_REDIS_URL and CHATMEM_TEST_REDIS_CLUSTER_URL"]
fn a_round_trip_through_every_store_is_lossless() {
    round_trip_through(&[POSTGRES.url(), MYSQL.url(), REDIS.url(), REDIS_CLUSTER.url()]);
}

#[test]
fn an_existing_conversation_is_refused_unless_replace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (sqlite(dir.path(), "a.db"), sqlite(dir.path(), "b.db"));
    add(&a, "c", &[], &json!([{"role": "user", "content": "从 A 来"}]));
    add(&b, "c", &[], &json!([{"role": "user", "content": "本来在 B"}]));
    let before = views(&b, "c");
    let export = ok(&["export", "--store", &a], b"");
    fails(
        &["import", "--store", &b],
        &export,
        "line 1: conversation \"c\" exists in the store; pass --replace to overwrite it",
    );
    assert!(views(&b, "c") == before, "a refused import changes nothing");
    ok(&["import", "--store", &b, "--replace"], &export);
    assert!(views(&b, "c") == views(&a, "c"));
    assert!(ok(&["export", "--store", &b], b"") == export);
}

#[test]
fn malformed_lines_name_the_line_and_field_and_write_nothing_of_theirs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (sqlite(dir.path(), "a.db"), sqlite(dir.path(), "b.db"));
    add(
        &a,
        "good",
        &[],
        &json!([{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}]),
    );
    let good = String::from_utf8(ok(&["export", "--store", &a], b"")).expect("UTF-8");
    let bad = |from: &str, to: &str| {
        assert!(good.contains(from), "{from}");
        good.replace(from, to).replace("\"good\"", "\"bad\"")
    };
    let cases = [
        (
            bad(r#""role":"assistant""#, r#""role":"wizard""#),
            "line 2: field `messages[1].message.role`: unknown variant `wizard`",
        ),
        (
            bad(r#""seq":2"#, r#""seq":5"#),
            "line 2: field `messages[1].seq`: expected 2",
        ),
        (
            bad(r#""format":1"#, r#""format":9"#),
            "line 2: field `format`: format 9 is not known",
        ),
        (bad(r#""messages":["#, r#""messages":{"#), "line 2: "),
        ("{not json}\n".to_string(), "line 2: key must be a string"),
    ];
    for (line, needle) in cases {
        let input = format!("{good}{line}");
        fails(&["import", "--store", &b], input.as_bytes(), needle);
        // The good line before it was imported; nothing of the bad one was.
        assert_eq!(
            String::from_utf8(ok(&["list", "--store", &b], b"")).expect("UTF-8"),
            "good\n"
        );
        ok(&["clear", "--store", &b, "--conversation", "good"], b"");
    }
    let mut not_utf8 = good.clone().into_bytes();
    not_utf8.extend_from_slice(b"{\"id\":\"\xff\"}\n");
    fails(&["import", "--store", &b], &not_utf8, "line 2: not UTF-8");
    // Blank lines and a byte-order mark are no conversations.
    ok(
        &["import", "--store", &b, "--replace"],
        format!("\u{feff}\n{good}\n\n").as_bytes(),
    );
    assert_eq!(
        String::from_utf8(ok(&["list", "--store", &b], b"")).expect("UTF-8"),
        "good\n"
    );
}

#[test]
fn files_in_and_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (sqlite(dir.path(), "a.db"), sqlite(dir.path(), "b.db"));
    add(&a, "c", &[], &json!([{"role": "user", "content": "u1"}]));
    let file = dir.path().join("out.jsonl");
    let file = file.to_str().expect("UTF-8 path");
    assert!(ok(&["export", "--store", &a, "--output", file], b"").is_empty());
    assert!(std::fs::read(file).expect("written") == ok(&["export", "--store", &a], b""));
    ok(&["import", "--store", &b, "--input", file], b"");
    assert!(views(&b, "c") == views(&a, "c"));

    // A failed export leaves neither the file nor its partial copy.
    let missing = dir.path().join("missing.jsonl");
    let missing = missing.to_str().expect("UTF-8 path");
    fails(
        &["export", "--store", &a, "--conversation", "nope", "-o", missing],
        b"",
        "no conversation \"nope\" in the store",
    );
    assert!(!Path::new(missing).exists());
    assert!(!Path::new(&format!("{missing}.partial")).exists());
    fails(&["import", "--store", &b, "-i", missing], b"", "opening");
}
