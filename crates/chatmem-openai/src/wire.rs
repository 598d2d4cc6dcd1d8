//! The chat-completions JSON this crate sends and reads, as serde types.
//!
//! async-openai's own chat types have no `reasoning_content`, so requests and responses go
//! through its "bring your own types" methods with these types instead. Requests are built
//! from borrowed chatmem messages; `reasoning_content`, `metadata` and `is_error` have no
//! field here, so they cannot be sent.

use chatmem::{
    Body, ChatDelta, ChatRequest, ChatResponse, Content, Message, ModelError, ModelErrorKind, ToolCall, ToolCallDelta,
    ToolDefinition, Usage,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::convert::ConversionErrorKind;

#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// `{"type": "json_object"}`: an answer that is one JSON object.
#[derive(Debug, Serialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

/// The messages of a request, each as sent (see [`Sent`]).
pub(crate) fn messages<'a>(messages: &[&'a Message]) -> Vec<WireMessage<'a>> {
    messages.iter().map(|m| message(m)).collect()
}

/// The request body for `request`; `stream` asks for SSE with a final usage chunk.
pub(crate) fn request<'a>(model: &'a str, request: &'a ChatRequest<'_>, stream: bool) -> WireRequest<'a> {
    WireRequest {
        model,
        messages: request.messages.iter().map(|m| message(m)).collect(),
        tools: request.tools.iter().map(tool).collect(),
        temperature: request.options.temperature,
        top_p: request.options.top_p,
        max_tokens: request.options.max_tokens,
        stop: &request.options.stop,
        response_format: request
            .options
            .json_object
            .then_some(ResponseFormat { kind: "json_object" }),
        stream,
        stream_options: stream.then_some(StreamOptions { include_usage: true }),
    }
}

fn tool(t: &ToolDefinition) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireToolFunction {
            name: &t.name,
            description: t.description.as_deref(),
            parameters: &t.parameters,
        },
    }
}

/// What of a message is sent to a model: the one place that decides it, for the request body
/// here and for [`crate::convert`]. Left out on purpose: `reasoning_content` (DeepSeek
/// rejects it in requests, and it only costs tokens), `metadata` and `is_error` (chatmem's own
/// fields), and a tool result's `name` (the tool role has none in the protocol).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sent<'a> {
    System {
        content: &'a Content,
        name: Option<&'a str>,
    },
    Developer {
        content: &'a Content,
        name: Option<&'a str>,
    },
    User {
        content: &'a Content,
        name: Option<&'a str>,
    },
    Assistant {
        /// `None` only next to tool calls.
        content: Option<&'a Content>,
        tool_calls: &'a [ToolCall],
        name: Option<&'a str>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a Content,
    },
}

/// The text of an assistant message that has neither text nor calls.
static NO_TEXT: Content = Content::Text(String::new());

pub(crate) fn sent(m: &Message) -> Sent<'_> {
    let name = m.name.as_deref();
    match &m.body {
        Body::System { content } => Sent::System { content, name },
        Body::Developer { content } => Sent::Developer { content, name },
        Body::User { content } => Sent::User { content, name },
        Body::Assistant {
            content,
            reasoning_content: _,
            tool_calls,
        } => Sent::Assistant {
            // Providers reject an assistant message with neither text nor calls.
            content: match (content, tool_calls.is_empty()) {
                (Some(c), _) => Some(c),
                (None, true) => Some(&NO_TEXT),
                (None, false) => None,
            },
            tool_calls,
            name,
        },
        Body::Tool {
            tool_call_id,
            content,
            is_error: _,
        } => Sent::Tool { tool_call_id, content },
    }
}

/// One message as sent (see [`Sent`] for what is left out).
fn message(m: &Message) -> WireMessage<'_> {
    let mut w = WireMessage {
        role: m.role().as_str(),
        content: None,
        name: None,
        tool_calls: Vec::new(),
        tool_call_id: None,
    };
    match sent(m) {
        Sent::System { content, name } | Sent::Developer { content, name } | Sent::User { content, name } => {
            w.content = Some(content);
            w.name = name;
        }
        Sent::Assistant {
            content,
            tool_calls,
            name,
        } => {
            w.content = content;
            w.tool_calls = tool_calls
                .iter()
                .map(|c| WireToolCall {
                    id: &c.id,
                    kind: "function",
                    function: WireFunction {
                        name: &c.name,
                        arguments: &c.arguments,
                    },
                })
                .collect();
            w.name = name;
        }
        Sent::Tool { tool_call_id, content } => {
            w.tool_call_id = Some(tool_call_id);
            w.content = Some(content);
        }
    }
    w
}

