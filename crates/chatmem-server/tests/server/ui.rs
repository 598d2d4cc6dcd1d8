//! The memory inspector (`/ui`), driven in process: what a page shows of a conversation
//! (the window marked, the budget, the prompt), that message text is escaped, that tenants
//! and read-only tokens hold on the pages as on the API, and the sign-in cookie.

use crate::inspector::{memory, seed_messages};

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
use chatmem_server::{Auth, ServerConfig, app};
use chatmem_test::app::App;
use serde_json::{Value, json};

pub(crate) const TOKEN_A: &str = "token-of-team-a-0001";
pub(crate) const TOKEN_B: &str = "token-of-team-b-0001";
pub(crate) const READER_A: &str = "reader-of-team-a-001";

/// Tenants a (a writer and a reader) and b.
pub(crate) fn with_auth() -> ServerConfig {
    let toml = format!(
        "[[token]]\ntoken = \"{TOKEN_A}\"\ntenant = \"a\"\n\n[[token]]\ntoken = \"{TOKEN_B}\"\ntenant = \"b\"\n\n\
         [[token]]\ntoken = \"{READER_A}\"\ntenant = \"a\"\nwrite = false\n"
    );
    ServerConfig {
        auth: Some(Auth::from_toml(&toml).expect("a valid auth file")),
        ..ServerConfig::default()
    }
}

/// The inspector over a memory keeping history with a window of `max_messages`.
fn inspector(max_messages: usize, config: ServerConfig) -> App {
    App::new(app(memory(max_messages), config))
}

/// `server` as the bearer of `token`, or as it is without one.
fn as_token(server: &App, token: Option<&str>) -> App {
    token.map_or_else(|| server.clone(), |token| server.as_bearer(token))
}

/// The seed 003 conversation (examples/aftersale.json), posted to `id`.
async fn seed(server: &App, id: &str, token: Option<&str>) {
    let body = json!({ "messages": seed_messages() });
    let r = as_token(server, token)
        .post_json(&format!("/v1/conversations/{id}/messages"), &body)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// An inspector page, as `token` (or none): an HTML page under the inspector's CSP.
pub(crate) async fn page(server: &App, url: &str, token: Option<&str>) -> (StatusCode, String) {
    let r = as_token(server, token).get(url).await;
    let csp = r.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{url}: CSP {csp:?}"
    );
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"), "{url}");
    (r.status, r.text())
}

/// The `<article>` whose id is `anchor` (a message's `m3` or `system`, a fact's `f2`): its
/// opening tag and content.
pub(crate) fn article<'a>(html: &'a str, anchor: &str) -> &'a str {
    let at = html
        .find(&format!("id=\"{anchor}\""))
        .unwrap_or_else(|| panic!("no article {anchor}: {html}"));
    let start = html[..at].rfind("<article").expect("an article");
    let end = at + html[at..].find("</article>").expect("its end");
    &html[start..end]
}

#[tokio::test]
async fn the_page_marks_the_window_the_api_returns_and_dims_the_order_number_turn() {
    let server = inspector(4, ServerConfig::default());
    seed(&server, "seed-003", None).await;
    let window = server.get("/v1/conversations/seed-003/messages").await.json();
    let window = window["messages"].as_array().expect("messages").clone();

    let (status, html) = page(&server, "/ui/conversations/seed-003", None).await;
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

    let (status, list) = page(&server, "/ui", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains("href=\"/ui/conversations/seed-003\""));
}

