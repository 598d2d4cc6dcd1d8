//! The requests the server's tests read answers with: a request that must succeed at the HTTP
//! level, its body as JSON or text (status checks stay in the tests).

use serde_json::Value;

/// `GET url`, the body as JSON.
pub(crate) async fn get_json(http: &reqwest::Client, url: impl reqwest::IntoUrl) -> Value {
    http.get(url)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("a JSON body")
}

/// `GET url`, the body as text.
pub(crate) async fn get_text(http: &reqwest::Client, url: impl reqwest::IntoUrl) -> String {
    http.get(url)
        .send()
        .await
        .expect("get")
        .text()
        .await
        .expect("a text body")
}
