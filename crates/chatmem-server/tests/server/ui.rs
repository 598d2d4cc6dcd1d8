//! The memory inspector (`/ui`) over real HTTP: what a page shows of a conversation
//! (the window marked, the budget, the prompt), that message text is escaped, that tenants
//! and read-only tokens hold on the pages as on the API, and the sign-in cookie.

use crate::inspector::{seed_messages, serve, serve_memory};
use crate::requests::get_json;

use std::sync::Arc;

use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
use chatmem_server::{Auth, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

const TOKEN_A: &str = "token-of-team-a-0001";
const TOKEN_B: &str = "token-of-team-b-0001";
const READER_A: &str = "reader-of-team-a-001";

fn with_auth() -> ServerConfig {
    let toml = format!(
        "[[token]]\ntoken = \"{TOKEN_A}\"\ntenant = \"a\"\n\n[[token]]\ntoken = \"{TOKEN_B}\"\ntenant = \"b\"\n\n\
         [[token]]\ntoken = \"{READER_A}\"\ntenant = \"a\"\nwrite = false\n"
    );
    ServerConfig {
        auth: Some(Auth::from_toml(&toml).expect("a valid auth file")),
        ..ServerConfig::default()
    }
}

/// The seed 003 conversation (examples/aftersale.json), posted to `id`.
async fn seed(http: &reqwest::Client, base: &str, id: &str, token: Option<&str>) {
    let messages = seed_messages();
    let mut request = http
        .post(format!("{base}/v1/conversations/{id}/messages"))
        .json(&json!({ "messages": messages }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let r = request.send().await.expect("post");
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap_or_default());
}

async fn page(http: &reqwest::Client, url: &str, token: Option<&str>) -> (StatusCode, String) {
    let mut request = http.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let r = request.send().await.expect("get");
    let status = r.status();
    let csp = r
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{url}: CSP {csp:?}"
    );
    (status, r.text().await.expect("a body"))
}

/// The `<article>` of message `anchor` (`m3`, `system`): its opening tag and content.
fn article<'a>(html: &'a str, anchor: &str) -> &'a str {
    let at = html
        .find(&format!("id=\"{anchor}\""))
        .unwrap_or_else(|| panic!("no message {anchor}"));
    let start = html[..at].rfind("<article").expect("an article");
    let end = at + html[at..].find("</article>").expect("its end");
    &html[start..end]
}

