//! A user's facts in the inspector (`/ui/users/{user}/facts` and a fact's history), driven in
//! process: facts in the order a turn sends them, with links to the messages they were read
//! from and to their history; a supersede in the history as the API gives it; tenants, tokens
//! and hostile ids held as on the API's facts routes; fact text escaped; and, in headless
//! Chromium (as `ui_browser`), the list page's form, a delete with confirmation, a phone's width.

use std::sync::Arc;

use axum::http::StatusCode;
use chatmem::facts::{Cause, FACTS_HEADING, FactLimits, Facts, Shown, merge, parse_proposal};
use chatmem::store::FactsCommit;
use chatmem::{ChatMemory, ConversationId, InMemoryStore, Retention, Store, UserId, WindowPolicy};
use chatmem_server::{ServerConfig, app};
use chatmem_test::app::App;
use serde_json::json;

use crate::facts::NoFacts;
use crate::inspector::seed_messages;
use crate::ui::{READER_A, TOKEN_A, TOKEN_B, article, page, with_auth};

/// The inspector over `store` (history kept, a window of 4, facts sent with turns).
fn inspector(store: Arc<dyn Store>, config: ServerConfig) -> App {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(4))
        .retention(Retention::KeepHistory)
        .facts(Facts::new())
        .build()
        .expect("valid memory settings");
    App::new(app(memory, config))
}

/// What the facts model would commit after reading `conversation` (a stored key): `answer`,
/// its proposal, merged into the user's facts as an extraction is.
async fn extracted(
    store: &dyn Store,
    user: &str,
    conversation: &str,
    shown: std::ops::RangeInclusive<u64>,
    answer: &str,
) {
    let user = UserId::new(user).expect("a user id");
    let conversation = ConversationId::new(conversation).expect("a conversation id");
    let proposal = parse_proposal(answer, &Shown::new(conversation.clone(), shown), &FactLimits::default())
        .expect("a valid proposal");
    let loaded = store.load_facts(&user).await.expect("loaded");
    let changed = merge(
        &loaded.set,
        &proposal,
        &Cause::Extraction { conversation },
        1_800_000_000_000_000,
    );
    let commit = FactsCommit::new(&loaded, changed)
        .expect("a valid commit")
        .expect("a change");
    store.commit_facts(&user, commit).await.expect("committed");
}

/// A page as `token`'s bearer: its status and text, after checking it carries the pages' CSP.
/// The `<article>` of fact `id` on a facts page.
fn fact_article(html: &str, id: u64) -> &str {
    article(html, &format!("f{id}"))
}

/// Tenant a's user u42: "Lives in Berlin" read from message 1 of order-1, superseded by "Lives
/// in Hamburg" read from message 3; "Allergic to nuts" added by hand and pinned.
async fn seeded() -> App {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let server = inspector(store.clone(), with_auth());
    let writer = server.as_bearer(TOKEN_A);
    let seed = json!({ "messages": seed_messages() });
    let r = writer.post_json("/v1/conversations/order-1/messages", &seed).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let berlin = r#"{"facts": [{"text": "Lives in Berlin", "key": "home.city", "sources": [1]}]}"#;
    extracted(store.as_ref(), "a/u42", "a/order-1", 1..=2, berlin).await;
    let hamburg = r#"{"facts": [{"text": "Lives in Hamburg", "key": "home.city", "sources": [3]}]}"#;
    extracted(store.as_ref(), "a/u42", "a/order-1", 3..=4, hamburg).await;
    let nuts = writer
        .post_json("/v1/users/u42/facts", &json!({"text": "Allergic to nuts"}))
        .await;
    assert_eq!(nuts.status, StatusCode::CREATED, "{}", nuts.text());
    assert_eq!(nuts.json()["id"], 3);
    let pinned = writer
        .send_json(
            axum::http::Method::PATCH,
            "/v1/users/u42/facts/3",
            &json!({"pinned": true}),
        )
        .await;
    assert_eq!(pinned.status, StatusCode::OK, "{}", pinned.text());
    server
}