#[tokio::test]
async fn message_text_is_escaped_everywhere_it_is_shown() {
    let server = inspector(20, ServerConfig::default());
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let id = "<b>id</b>";
    let body = json!({"messages": [
        {"role": "system", "content": hostile},
        {"role": "user", "content": hostile, "name": "x\"onmouseover=\"alert(3)"},
        {"role": "assistant", "content": "ok", "reasoning_content": hostile},
    ]});
    let r = server
        .post_json("/v1/conversations/%3Cb%3Eid%3C%2Fb%3E/messages", &body)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    for url in ["/ui", "/ui/conversations/%3Cb%3Eid%3C%2Fb%3E", "/ui?prefix=%3Cb%3E"] {
        let (status, html) = page(&server, url, None).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        assert!(
            !html.contains("<script>alert") && !html.contains("<img src=x"),
            "{url}: {html}"
        );
        assert!(!html.contains(id) && !html.contains("\"onmouseover"), "{url}");
        assert!(html.contains("&lt;b&gt;id&lt;/b&gt;"), "{url}: the id is shown as text");
    }
    let (_, html) = page(&server, "/ui/conversations/%3Cb%3Eid%3C%2Fb%3E", None).await;
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The only scripts are the page's own.
    assert_eq!(html.matches("<script").count(), 1);
}

#[tokio::test]
async fn tenants_and_read_only_tokens_hold_on_the_pages() {
    let server = inspector(20, with_auth());
    seed(&server, "order-1", Some(TOKEN_A)).await;
    let url = "/ui/conversations/order-1";

    let (status, html) = page(&server, url, Some(TOKEN_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("data-delete=\"/ui/conversations/order-1\""),
        "a writer may delete"
    );
    // Tenant B cannot open A's page: it is not there for B.
    let (status, html) = page(&server, url, Some(TOKEN_B)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!html.contains("LC202610060018"));
    let (_, list) = page(&server, "/ui", Some(TOKEN_B)).await;
    assert!(!list.contains("order-1"), "B's list holds none of A's");
    // Without a token: the sign-in form, 401.
    let (status, html) = page(&server, url, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(html.contains("id=\"signin\"") && !html.contains("LC202610060018"));

    // A read-only token sees the page, without the button, and cannot delete or write.
    let (status, html) = page(&server, url, Some(READER_A)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("LC202610060018") && !html.contains("data-delete"));
    let r = server.as_bearer(READER_A).delete(url).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let body = r.json();
    assert_eq!(body["error"]["code"], "read_only_token");
    for (method, path) in [
        (Method::DELETE, "/v1/conversations/order-1"),
        (Method::POST, "/v1/conversations/order-1/messages"),
    ] {
        let body = json!({"messages": [{"role": "user", "content": "x"}]});
        let r = server.as_bearer(READER_A).send_json(method.clone(), path, &body).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {path}");
    }
    // B cannot delete A's conversation through the page either; A can.
    assert_eq!(
        server.as_bearer(TOKEN_B).delete(url).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        server.as_bearer(TOKEN_A).delete(url).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(page(&server, url, Some(TOKEN_A)).await.0, StatusCode::NOT_FOUND);
}

/// Signing in starts a session: its cookie holds a random id, never the token, opens the
/// pages (not the API), and opens nothing once signed out.
#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie_that_opens_the_pages() {
    let server = inspector(20, with_auth());
    seed(&server, "order-1", Some(TOKEN_A)).await;

    let r = server
        .post_json("/ui/sign-in", &json!({"token": "not-a-token-of-ours"}))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.header("set-cookie").is_none());

    let r = server.post_json("/ui/sign-in", &json!({"token": TOKEN_A})).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let cookie = r.header("set-cookie").expect("a cookie").to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=43200"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "over plain HTTP a Secure cookie is never sent back: {cookie}"
    );
    let pair = cookie.split(';').next().expect("name=value").to_owned();
    let (name, id) = pair.split_once('=').expect("name=value");
    assert_eq!(name, "chatmem_session");
    assert!(
        !id.contains(TOKEN_A) && id.len() == 64,
        "a random id, not the token: {id}"
    );
    let again = server.post_json("/ui/sign-in", &json!({"token": TOKEN_A})).await;
    assert_ne!(
        again.header("set-cookie"),
        Some(cookie.as_str()),
        "each sign-in is a new session"
    );
    let pair = pair.as_str();
    let with_cookie = |uri: &str| {
        Request::get(uri)
            .header("cookie", pair)
            .body(Body::empty())
            .expect("a request")
    };
    let r = server.send(with_cookie("/ui/conversations/order-1")).await;
    assert_eq!(r.status, StatusCode::OK);
    // The cookie opens the pages only, not the API.
    let r = server.send(with_cookie("/v1/conversations/order-1/messages")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // A sign-in posted as a form (no preflight) is refused by the edge rules.
    let form = Request::post("/ui/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={TOKEN_A}")))
        .expect("a request");
    assert_eq!(server.send(form).await.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let sign_out = Request::post("/ui/sign-out")
        .header("cookie", pair)
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .expect("a request");
    let r = server.send(sign_out).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let cleared: Vec<&str> = r
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(cleared.len(), 2, "both cookies cleared: {cleared:?}");
    assert!(cleared.iter().all(|c| c.contains("Max-Age=0")), "{cleared:?}");
    // The old cookie, kept by a browser or copied by someone, opens nothing any more.
    let r = server.send(with_cookie("/ui/conversations/order-1")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.text().contains("sign"), "the sign-in form");
}

