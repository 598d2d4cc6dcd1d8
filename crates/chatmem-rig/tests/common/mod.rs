//! A stand-in OpenAI-compatible model on 127.0.0.1: `POST /v1/chat/completions`, recording
//! each request body. It answers the after-sale scenario from what the request carries: the
//! order number if the conversation holds it, a tool call when asked where an order is.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

pub const ORDER: &str = "LC202610060018";

/// The running stand-in: its base URL and the request bodies it received, in order.
#[derive(Clone)]
pub struct StandIn {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl StandIn {
    /// Starts the server on a free loopback port, on the current tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(Arc::clone(&requests));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { addr, requests })
    }

    /// The base URL rig's OpenAI client is pointed at.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The request bodies received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// Every text the request's messages carry, joined.
pub fn request_text(body: &Value) -> String {
    body["messages"].to_string()
}

async fn complete(State(requests): State<Arc<Mutex<Vec<Value>>>>, Json(body): Json<Value>) -> Json<Value> {
    if let Ok(mut r) = requests.lock() {
        r.push(body.clone());
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let knows_order = body["messages"].to_string().contains(ORDER);
    let message = if last["role"] == "tool" {
        json!({"role": "assistant", "content": format!("查询结果：{}", last["content"].as_str().unwrap_or(""))})
    } else if last["content"].to_string().contains("到哪了") {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_order_1", "type": "function",
            "function": {"name": "order_status", "arguments": format!("{{\"order\":\"{ORDER}\"}}")}
        }]})
    } else if last["content"].to_string().contains("能退吗") {
        let text = if knows_order {
            format!("订单 {ORDER} 未发货，可以退。")
        } else {
            "请提供订单号。".to_owned()
        };
        json!({"role": "assistant", "content": text})
    } else if knows_order {
        json!({"role": "assistant", "content": format!("已查到订单 {ORDER}，尚未发货。")})
    } else {
        json!({"role": "assistant", "content": "您好，请问有什么可以帮您？"})
    };
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    Json(json!({
        "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
}

/// rig's OpenAI Chat Completions model on the stand-in.
pub fn model(stand_in: &StandIn) -> rig_core::Model<rig_core::providers::openai::wire::Chat> {
    model_at(&stand_in.base_url())
}

/// rig's OpenAI Chat Completions model on a stand-in at `base_url` (one another process started).
pub fn model_at(base_url: &str) -> rig_core::Model<rig_core::providers::openai::wire::Chat> {
    let mut config = rig_core::providers::openai::OpenAIConfig::new("sk-stand-in");
    config.base_url = base_url.to_owned();
    config.client().chat("stand-in")
}