#[tokio::test]
async fn a_users_facts_are_listed_as_sent_with_links_to_their_messages_and_history() {
    let server = seeded().await;
    let (status, html) = page(&server, "/ui/users/u42/facts", Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    // Current facts only, pinned first: as the API lists them.
    let listed = server.as_bearer(TOKEN_A).get("/v1/users/u42/facts").await.json();
    let ids: Vec<u64> = listed["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .filter_map(|f| f["id"].as_u64())
        .collect();
    assert_eq!(ids, [3, 2]);
    let at = |id: u64| html.find(&format!("id=\"f{id}\"")).expect("listed");
    assert!(at(3) < at(2), "the page's order is the API's");
    assert!(
        !html.contains("id=\"f1\"") && !html.contains("Lives in Berlin"),
        "superseded: not current"
    );
    // Each fact with its text, key, pin, times and sources.
    let hamburg = fact_article(&html, 2);
    assert!(hamburg.contains("Lives in Hamburg"), "{hamburg}");
    assert!(hamburg.contains("key <code>home.city</code>"), "{hamburg}");
    assert!(
        hamburg.contains("<dt>Created</dt><dd>2027-01-15T08:00:00Z</dd>"),
        "{hamburg}"
    );
    assert!(
        hamburg.contains("href=\"/ui/conversations/order-1?from=2#m3\""),
        "a link to the message it was read from: {hamburg}"
    );
    assert!(hamburg.contains("href=\"/ui/users/u42/facts/2/history\""), "{hamburg}");
    let nuts = fact_article(&html, 3);
    assert!(
        nuts.contains("class=\"fact pinned\"") && nuts.contains("Allergic to nuts"),
        "{nuts}"
    );
    assert!(nuts.contains("Read from no message (added by hand)."), "{nuts}");
    // The message a turn sends them in, in the same order.
    assert!(
        html.contains(&format!("{FACTS_HEADING}\n- Allergic to nuts\n- Lives in Hamburg")),
        "{html}"
    );
    // The link lands on the message: the conversation page from there holds its anchor.
    let (status, conversation) = page(&server, "/ui/conversations/order-1?from=2", Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(conversation.contains("id=\"m3\""), "the source's anchor");
    // A writer may delete a fact from the page; a read-only token sees the page without it.
    assert!(
        hamburg.contains("data-delete-fact=\"/ui/users/u42/facts/2\""),
        "{hamburg}"
    );
    let (status, read_only) = page(&server, "/ui/users/u42/facts", Some(READER_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(read_only.contains("Lives in Hamburg") && !read_only.contains("data-delete-fact"));
}

#[tokio::test]
async fn a_facts_history_shows_the_supersede_as_the_api_gives_it() {
    let server = seeded().await;
    let (status, html) = page(&server, "/ui/users/u42/facts/1/history", Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let api = server
        .as_bearer(TOKEN_A)
        .get("/v1/users/u42/facts/1/history")
        .await
        .json();
    let kinds: Vec<&str> = api["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|c| c["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["added", "superseded"]);
    let rows: Vec<&str> = html
        .split("<tr class=\"change ")
        .skip(1)
        .filter_map(|row| row.split('"').next())
        .collect();
    assert_eq!(rows, kinds, "the page's entries are the API's");
    let superseded = &html[html.find("<tr class=\"change superseded\"").expect("the supersede")..];
    let superseded = &superseded[..superseded.find("</tr>").expect("its end")];
    assert!(superseded.contains("Lives in Berlin"), "{superseded}");
    assert!(
        superseded.contains("replaced by <a href=\"/ui/users/u42/facts/2/history\">#2</a>"),
        "{superseded}"
    );
    assert!(superseded.contains("Lives in Hamburg"), "the text now: {superseded}");
    assert!(
        superseded.contains("read from <a href=\"/ui/conversations/order-1\">"),
        "the cause names the tenant's conversation id: {superseded}"
    );
    assert!(html.contains("No longer current"));
    // The newer fact's history names the one it replaced.
    let (status, newer) = page(&server, "/ui/users/u42/facts/2/history", Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        newer.contains("replaces <a href=\"/ui/users/u42/facts/1/history\">#1</a>"),
        "{newer}"
    );
    assert!(
        newer.contains("Current: <span class=\"text\">Lives in Hamburg</span>"),
        "{newer}"
    );
    // An edit shows the text before and after.
    let edited = server
        .as_bearer(TOKEN_A)
        .send_json(
            axum::http::Method::PATCH,
            "/v1/users/u42/facts/2",
            &json!({"text": "Lives in Hamburg-Altona"}),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text());
    let (_, newer) = page(&server, "/ui/users/u42/facts/2/history", Some(TOKEN_A)).await;
    let edit = &newer[newer.find("<tr class=\"change edited\"").expect("the edit")..];
    assert!(
        edit.contains("old: <span class=\"text old\">Lives in Hamburg</span><br>new: <span class=\"text\">Lives in Hamburg-Altona</span>"),
        "{edit}"
    );
    // A fact never made is 404, as on the API.
    let (status, missing) = page(&server, "/ui/users/u42/facts/99/history", Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(missing.contains("no fact 99"), "{missing}");
}

#[tokio::test]
async fn another_tenant_sees_none_of_the_facts_and_tokens_hold() {
    let server = seeded().await;
    let (status, html) = page(&server, "/ui/users/u42/facts", Some(TOKEN_B)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("No facts are kept for this user."), "{html}");
    assert!(!html.contains("Hamburg") && !html.contains("nuts") && !html.contains("order-1"));
    let (status, html) = page(&server, "/ui/users/u42/facts/2/history", Some(TOKEN_B)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!html.contains("Hamburg"));
    // Without a token: the sign-in form.
    let (status, html) = page(&server, "/ui/users/u42/facts", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(html.contains("id=\"signin\"") && !html.contains("Hamburg"));
    // Deleting from the page: not B's to delete, not a reader's; a writer's.
    let url = "/ui/users/u42/facts/2";
    assert_eq!(
        server.as_bearer(TOKEN_B).delete(url).await.status,
        StatusCode::NOT_FOUND
    );
    let refused = server.as_bearer(READER_A).delete(url).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.json()["error"]["code"], "read_only_token");
    assert_eq!(
        server.as_bearer(TOKEN_A).delete(url).await.status,
        StatusCode::NO_CONTENT
    );
    let (_, html) = page(&server, "/ui/users/u42/facts", Some(TOKEN_A)).await;
    assert!(!html.contains("Lives in Hamburg") && html.contains("Allergic to nuts"));
    // The list page's form opens a user's facts by id, encoded as one segment.
    let (_, list) = page(&server, "/ui", Some(TOKEN_A)).await;
    assert!(list.contains("action=\"/ui/users\""), "{list}");
    let opened = server.as_bearer(TOKEN_A).get("/ui/users?user=u42").await;
    assert_eq!(opened.status, StatusCode::SEE_OTHER);
    assert_eq!(opened.header("location"), Some("/ui/users/u42/facts"));
    let opened = server.as_bearer(TOKEN_A).get("/ui/users?user=a%2Fb%20c").await;
    assert_eq!(opened.header("location"), Some("/ui/users/a%2Fb%20c/facts"));
    assert_eq!(server.get("/ui/users?user=u42").await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn hostile_ids_get_the_error_page_naming_them() {
    let server = inspector(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let long = format!("/ui/users/{}/facts", "u".repeat(300));
    for (url, status, param) in [
        ("/ui/users/a%0Ab/facts", StatusCode::BAD_REQUEST, "user"),
        ("/ui/users/a%E2%80%8Bb/facts", StatusCode::BAD_REQUEST, "user"),
        ("/ui/users/%FF/facts", StatusCode::BAD_REQUEST, "user"),
        (long.as_str(), StatusCode::PAYLOAD_TOO_LARGE, "user"),
        ("/ui/users/a%0Ab/facts/1/history", StatusCode::BAD_REQUEST, "user"),
        ("/ui/users/u/facts/0/history", StatusCode::BAD_REQUEST, "fact"),
        ("/ui/users/u/facts/1e3/history", StatusCode::BAD_REQUEST, "fact"),
        ("/ui/users?user=a%0Ab", StatusCode::BAD_REQUEST, "user"),
        ("/ui/users?user=", StatusCode::BAD_REQUEST, "user"),
    ] {
        let r = server.get(url).await;
        assert_eq!(r.status, status, "{url}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"), "{url}");
        let request_id = r.header("x-request-id").expect("named").to_owned();
        let html = r.text();
        assert!(
            html.contains(&format!("Parameter <code class=\"param\">{param}</code>")),
            "{url}: {html}"
        );
        assert!(html.contains(&request_id), "{url}");
    }
    // A delete of a hostile id is the API's error JSON (the page's script shows it).
    let r = server.delete("/ui/users/a%0Ab/facts/1").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["error"]["param"], "user");
}

#[tokio::test]
async fn fact_text_and_user_ids_are_escaped() {
    let server = inspector(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let user = "%3Cb%3Eu%3C%2Fb%3E";
    let added = server
        .post_json(&format!("/v1/users/{user}/facts"), &json!({"text": hostile}))
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text());
    let id = added.json()["id"].as_u64().expect("an id");
    for url in [
        format!("/ui/users/{user}/facts"),
        format!("/ui/users/{user}/facts/{id}/history"),
    ] {
        let (status, html) = page(&server, &url, None).await;
        assert_eq!(status, StatusCode::OK, "{url}: {html}");
        assert!(
            !html.contains("<script>alert") && !html.contains("<img src=x") && !html.contains("<b>u</b>"),
            "{url}: {html}"
        );
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{url}: the text is shown as text"
        );
        assert!(
            html.contains("&lt;b&gt;u&lt;/b&gt;"),
            "{url}: the user id is shown as text"
        );
        assert!(
            html.contains(&format!("/ui/users/{user}/facts")),
            "{url}: links encode the id"
        );
        // The only script is the page's own.
        assert_eq!(html.matches("<script").count(), 1, "{url}");
    }
}

#[tokio::test]
async fn a_store_that_keeps_no_facts_is_answered_clearly_on_the_page() {
    let store: Arc<dyn Store> = Arc::new(NoFacts(InMemoryStore::new()));
    let server = App::new(app(ChatMemory::new(store), ServerConfig::default()));
    for url in ["/ui/users/u42/facts", "/ui/users/u42/facts/1/history"] {
        let (status, html) = page(&server, url, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}");
        assert!(html.contains("store keeps no users"), "{url}: {html}");
    }
}

/// A server that sends no facts says so, and still shows what is kept.
#[tokio::test]
async fn a_server_that_sends_no_facts_says_so() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let server = App::new(app(ChatMemory::new(store), ServerConfig::default()));
    let added = server
        .post_json("/v1/users/u42/facts", &json!({"text": "Allergic to nuts"}))
        .await;
    assert_eq!(added.status, StatusCode::CREATED);
    let (status, html) = page(&server, "/ui/users/u42/facts", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("This server sends no facts with its turns"), "{html}");
    assert!(html.contains("Allergic to nuts") && !html.contains(FACTS_HEADING));
}

/// In headless Chromium: the list page's form opens a user's facts, the page fits a phone,
/// and a writer deletes a fact after confirming (the page's script, a `DELETE`).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_CHROMEDRIVER"]
async fn in_a_browser_the_form_opens_the_facts_and_a_fact_is_deleted_with_confirmation() {
    use crate::ui_browser::{browser, chromedriver, click_and_confirm, fits_a_phone, screenshot, start_driver};
    use fantoccini::Locator;

    let path = chromedriver();
    let driver = start_driver(&path).await;
    let memory = ChatMemory::builder(Arc::new(InMemoryStore::new()) as Arc<dyn Store>)
        .facts(Facts::new())
        .build()
        .expect("valid memory settings");
    let base = chatmem_test::loopback::serve(app(memory, ServerConfig::default()))
        .await
        .url();
    let http = reqwest::Client::new();
    for text in [
        "Allergic to nuts",
        "Prefers deliveries after 18:00 on weekdays, never on Sundays",
    ] {
        let r = http
            .post(format!("{base}/v1/users/u42/facts"))
            .json(&json!({ "text": text }))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), reqwest::StatusCode::CREATED);
    }

    let client = browser(&driver, false).await;
    client.goto(&format!("{base}/ui")).await.expect("the list");
    let field = client.find(Locator::Css("#user")).await.expect("the user field");
    field.send_keys("u42").await.expect("typed");
    field.send_keys("\u{E007}").await.expect("submitted"); // Enter
    client
        .wait()
        .for_element(Locator::Css("article.fact"))
        .await
        .expect("the facts page");
    let heading = client.find(Locator::Css("h1")).await.expect("a heading");
    assert_eq!(heading.text().await.expect("text"), "Facts of user u42");
    screenshot(&client, "facts-1280.png").await;
    let question = click_and_confirm(&client, "#f1 [data-delete-fact]").await;
    assert!(question.contains("#1"), "{question}");
    // The page reloads without it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while client.find(Locator::Css("#f1")).await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "the fact is still shown");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let listed: serde_json::Value = http
        .get(format!("{base}/v1/users/u42/facts"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["facts"].as_array().map(Vec::len), Some(1), "{listed}");
    client.close().await.expect("closed");

    fits_a_phone(
        &driver,
        &[
            (format!("{base}/ui/users/u42/facts"), "facts-375.png"),
            (format!("{base}/ui/users/u42/facts/2/history"), "fact-history-375.png"),
        ],
    )
    .await;
}
