//! `chatmem facts` on an SQLite store in a temporary directory: each change's JSON, the
//! refusals, users kept apart, and `chatmem chat --user` sending the facts to a loopback
//! model (and never a removed one).

use chatmem::facts::FACTS_HEADING;
use chatmem_test::upstream::{MockUpstream, roles_and_texts, text};
use serde_json::{Value, json};

use crate::support::{chatmem, fails, ok_json, refused};

/// A temporary SQLite store: the directory (kept while the test runs) and the URL.
fn store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("facts.db").display());
    (dir, url)
}

/// `chatmem facts ACTION --user USER --store STORE rest…`, which must succeed; its JSON.
fn facts(action: &str, user: &str, store: &str, rest: &[&str]) -> Value {
    ok_json(
        &[&["facts", action, "--user", user, "--store", store][..], rest].concat(),
        "",
    )
}

/// The facts' texts in the order listed.
fn texts(listed: &Value) -> Vec<&str> {
    listed["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .map(|f| f["text"].as_str().expect("text"))
        .collect()
}

fn kinds(history: &Value) -> Vec<&str> {
    history["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|c| c["kind"].as_str().expect("kind"))
        .collect()
}

#[test]
fn add_list_edit_pin_unpin_history_rm_and_forget_round_trip() {
    let (_dir, s) = store();
    let berlin = facts("add", "ada", &s, &["--key", "home.city", "Lives", "in", "Berlin"]);
    assert_eq!(
        (&berlin["id"], &berlin["text"], &berlin["key"]),
        (&json!(1), &json!("Lives in Berlin"), &json!("home.city"))
    );
    assert_eq!((&berlin["sources"], &berlin["pinned"]), (&json!([]), &json!(false)));
    let mut keys: Vec<&str> = berlin.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "confirmed",
            "created",
            "id",
            "key",
            "pinned",
            "sources",
            "text",
            "updated"
        ]
    );
    let created = berlin["created"].as_str().expect("created");
    assert!(humantime::parse_rfc3339(created).is_ok(), "{created}");

    let nuts = facts("add", "ada", &s, &["Allergic to nuts"]);
    assert_eq!((&nuts["id"], &nuts["key"]), (&json!(2), &Value::Null));
    let listed = facts("list", "ada", &s, &[]);
    assert_eq!(listed["version"], 2);
    // Facts with a key come first, as a turn sends them.
    assert_eq!(texts(&listed), ["Lives in Berlin", "Allergic to nuts"]);

    let edited = facts(
        "edit",
        "ada",
        &s,
        &["2", "--text", "Allergic to peanuts", "--key", "allergy"],
    );
    assert_eq!(
        (&edited["text"], &edited["key"]),
        (&json!("Allergic to peanuts"), &json!("allergy"))
    );
    let unkeyed = facts("edit", "ada", &s, &["2", "--key", ""]);
    assert_eq!(unkeyed["key"], Value::Null);
    let pinned = facts("pin", "ada", &s, &["2"]);
    assert_eq!(pinned["pinned"], true);
    assert_eq!(
        texts(&facts("list", "ada", &s, &[])),
        ["Allergic to peanuts", "Lives in Berlin"]
    );
    assert_eq!(facts("unpin", "ada", &s, &["2"])["pinned"], false);

    let history = facts("history", "ada", &s, &["2"]);
    assert_eq!(kinds(&history), ["added", "edited", "edited", "pinned", "unpinned"]);
    let first = &history["history"][0];
    assert_eq!(
        (&first["fact"], &first["text"], &first["cause"]),
        (&json!(2), &json!("Allergic to nuts"), &json!({"by": "hand"}))
    );
    assert!(
        first["when"]
            .as_str()
            .is_some_and(|w| humantime::parse_rfc3339(w).is_ok()),
        "{first}"
    );

    // A new home city supersedes the old; removing it removes the old one and both histories.
    let hamburg = facts("add", "ada", &s, &["--key", "home.city", "Lives in Hamburg"]);
    assert_eq!(hamburg["id"], 3);
    assert_eq!(kinds(&facts("history", "ada", &s, &["1"])), ["added", "superseded"]);
    assert_eq!(facts("rm", "ada", &s, &["3"]), json!({"deleted": [1, 3]}));
    assert_eq!(texts(&facts("list", "ada", &s, &[])), ["Allergic to peanuts"]);
    fails(
        &["facts", "history", "--user", "ada", "--store", &s, "1"],
        "",
        "no fact 1",
    );

    let forget = chatmem(&["facts", "forget", "--user", "ada", "--store", &s], "");
    assert!(forget.status.success(), "{}", String::from_utf8_lossy(&forget.stderr));
    assert!(forget.stdout.is_empty() && forget.stderr.is_empty());
    let listed = facts("list", "ada", &s, &[]);
    assert_eq!(listed["facts"], json!([]), "{listed}");
    // Nothing left to forget: said on stderr, not a failure.
    let again = chatmem(&["facts", "forget", "--user", "ada", "--store", &s], "");
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to forget"));
}