/// Behind TLS the session cookie is `__Host-` and `Secure` (no other port or subdomain of the
/// host can set it); a request carrying two session cookies, one planted beside the browser's
/// own with a narrower path, is not signed in as either.
#[tokio::test]
async fn behind_tls_the_cookie_is_host_only_and_a_planted_cookie_chooses_nothing() {
    let server = inspector(20, with_auth());
    seed(&server, "order-1", Some(TOKEN_A)).await;
    let sign_in = |token: &str, tls: bool| {
        let mut r = Request::post("/ui/sign-in").header("content-type", "application/json");
        if tls {
            r = r.header("x-forwarded-proto", "https");
        }
        r.body(Body::from(json!({"token": token}).to_string()))
            .expect("a request")
    };
    let r = server.send(sign_in(TOKEN_A, true)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let cookie = r.header("set-cookie").expect("a cookie").to_owned();
    assert!(cookie.starts_with("__Host-chatmem_session="), "{cookie}");
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/;"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let victim = cookie.split(';').next().expect("name=value").to_owned();
    let page = |cookies: &str| {
        Request::get("/ui/conversations/order-1")
            .header("cookie", cookies)
            .body(Body::empty())
            .expect("a request")
    };
    assert_eq!(server.send(page(&victim)).await.status, StatusCode::OK);

    // Another tenant's session, planted by a page on another port of the host.
    let r = server.send(sign_in(TOKEN_B, false)).await;
    let planted = r
        .header("set-cookie")
        .expect("a cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    assert_eq!(
        server.send(page(&planted)).await.status,
        StatusCode::NOT_FOUND,
        "B does not see A's"
    );
    for both in [format!("{planted}; {victim}"), format!("{victim}; {planted}")] {
        let r = server.send(page(&both)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{both}");
    }
}

#[tokio::test]
async fn a_long_history_is_paged_and_the_list_filters_by_prefix() {
    let server = inspector(6, ServerConfig::default());
    let turns: Vec<Value> = (1..=1200)
        .map(|i| json!({"role": if i % 2 == 1 { "user" } else { "assistant" }, "content": format!("m{i}")}))
        .collect();
    for chunk in turns.chunks(600) {
        let r = server
            .post_json("/v1/conversations/long/messages", &json!({ "messages": chunk }))
            .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let (_, html) = page(&server, "/ui/conversations/long", None).await;
    // The last page by default: the newest 500, the window among them, a link to earlier.
    assert!(html.contains("id=\"m1200\"") && html.contains("id=\"m701\"") && !html.contains("id=\"m700\""));
    assert!(
        html.contains("href=\"/ui/conversations/long?from=200\""),
        "the earlier page"
    );
    let (_, first) = page(&server, "/ui/conversations/long?from=0", None).await;
    assert!(first.contains("id=\"m1\"") && first.contains("id=\"m500\"") && !first.contains("id=\"m501\""));
    assert!(
        first.contains("href=\"/ui/conversations/long?from=500\""),
        "the later page"
    );

    for id in ["long-2", "lo", "other"] {
        seed(&server, id, None).await;
    }
    let (_, list) = page(&server, "/ui?prefix=lo", None).await;
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
    let server = App::new(app(memory, with_auth()));
    for id in ["x", "y", "z", "x"] {
        seed(&server, id, Some(TOKEN_A)).await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    seed(&server, "w", Some(TOKEN_B)).await;
    let (status, list) = page(&server, "/ui", Some(TOKEN_A)).await;
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
        let mut url = "/ui".to_owned();
        loop {
            let (_, html) = page(&server, &url, Some(TOKEN_A)).await;
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
            url = rest[..rest.find('"').expect("end")].replace("&amp;", "&");
        }
        rows
    };
    assert_eq!(page_one.len(), 3);
    let r = server.as_bearer(TOKEN_A).get("/ui?cursor=not-a-cursor").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

/// Every answer under `/ui` a browser can reach is a page, errors included (a bad query, a
/// path no page has, a method a page does not take), with the request id; the API's stay JSON.
#[tokio::test]
async fn the_inspectors_errors_are_pages() {
    let server = inspector(20, ServerConfig::default());
    seed(&server, "order-1", None).await;
    for (url, status, says) in [
        ("/ui?utm_source=newsletter", StatusCode::BAD_REQUEST, "utm_source"),
        ("/ui/nope", StatusCode::NOT_FOUND, "no such page"),
        ("/ui/conversations/order-1/extra", StatusCode::NOT_FOUND, "no such page"),
        ("/ui/conversations/order-1?from=abc", StatusCode::BAD_REQUEST, "from"),
        ("/ui/conversations/%FF", StatusCode::BAD_REQUEST, "conversation id"),
    ] {
        let r = server.get(url).await;
        assert_eq!(r.status, status, "{url}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"), "{url}");
        let request_id = r.header("x-request-id").expect("named").to_owned();
        let html = r.text();
        assert!(html.contains(says) && html.contains(&request_id), "{url}: {html}");
    }
    let put = Request::put("/ui").body(Body::empty()).expect("a request");
    let r = server.send(put).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        server.get("/v1/nope").await.error_code(),
        "not_found",
        "the API's stay JSON"
    );
}

/// What would hide or disguise text is shown as the escape editors use: a bidi override
/// cannot turn `evil\u{202E}txt.exe` into another name, tag characters cannot hide text, a NUL
/// does not reach the HTML; in the prompt view they are JSON escapes, so a copy is the same
/// JSON. A long message is folded, with its size.
#[tokio::test]
async fn hidden_characters_are_shown_and_long_messages_folded() {
    let server = inspector(20, ServerConfig::default());
    let tagged: String = "secret"
        .chars()
        .map(|c| char::from_u32(0xE0000 + u32::from(c)).expect("a tag"))
        .collect();
    let long = format!("{}END", "长".repeat(20_000));
    let body = json!({"messages": [
        {"role": "user", "content": "open evil\u{202E}txt.exe please"},
        {"role": "assistant", "content": format!("a\u{0000}b{tagged} 👨\u{200D}👩\u{200D}👧")},
        {"role": "user", "content": long},
    ]});
    let r = server.post_json("/v1/conversations/hidden/messages", &body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let (status, html) = page(&server, "/ui/conversations/hidden", None).await;
    assert_eq!(status, StatusCode::OK);
    for raw in ['\u{202E}', '\u{0000}', '\u{E0073}'] {
        assert!(!html.contains(raw), "{raw:?} reached the page raw");
    }
    assert!(html.contains(r#"evil<span class="hidden-char""#), "marked in place");
    for escape in [r"\u{202E}", r"\u{0000}", r"\u{E0073}"] {
        assert!(html.contains(escape), "{escape} not shown");
    }
    assert!(
        html.contains("👨\u{200D}👩\u{200D}👧"),
        "joiners in emoji stay as they are"
    );
    // The prompt view: JSON escapes (a NUL is serde's \u0000 already).
    assert!(
        html.contains(r"evil\u202etxt.exe"),
        "the prompt view escapes it as JSON"
    );
    assert!(html.contains(r"\udb40\udc73"), "a tag character as its JSON escape");
    // Folded, with its size; the whole text is still there behind the disclosure.
    assert!(html.contains("KiB more (60003 bytes in all)"), "folded with its size");
    assert!(html.contains("END"));
}