#[tokio::test]
async fn the_page_marks_the_window_the_api_returns_and_dims_the_order_number_turn() {
    let base = serve(4, ServerConfig::default()).await;
    let http = reqwest::Client::new();
    seed(&http, &base, "seed-003", None).await;
    let window = get_json(&http, format!("{base}/v1/conversations/seed-003/messages")).await;
    let window = window["messages"].as_array().expect("messages").clone();

    let (status, html) = page(&http, &format!("{base}/ui/conversations/seed-003"), None).await;
    assert_eq!(status, StatusCode::OK);
    // The order-number turn (#3) left a window of 4; the last exchange is in it.
    assert!(
        article(&html, "m3").contains("class=\"msg user evicted\""),
        "{}",
        article(&html, "m3")
    );
    assert!(article(&html, "m3").contains("LC202610060018"));
    let in_window = html.matches("in-window\" id=\"m").count();
    assert_eq!(
        in_window + 1,
        window.len(),
        "the page's window is the API's (system message aside)"
    );
    // The budget bar counts what the API returns.
    assert!(
        html.contains(&format!("<strong>{} / 4 messages</strong>", window.len())),
        "budget"
    );
    // The system message is pinned, the reasoning folded and marked.
    assert!(article(&html, "system").contains("policy-2026.11"));
    assert!(html.contains("<details class=\"reasoning\"><summary>Reasoning, never sent to the model</summary>"));
    // The prompt is the window, as the OpenAI door sends it: no reasoning in it.
    let prompt = &html[html.find("id=\"prompt-json\"").expect("the prompt")..];
    let prompt = &prompt[..prompt.find("</pre>").expect("its end")];
    assert!(!prompt.contains("reasoning"), "{prompt}");
    assert_eq!(prompt.matches("&quot;role&quot;").count(), window.len());
    // The call and its result are one unit.
    let unit = &html[html.find("<section class=\"unit\"").expect("a tool unit")..];
    assert!(unit[..unit.find("</section>").expect("end")].contains("result of call <code>call_1</code>"));

    let (status, list) = page(&http, &format!("{base}/ui"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains("href=\"/ui/conversations/seed-003\""));
}

#[tokio::test]
async fn message_text_is_escaped_everywhere_it_is_shown() {
    let base = serve(20, ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let id = "<b>id</b>";
    let r = http
        .post(format!("{base}/v1/conversations/%3Cb%3Eid%3C%2Fb%3E/messages"))
        .json(&json!({"messages": [
            {"role": "system", "content": hostile},
            {"role": "user", "content": hostile, "name": "x\"onmouseover=\"alert(3)"},
            {"role": "assistant", "content": "ok", "reasoning_content": hostile},
        ]}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    for url in [
        format!("{base}/ui"),
        format!("{base}/ui/conversations/%3Cb%3Eid%3C%2Fb%3E"),
        format!("{base}/ui?prefix=%3Cb%3E"),
    ] {
        let (status, html) = page(&http, &url, None).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        assert!(
            !html.contains("<script>alert") && !html.contains("<img src=x"),
            "{url}: {html}"
        );
        assert!(!html.contains(id) && !html.contains("\"onmouseover"), "{url}");
        assert!(html.contains("&lt;b&gt;id&lt;/b&gt;"), "{url}: the id is shown as text");
    }
    let (_, html) = page(&http, &format!("{base}/ui/conversations/%3Cb%3Eid%3C%2Fb%3E"), None).await;
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The only scripts are the page's own.
    assert_eq!(html.matches("<script").count(), 1);
}

#[tokio::test]
async fn tenants_and_read_only_tokens_hold_on_the_pages() {
    let base = serve(20, with_auth()).await;
    let http = reqwest::Client::new();
    seed(&http, &base, "order-1", Some(TOKEN_A)).await;
    let url = format!("{base}/ui/conversations/order-1");

    let (status, html) = page(&http, &url, Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("data-delete=\"/ui/conversations/order-1\""),
        "a writer may delete"
    );
    // Tenant B cannot open A's page: it is not there for B.
    let (status, html) = page(&http, &url, Some(TOKEN_B)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!html.contains("LC202610060018"));
    let (_, list) = page(&http, &format!("{base}/ui"), Some(TOKEN_B)).await;
    assert!(!list.contains("order-1"), "B's list holds none of A's");
    // Without a token: the sign-in form, 401.
    let (status, html) = page(&http, &url, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(html.contains("id=\"signin\"") && !html.contains("LC202610060018"));

    // A read-only token sees the page, without the button, and cannot delete or write.
    let (status, html) = page(&http, &url, Some(READER_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("LC202610060018") && !html.contains("data-delete"));
    let r = http.delete(&url).bearer_auth(READER_A).send().await.expect("delete");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await.expect("the error shape");
    assert_eq!(body["error"]["code"], "read_only_token");
    for (method, path) in [
        (reqwest::Method::DELETE, "/v1/conversations/order-1"),
        (reqwest::Method::POST, "/v1/conversations/order-1/messages"),
    ] {
        let r = http
            .request(method.clone(), format!("{base}{path}"))
            .bearer_auth(READER_A)
            .json(&json!({"messages": [{"role": "user", "content": "x"}]}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{method} {path}");
    }
    // B cannot delete A's conversation through the page either; A can.
    let r = http.delete(&url).bearer_auth(TOKEN_B).send().await.expect("delete");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = http.delete(&url).bearer_auth(TOKEN_A).send().await.expect("delete");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(page(&http, &url, Some(TOKEN_A)).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie_that_opens_the_pages() {
    let base = serve(20, with_auth()).await;
    let http = reqwest::Client::new();
    seed(&http, &base, "order-1", Some(TOKEN_A)).await;

    let r = http
        .post(format!("{base}/ui/sign-in"))
        .json(&json!({"token": "not-a-token-of-ours"}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());

    let r = http
        .post(format!("{base}/ui/sign-in"))
        .json(&json!({"token": TOKEN_A}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a cookie")
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let pair = cookie.split(';').next().expect("name=value");
    let r = http
        .get(format!("{base}/ui/conversations/order-1"))
        .header("cookie", pair)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), StatusCode::OK);
    // The cookie opens the pages only, not the API.
    let r = http
        .get(format!("{base}/v1/conversations/order-1/messages"))
        .header("cookie", pair)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A sign-in posted as a form (no preflight) is refused by the edge rules.
    let r = http
        .post(format!("{base}/ui/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN_A}"))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let r = http
        .post(format!("{base}/ui/sign-out"))
        .json(&json!({}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let cleared = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
}

#[tokio::test]
async fn a_long_history_is_paged_and_the_list_filters_by_prefix() {
    let base = serve(6, ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let turns: Vec<Value> = (1..=1200)
        .map(|i| json!({"role": if i % 2 == 1 { "user" } else { "assistant" }, "content": format!("m{i}")}))
        .collect();
    for chunk in turns.chunks(600) {
        let r = http
            .post(format!("{base}/v1/conversations/long/messages"))
            .json(&json!({ "messages": chunk }))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), StatusCode::OK);
    }
    let (_, html) = page(&http, &format!("{base}/ui/conversations/long"), None).await;
    // The last page by default: the newest 500, the window among them, a link to earlier.
    assert!(html.contains("id=\"m1200\"") && html.contains("id=\"m701\"") && !html.contains("id=\"m700\""));
    assert!(
        html.contains("href=\"/ui/conversations/long?from=200\""),
        "the earlier page"
    );
    let (_, first) = page(&http, &format!("{base}/ui/conversations/long?from=0"), None).await;
    assert!(first.contains("id=\"m1\"") && first.contains("id=\"m500\"") && !first.contains("id=\"m501\""));
    assert!(
        first.contains("href=\"/ui/conversations/long?from=500\""),
        "the later page"
    );

    for id in ["long-2", "lo", "other"] {
        seed(&http, &base, id, None).await;
    }
    let (_, list) = page(&http, &format!("{base}/ui?prefix=lo"), None).await;
    for (id, shown) in [("lo", true), ("long", true), ("long-2", true), ("other", false)] {
        assert_eq!(
            list.contains(&format!("href=\"/ui/conversations/{id}\"")),
            shown,
            "{id}"
        );
    }
}

#[tokio::test]
async fn the_list_is_newest_first_with_last_update_and_expiry() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(20))
        .ttl(std::time::Duration::from_secs(3600))
        .build()
        .expect("valid memory settings");
    let base = serve_memory(memory, with_auth()).await;
    let http = reqwest::Client::new();
    for id in ["x", "y", "z", "x"] {
        seed(&http, &base, id, Some(TOKEN_A)).await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    seed(&http, &base, "w", Some(TOKEN_B)).await;
    let (status, list) = page(&http, &format!("{base}/ui"), Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK);
    let at = |id: &str| {
        list.find(&format!("href=\"/ui/conversations/{id}\""))
            .unwrap_or_else(|| panic!("{id} listed"))
    };
    assert!(at("x") < at("z") && at("z") < at("y"), "newest first: x, z, y");
    assert!(!list.contains("/ui/conversations/w"), "B's conversation is not A's");
    let cell = "data-label=\"Last update\">";
    let at = list.find(cell).expect("a last update") + cell.len();
    let shown = &list[at..at + list[at..].find('<').expect("its end")];
    let when = humantime::parse_rfc3339(shown).unwrap_or_else(|e| panic!("{shown:?}: {e}"));
    let age = std::time::SystemTime::now().duration_since(when).unwrap_or_default();
    assert!(
        age < std::time::Duration::from_secs(60),
        "x was written just now, not at {shown}"
    );
    assert_eq!(
        list.matches("data-label=\"Expires\">in 59m").count(),
        3,
        "an hour's TTL: {list}"
    );

    // A page at a time: the cursor holds the client's id, never the tenant's key.
    let page_one = {
        let mut rows = Vec::new();
        let mut url = format!("{base}/ui");
        loop {
            let (_, html) = page(&http, &url, Some(TOKEN_A)).await;
            assert!(
                !html.contains("a%2F") && !html.contains("cursor=a/"),
                "no tenant key in {html}"
            );
            rows.extend(
                ["x", "y", "z"]
                    .into_iter()
                    .filter(|id| html.contains(&format!("conversations/{id}\""))),
            );
            let Some(at) = html.find("rel=\"next\" href=\"") else {
                break;
            };
            let rest = &html[at + "rel=\"next\" href=\"".len()..];
            url = format!("{base}{}", rest[..rest.find('"').expect("end")].replace("&amp;", "&"));
        }
        rows
    };
    assert_eq!(page_one.len(), 3);
    let r = http
        .get(format!("{base}/ui?cursor=not-a-cursor"))
        .bearer_auth(TOKEN_A)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}