#[test]
fn bad_inputs_are_refused_in_one_line() {
    let (_dir, s) = store();
    facts("add", "ada", &s, &["Allergic to nuts"]);
    let cases: [(&[&str], &[&str]); 8] = [
        (&["add", "--user", "", "x"], &["--user", "user id is empty"]),
        (&["list", "--user", "a\u{7}b"], &["--user", "control character"]),
        (&["add", "--user", "ada", " "], &["fact text is empty", "\"ada\""]),
        (&["add", "--user", "ada", "--key", "Home City", "x"], &["--key"]),
        (&["edit", "--user", "ada", "9", "--text", "x"], &["no fact has id 9"]),
        (&["edit", "--user", "ada", "1"], &["--text", "--key"]),
        (&["pin", "--user", "ada", "9"], &["no fact has id 9"]),
        (&["rm", "--user", "ada", "9"], &["no fact has id 9"]),
    ];
    for (args, needles) in cases {
        let args = [&["facts"][..], args, &["--store", &s]].concat();
        refused(&chatmem(&args, ""), &args, needles);
    }
    fails(&["facts", "pin", "--user", "ada", "--store", &s, "one"], "", "FACT");
    // A missing store is not created by a read.
    let (dir, _) = store();
    let missing = format!("sqlite:{}", dir.path().join("none.db").display());
    fails(
        &["facts", "list", "--user", "ada", "--store", &missing],
        "",
        "no SQLite store",
    );
    assert!(!dir.path().join("none.db").exists());
    // Nothing was changed by the refusals.
    assert_eq!(texts(&facts("list", "ada", &s, &[])), ["Allergic to nuts"]);
}

#[test]
fn two_users_never_see_each_others_facts() {
    let (_dir, s) = store();
    facts("add", "ada", &s, &["Allergic to nuts"]);
    facts("add", "bob", &s, &["Prefers email"]);
    assert_eq!(texts(&facts("list", "ada", &s, &[])), ["Allergic to nuts"]);
    assert_eq!(texts(&facts("list", "bob", &s, &[])), ["Prefers email"]);
    // Ids are per user: bob's fact 1 is not ada's.
    fails(
        &["facts", "rm", "--user", "carol", "--store", &s, "1"],
        "",
        "no fact has id 1",
    );
    facts("rm", "bob", &s, &["1"]);
    assert_eq!(texts(&facts("list", "ada", &s, &[])), ["Allergic to nuts"]);
    assert_eq!(facts("list", "bob", &s, &[])["facts"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_as_a_user_sends_their_facts_and_never_a_removed_one() {
    let (_dir, s) = store();
    facts("add", "ada", &s, &["Allergic to nuts"]);
    facts("add", "ada", &s, &["--key", "home.city", "Lives in Berlin"]);
    facts("add", "bob", &s, &["Prefers email"]);
    let server = MockUpstream::start(vec![text("Sorbet."), text("Fruit salad.")]).await;
    let args = [
        "--conversation",
        "c1",
        "--user",
        "ada",
        "--system",
        "Be brief.",
        "--show-memory",
    ];
    let first = crate::support::chat_piped(&server, &s, &args, "Dessert ideas?\n").await;
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&first.stdout), "Sorbet.\n");
    let sent = format!("{FACTS_HEADING}\n- Lives in Berlin\n- Allergic to nuts");
    // --show-memory prints what the call is sent, the facts message included (on one line).
    assert!(err.contains(&format!("user: {}", sent.replace('\n', "\\n"))), "{err}");

    let prompt = roles_and_texts(&server.requests()[0]);
    assert_eq!(
        prompt,
        [
            ("system".to_owned(), "Be brief.".to_owned()),
            ("user".to_owned(), sent),
            ("user".to_owned(), "Dessert ideas?".to_owned()),
        ]
    );
    // The facts are not stored with the conversation.
    let history = ok_json(&["history", "--conversation", "c1", "--store", &s], "");
    assert!(!history.to_string().contains("Allergic"), "{history}");

    facts("rm", "ada", &s, &["1"]);
    let second = crate::support::chat_piped(&server, &s, &args, "Another?\n").await;
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    let prompt = roles_and_texts(&server.requests()[1]);
    let all: String = prompt.iter().map(|(_, t)| t.as_str()).collect();
    assert!(!all.contains("Allergic to nuts"), "{prompt:?}");
    assert!(!all.contains("Prefers email"), "{prompt:?}");
    assert_eq!(prompt[1].1, format!("{FACTS_HEADING}\n- Lives in Berlin"));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_refuses_a_bad_user_id_before_calling_the_model() {
    let (_dir, s) = store();
    let server = MockUpstream::start(vec![text("never")]).await;
    let out = crate::support::chat_piped(&server, &s, &["--conversation", "c1", "--user", ""], "Hi\n").await;
    refused(&out, &["chat", "--user", ""], &["--user", "user id is empty"]);
    assert!(server.requests().is_empty());
}