// ---------------------------------------------------------------------------------------------
// Responses

#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    message: WireResponseMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireResponseMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireResponseToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireResponseToolCall {
    id: String,
    function: WireResponseFunction,
}

#[derive(Debug, Deserialize)]
struct WireResponseFunction {
    name: String,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        let c = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Usage {
            prompt_tokens: c(u.prompt_tokens),
            completion_tokens: c(u.completion_tokens),
            total_tokens: c(u.total_tokens),
        }
    }
}

fn protocol(what: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::Protocol, what)
}

/// An `{"error": {...}}` object in a 200 body or an SSE event (some providers send these).
fn embedded_error(v: &Value) -> Option<ModelError> {
    let e = v.get("error")?;
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .unwrap_or("no message");
    Some(ModelError::new(
        ModelErrorKind::Server,
        format!("provider reported an error: {}", crate::error::short(message)),
    ))
}

/// Reads a non-streamed completion.
pub(crate) fn response(v: Value) -> Result<ChatResponse, ModelError> {
    if let Some(e) = embedded_error(&v) {
        return Err(e);
    }
    // The serde error names the field and position only, never the content.
    let r: WireResponse = serde_json::from_value(v)
        .map_err(|e| protocol("the completion did not have the chat-completions shape").with_source(e))?;
    let usage = r.usage.map(Usage::from);
    let choice = r
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| protocol("the completion has no choices"))?;
    let m = choice.message;
    let tool_calls = m
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments.unwrap_or_default(),
        })
        .collect();
    let message = answer(m.content.map(Content::Text), m.refusal, tool_calls, m.reasoning_content)
        .map_err(|e| protocol(format!("the answer could not be read: {e}")))?;
    Ok(ChatResponse {
        message,
        usage,
        finish_reason: choice.finish_reason,
    })
}

