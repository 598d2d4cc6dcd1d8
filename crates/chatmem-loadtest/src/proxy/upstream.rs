//! [`LoopbackUpstream`]: the fastest OpenAI-compatible model there can be, so that what a proxy
//! adds is most of what is measured.

use std::thread::JoinHandle;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use tokio::sync::oneshot;

use crate::error::LoadError;

/// The model name every request names; LiteLLM's config maps it to this upstream.
pub const MODEL: &str = "bench-model";

/// The one answer: a small `chat.completion` in OpenAI's shape (usage included, as providers
/// send it, so a proxy that counts tokens has them).
const ANSWER: &str = r#"{"id":"chatcmpl-proxybench","object":"chat.completion","created":1700000000,"model":"bench-model","system_fingerprint":"fp_proxybench","choices":[{"index":0,"message":{"role":"assistant","content":"已为您查询：订单 LC202610060018 明天下午发货。Your order ships tomorrow afternoon.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}"#;

/// `POST /v1/chat/completions` on a free loopback port, answering `ANSWER` at once to any
/// body (read whole first, as a model server would). It runs on its own thread and
/// single-threaded runtime, so the load generator's tasks never wait behind it and it never
/// waits behind them. Stops when dropped.
#[derive(Debug)]
pub struct LoopbackUpstream {
    base_url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LoopbackUpstream {
    /// Binds `127.0.0.1:0` and starts answering.
    ///
    /// # Errors
    /// [`LoadError::Upstream`] when the port, the runtime or the thread cannot be had.
    pub fn start() -> Result<Self, LoadError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(LoadError::Upstream)?;
        listener.set_nonblocking(true).map_err(LoadError::Upstream)?;
        let addr = listener.local_addr().map_err(LoadError::Upstream)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(LoadError::Upstream)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loopback-upstream".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let app = Router::new().route("/v1/chat/completions", post(answer));
                    // Not a graceful shutdown: kept-alive client connections would hold it open.
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
            })
            .map_err(LoadError::Upstream)?;
        Ok(Self {
            base_url: format!("http://{addr}/v1"),
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL an OpenAI client (or proxy) is given.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

impl Drop for LoopbackUpstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn answer(_body: Bytes) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], ANSWER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_a_chat_completion() {
        let v: serde_json::Value = serde_json::from_str(ANSWER).expect("JSON");
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["model"], MODEL);
        assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    }

    #[tokio::test]
    async fn it_answers_on_loopback() {
        let upstream = LoopbackUpstream::start().expect("start");
        let body = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client")
            .post(format!("{}/chat/completions", upstream.base_url()))
            .body("{}")
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("body");
        assert_eq!(body, ANSWER);
    }
}
