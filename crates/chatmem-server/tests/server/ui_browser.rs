//! The memory inspector in a real browser: headless Chromium driven through chromedriver
//! (WebDriver, with fantoccini). Runs when `CHATMEM_TEST_CHROMEDRIVER` names a chromedriver
//! (Debian's `chromium-driver`: `/usr/bin/chromedriver`; `.ci/run` installs and sets it); the
//! tests are ignored without `--include-ignored`. Screenshots at 1280 and 375 px wide are written to
//! `target/ui-screenshots/`.

use crate::inspector::{seed_messages, serve};

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chatmem_server::{Auth, ServerConfig};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const TOKEN_A: &str = "token-of-team-a-0001";
const TOKEN_B: &str = "token-of-team-b-0001";

/// The chromedriver named by `CHATMEM_TEST_CHROMEDRIVER`.
pub(crate) fn chromedriver() -> String {
    chatmem_test::required_env(
        "CHATMEM_TEST_CHROMEDRIVER",
        "apt install chromium chromium-driver, then point it at /usr/bin/chromedriver",
    )
}

/// A chromedriver process on a free loopback port, killed when dropped.
pub(crate) struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) async fn start_driver(path: &str) -> Driver {
    let port = chatmem_test::loopback::free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready = http.get(format!("{}/status", driver.url)).send().await;
        if let Ok(r) = ready {
            let status: Value = r.json().await.unwrap_or_default();
            if status["value"]["ready"] == true {
                return driver;
            }
        }
        assert!(Instant::now() < deadline, "chromedriver did not get ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A headless Chromium session; `phone`: a 375-px-wide phone screen, else 1280 × 900.
pub(crate) async fn browser(driver: &Driver, phone: bool) -> Client {
    let binary = std::env::var("CHATMEM_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let mut options = json!({
        "binary": binary,
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"],
    });
    if phone {
        options["mobileEmulation"] = json!({"deviceMetrics": {"width": 375, "height": 812, "pixelRatio": 2}});
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("goog:chromeOptions".into(), options);
    ClientBuilder::rustls()
        .expect("a TLS setup")
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a browser session")
}

async fn post(base: &str, id: &str, messages: Value, token: Option<&str>) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/conversations/{id}/messages"))
        .json(&json!({ "messages": messages }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let r = request.send().await.expect("post");
    assert!(r.status().is_success(), "{}", r.text().await.unwrap_or_default());
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("ui-screenshots");
    std::fs::create_dir_all(&dir).expect("the screenshot folder");
    dir
}

pub(crate) async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    let path = screenshots().join(name);
    std::fs::write(&path, png).expect("the screenshot is written");
    eprintln!("screenshot: {}", path.display());
}

pub(crate) async fn js(client: &Client, script: &str) -> Value {
    client.execute(script, vec![]).await.expect("the script runs")
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_CHROMEDRIVER"]
async fn the_inspector_shows_the_window_escapes_text_and_fits_a_phone() {
    let path = chromedriver();
    let driver = start_driver(&path).await;
    let base = serve(2, ServerConfig::default()).await;
    post(&base, "seed-003", seed_messages(), None).await;
    let hostile = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
    post(
        &base,
        "hostile",
        json!([{"role": "user", "content": hostile}, {"role": "assistant", "content": "ok"}]),
        None,
    )
    .await;
    let window: Value = reqwest::get(format!("{base}/v1/conversations/seed-003/messages"))
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let window_len = window["messages"].as_array().expect("messages").len();

    let client = browser(&driver, false).await;
    client
        .goto(&format!("{base}/ui/conversations/seed-003"))
        .await
        .expect("the page");
    // The order-number turn left a window of 2: dimmed, and marked in words.
    let m3 = client.find(Locator::Css("#m3")).await.expect("message #3");
    let class = m3.attr("class").await.expect("class").unwrap_or_default();
    assert!(class.contains("evicted"), "{class}");
    assert!(m3.text().await.expect("text").contains("LC202610060018"));
    let opacity = js(
        &client,
        "return getComputedStyle(document.getElementById('m3')).opacity",
    )
    .await;
    let opacity: f64 = opacity.as_str().and_then(|o| o.parse().ok()).expect("an opacity");
    assert!(opacity < 1.0, "dimmed: opacity {opacity}");
    // The budget bar says what the API's window holds (chatmem get's array).
    let budget = client
        .find(Locator::Css("figure.budget strong"))
        .await
        .expect("the budget");
    assert_eq!(budget.text().await.expect("text"), format!("{window_len} / 2 messages"));
    // "Show the prompt" opens from the keyboard.
    let summary = client
        .find(Locator::Css("details.prompt summary"))
        .await
        .expect("the prompt");
    js(&client, "document.querySelector('details.prompt summary').focus()").await;
    summary.send_keys("\u{E007}").await.expect("Enter");
    let open = js(&client, "return document.querySelector('details.prompt').open").await;
    assert_eq!(open, Value::Bool(true), "Enter on the summary opens the prompt");
    screenshot(&client, "conversation-1280.png").await;

    // Hostile text is text: nothing it holds runs.
    client
        .goto(&format!("{base}/ui/conversations/hostile"))
        .await
        .expect("the page");
    let shown = client.find(Locator::Css("#m1 .text")).await.expect("message #1");
    assert_eq!(shown.text().await.expect("text"), hostile);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        js(&client, "return window.__pwned === undefined").await,
        Value::Bool(true)
    );
    client.goto(&format!("{base}/ui")).await.expect("the list");
    screenshot(&client, "list-1280.png").await;

    // The README's picture: the same conversation under a window of 4, the page whole.
    let four = serve(4, ServerConfig::default()).await;
    post(&four, "seed-003", seed_messages(), None).await;
    client.set_window_size(1280, 1500).await.expect("a taller window");
    client
        .goto(&format!("{four}/ui/conversations/seed-003"))
        .await
        .expect("the page");
    let m3 = client.find(Locator::Css("#m3")).await.expect("message #3");
    assert!(
        m3.attr("class")
            .await
            .expect("class")
            .unwrap_or_default()
            .contains("evicted")
    );
    screenshot(&client, "readme.png").await;
    client.close().await.expect("closed");

    fits_a_phone(
        &driver,
        &[
            (format!("{base}/ui"), "list-375.png"),
            (format!("{base}/ui/conversations/seed-003"), "conversation-375.png"),
        ],
    )
    .await;
}

/// Clicks the button `css` and accepts the confirmation it asks for; returns its question.
pub(crate) async fn click_and_confirm(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .expect("the button")
        .click()
        .await
        .expect("clicked");
    let question = client.get_alert_text().await.expect("a confirmation");
    client.accept_alert().await.expect("confirmed");
    question
}

/// Each page (URL, screenshot name) on a 375-pixel phone: nothing wider than the screen.
pub(crate) async fn fits_a_phone(driver: &Driver, pages: &[(String, &str)]) {
    let phone = browser(driver, true).await;
    for (url, name) in pages {
        phone.goto(url).await.expect("the page");
        let widths = js(
            &phone,
            "return [window.innerWidth, document.documentElement.scrollWidth]",
        )
        .await;
        assert_eq!(widths[0], 375, "{url}: {widths}");
        assert!(widths[1].as_u64() <= Some(375), "{url} overflows: {widths}");
        screenshot(&phone, name).await;
    }
    phone.close().await.expect("closed");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_CHROMEDRIVER"]
async fn tenants_sign_in_and_a_writer_deletes_with_confirmation() {
    let path = chromedriver();
    let driver = start_driver(&path).await;
    let toml = format!(
        "[[token]]\ntoken = \"{TOKEN_A}\"\ntenant = \"a\"\n\n[[token]]\ntoken = \"{TOKEN_B}\"\ntenant = \"b\"\n"
    );
    let config = ServerConfig {
        auth: Some(Auth::from_toml(&toml).expect("a valid auth file")),
        ..ServerConfig::default()
    };
    let base = serve(20, config).await;
    post(&base, "order-1", seed_messages(), Some(TOKEN_A)).await;
    let page = format!("{base}/ui/conversations/order-1");

    let client = browser(&driver, false).await;
    let sign_in = |token: &'static str| {
        let client = client.clone();
        let base = base.clone();
        async move {
            client.goto(&format!("{base}/ui")).await.expect("the sign-in page");
            let field = client.find(Locator::Css("#token")).await.expect("the token field");
            field.send_keys(token).await.expect("typed");
            client
                .find(Locator::Css("#signin button"))
                .await
                .expect("the button")
                .click()
                .await
                .expect("clicked");
            client
                .wait()
                .for_element(Locator::Css("table.conversations, p.empty"))
                .await
                .expect("signed in: the list");
        }
    };

    // Tenant B signs in and cannot open A's conversation.
    sign_in(TOKEN_B).await;
    client.goto(&page).await.expect("the page");
    let heading = client.find(Locator::Css("h1")).await.expect("a heading");
    assert_eq!(heading.text().await.expect("text"), "404 not_found");
    assert!(!client.source().await.expect("source").contains("LC202610060018"));

    // Sign out; A signs in, opens it, deletes it after confirming.
    client.goto(&format!("{base}/ui")).await.expect("the list");
    client
        .find(Locator::Css("[data-signout]"))
        .await
        .expect("sign out")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css("#signin"))
        .await
        .expect("signed out");
    sign_in(TOKEN_A).await;
    client.goto(&page).await.expect("the page");
    let question = click_and_confirm(&client, "[data-delete]").await;
    assert!(question.contains("order-1"), "{question}");
    client
        .wait()
        .for_url(&format!("{base}/ui").parse().expect("a URL"))
        .await
        .expect("back to the list");
    let gone = reqwest::Client::new()
        .get(format!("{base}/v1/conversations/order-1/messages"))
        .bearer_auth(TOKEN_A)
        .send()
        .await
        .expect("get");
    assert_eq!(gone.status(), reqwest::StatusCode::NOT_FOUND);
    client.close().await.expect("closed");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_CHROMEDRIVER"]
async fn a_ten_thousand_message_conversation_opens_on_its_newest_page() {
    let path = chromedriver();
    let driver = start_driver(&path).await;
    let base = serve(20, ServerConfig::default()).await;
    for block in 0..10 {
        let messages: Vec<Value> = (0..1000)
            .map(|i| {
                let n = block * 1000 + i;
                json!({"role": if n % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {n}: order LC202610060018")})
            })
            .collect();
        post(&base, "long", Value::Array(messages), None).await;
    }
    let client = browser(&driver, false).await;
    let mut times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        client
            .goto(&format!("{base}/ui/conversations/long"))
            .await
            .expect("the page");
        times.push(started.elapsed());
    }
    assert!(
        client.find(Locator::Css("#m10000")).await.is_ok(),
        "the newest message is on the page"
    );
    times.sort();
    eprintln!(
        "the 10,000-message conversation's page: loaded in {:?} (median of 3: {:?}, {:?}, {:?})",
        times[1], times[0], times[1], times[2]
    );
    client.close().await.expect("closed");
}