/// The assistant message an answer's fields make: the one rule for reading an answer, for
/// [`response`] and for [`crate::convert`].
///
/// chatmem has no refusal field: a refusal is the answer's text (it is what the model said,
/// and sent back as content the model sees it said it). An answer with both text and a
/// refusal is refused rather than losing either. Empty text or reasoning next to tool calls
/// is no text (DeepSeek sends `""` there); an answer with neither text nor calls is `""`.
pub(crate) fn answer(
    content: Option<Content>,
    refusal: Option<String>,
    tool_calls: Vec<ToolCall>,
    reasoning_content: Option<String>,
) -> Result<Message, ConversionErrorKind> {
    for (index, c) in tool_calls.iter().enumerate() {
        if c.id.is_empty() {
            return Err(ConversionErrorKind::EmptyToolCallField { index, field: "id" });
        }
        if c.name.is_empty() {
            return Err(ConversionErrorKind::EmptyToolCallField {
                index,
                field: "function.name",
            });
        }
    }
    let content = content.filter(|c| !matches!(c, Content::Text(t) if t.is_empty()));
    let content = match (content, refusal.filter(|r| !r.is_empty())) {
        (Some(_), Some(_)) => return Err(ConversionErrorKind::ContentAndRefusal),
        (None, None) if tool_calls.is_empty() => Some(Content::Text(String::new())),
        (c, r) => c.or(r.map(Content::Text)),
    };
    Ok(Message {
        body: Body::Assistant {
            content,
            reasoning_content: reasoning_content.filter(|r| !r.is_empty()),
            tool_calls,
        },
        name: None,
        metadata: None,
    })
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Reads one SSE chunk; `None` when it carries nothing (role-only or empty chunks).
pub(crate) fn delta(v: Value) -> Result<Option<ChatDelta>, ModelError> {
    if let Some(e) = embedded_error(&v) {
        return Err(e);
    }
    let chunk: WireChunk = serde_json::from_value(v)
        .map_err(|e| protocol("a streamed chunk did not have the chat-completions shape").with_source(e))?;
    let mut d = ChatDelta {
        usage: chunk.usage.map(Usage::from),
        ..ChatDelta::default()
    };
    // Only the first choice is used: chatmem never asks for n > 1.
    if let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) {
        d.finish_reason = choice.finish_reason;
        if let Some(delta) = choice.delta {
            d.content = delta.content.filter(|c| !c.is_empty());
            d.reasoning_content = delta.reasoning_content.filter(|r| !r.is_empty());
            d.tool_calls = delta
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    let (name, arguments) = c.function.map_or((None, None), |f| (f.name, f.arguments));
                    ToolCallDelta {
                        // Some servers (older Ollama) omit the index: use the position.
                        index: c.index.unwrap_or_else(|| u32::try_from(i).unwrap_or(u32::MAX)),
                        id: c.id.filter(|s| !s.is_empty()),
                        name: name.filter(|s| !s.is_empty()),
                        arguments,
                    }
                })
                .collect();
        }
    }
    let empty = d.content.is_none()
        && d.reasoning_content.is_none()
        && d.tool_calls.is_empty()
        && d.finish_reason.is_none()
        && d.usage.is_none();
    Ok((!empty).then_some(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::{Metadata, ToolCall};
    use serde_json::json;

    #[test]
    fn requests_never_carry_reasoning_metadata_or_is_error() {
        let mut meta = Metadata::new();
        meta.insert("channel".into(), json!("app"));
        let mut answer = Message::assistant("已查询");
        if let Body::Assistant { reasoning_content, .. } = &mut answer.body {
            *reasoning_content = Some("secret thoughts".into());
        }
        let failed = Message::tool_error("c1", "boom");
        let messages = [
            Message::system("rules"),
            Message::user("hi").with_metadata(meta),
            answer,
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "lookup", "{}")]),
            failed,
        ];
        let req = ChatRequest::new(&messages);
        let v = serde_json::to_value(request("m", &req, false)).unwrap();
        assert_eq!(
            v,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "rules"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "已查询"},
                    {"role": "assistant", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                    ]},
                    {"role": "tool", "content": "boom", "tool_call_id": "c1"}
                ],
                "stream": false
            })
        );
    }

    #[test]
    fn streaming_requests_ask_for_usage_and_carry_tools_and_options() {
        let messages = [Message::user("q")];
        let mut req = ChatRequest::new(&messages);
        req.tools.push(ToolDefinition {
            name: "f".into(),
            description: Some("d".into()),
            parameters: json!({"type": "object"}),
        });
        req.options.temperature = Some(0.5);
        req.options.stop = vec!["END".into()];
        let v = serde_json::to_value(request("m", &req, true)).unwrap();
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            v["tools"],
            json!([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}])
        );
        assert_eq!(v["temperature"], 0.5);
        assert_eq!(v["stop"], json!(["END"]));
        assert!(v.get("response_format").is_none());
        req.options.json_object = true;
        let v = serde_json::to_value(request("m", &req, false)).unwrap();
        assert_eq!(v["response_format"], json!({"type": "json_object"}));
    }

    #[test]
    fn responses_keep_reasoning_and_tool_calls() {
        let r = response(json!({
            "id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "", "reasoning_content": "think",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]
            }}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7, "prompt_cache_hit_tokens": 0}
        }))
        .unwrap();
        assert_eq!(r.message.text(), None);
        assert_eq!(r.message.tool_calls(), &[ToolCall::new("c", "f", "{\"a\":1}")]);
        assert!(matches!(&r.message.body, Body::Assistant { reasoning_content: Some(t), .. } if t == "think"));
        assert_eq!(r.usage.map(|u| u.total_tokens), Some(7));
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn bad_responses_are_protocol_errors_without_content() {
        let e = response(json!({"choices": []})).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::Protocol);
        let e = response(json!({"choices": [{"message": {"content": 5}}]})).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::Protocol);
        let e = response(json!({"error": {"message": "overloaded"}})).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::Server);
    }

    #[test]
    fn a_refusal_is_the_text_and_never_overwrites_it() {
        let answer = |m: Value| response(json!({"choices": [{"index": 0, "message": m}]}));
        let r = answer(json!({"role": "assistant", "content": null, "refusal": "I can't help with that."})).unwrap();
        assert_eq!(r.message, Message::assistant("I can't help with that."));
        let e = answer(json!({"role": "assistant", "content": "sure", "refusal": "no"})).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::Protocol);
        let e = answer(json!({"role": "assistant", "tool_calls": [
            {"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]}))
        .unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::Protocol);
    }

    #[test]
    fn chunks_become_deltas() {
        assert_eq!(
            delta(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})).unwrap(),
            None
        );
        let d = delta(
            json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hm", "tool_calls": [
                {"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
            ]}}]}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.reasoning_content.as_deref(), Some("hm"));
        assert_eq!(d.tool_calls[0].id.as_deref(), Some("c"));
        let d = delta(json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}))
            .unwrap()
            .unwrap();
        assert_eq!(d.usage.map(|u| u.total_tokens), Some(3));
    }
}
