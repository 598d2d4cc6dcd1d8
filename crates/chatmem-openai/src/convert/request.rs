//! chatmem messages to async-openai request messages and back.

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestDeveloperMessage,
    ChatCompletionRequestDeveloperMessageContent, ChatCompletionRequestDeveloperMessageContentPart,
    ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartText, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestSystemMessageContentPart,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestToolMessageContentPart, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, FunctionCall,
};
use chatmem::{Body, Content, Message};

use super::parts::{
    assistant_part_from_request, assistant_part_to_request, part_from_request, part_to_request, text_part_from_request,
    text_part_to_request,
};
use super::{ConversionError, ConversionErrorKind, tool_calls_from, unsupported_if};
use crate::wire::{self, Sent};

/// `content` of a `role` message that takes text parts only: its text, or its parts each made
/// by `part`.
fn text_content<C, P>(
    role: &'static str,
    content: &Content,
    text: impl FnOnce(String) -> C,
    array: impl FnOnce(Vec<P>) -> C,
    part: impl Fn(ChatCompletionRequestMessageContentPartText) -> P,
) -> Result<C, ConversionError> {
    Ok(match content {
        Content::Text(t) => text(t.clone()),
        Content::Parts(parts) => array(
            parts
                .iter()
                .enumerate()
                .map(|(i, p)| text_part_to_request(role, i, p).map(&part))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// The chatmem content of a `role` message's text parts.
fn text_parts_from(
    role: &'static str,
    parts: impl IntoIterator<Item = ChatCompletionRequestMessageContentPartText>,
) -> Result<Content, ConversionError> {
    Ok(Content::Parts(
        parts
            .into_iter()
            .map(|p| text_part_from_request(role, p))
            .collect::<Result<_, _>>()?,
    ))
}

/// The request message that sends `message`, as [`OpenAiModel`](crate::OpenAiModel) would
/// send it (without `reasoning_content`, `metadata`, `is_error`, or a tool result's `name`).
///
/// # Errors
/// A content part async-openai cannot carry unchanged: an unknown `type` or a refusal in a
/// user message, anything but text in a system, developer or tool message, anything but
/// text and refusals in an assistant's; an image `detail` it has no value for.
///
/// ```
/// use chatmem::{Message, ToolCall};
/// use chatmem_openai::async_openai::types::chat::ChatCompletionRequestMessage;
/// use chatmem_openai::convert::to_request_message;
///
/// let call = Message::assistant_tool_calls(vec![ToolCall::new("call_1", "order_status", "{}")]);
/// let ChatCompletionRequestMessage::Assistant(a) = to_request_message(&call)? else { unreachable!() };
/// assert_eq!(a.tool_calls.map(|c| c.len()), Some(1));
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn to_request_message(message: &Message) -> Result<ChatCompletionRequestMessage, ConversionError> {
    Ok(match wire::sent(message) {
        Sent::System { content, name } => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: text_content(
                "system",
                content,
                ChatCompletionRequestSystemMessageContent::Text,
                ChatCompletionRequestSystemMessageContent::Array,
                ChatCompletionRequestSystemMessageContentPart::Text,
            )?,
            name: name.map(str::to_owned),
        }),
        Sent::Developer { content, name } => {
            ChatCompletionRequestMessage::Developer(ChatCompletionRequestDeveloperMessage {
                content: text_content(
                    "developer",
                    content,
                    ChatCompletionRequestDeveloperMessageContent::Text,
                    ChatCompletionRequestDeveloperMessageContent::Array,
                    ChatCompletionRequestDeveloperMessageContentPart::Text,
                )?,
                name: name.map(str::to_owned),
            })
        }
        Sent::User { content, name } => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: match content {
                Content::Text(t) => ChatCompletionRequestUserMessageContent::Text(t.clone()),
                Content::Parts(parts) => ChatCompletionRequestUserMessageContent::Array(
                    parts
                        .iter()
                        .enumerate()
                        .map(|(i, p)| part_to_request(i, p))
                        .collect::<Result<_, _>>()?,
                ),
            },
            name: name.map(str::to_owned),
        }),
        Sent::Assistant {
            content,
            tool_calls,
            name,
        } => {
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content: content
                    .map(|c| {
                        Ok::<_, ConversionError>(match c {
                            Content::Text(t) => ChatCompletionRequestAssistantMessageContent::Text(t.clone()),
                            Content::Parts(parts) => ChatCompletionRequestAssistantMessageContent::Array(
                                parts
                                    .iter()
                                    .enumerate()
                                    .map(|(i, p)| assistant_part_to_request(i, p))
                                    .collect::<Result<_, _>>()?,
                            ),
                        })
                    })
                    .transpose()?,
                tool_calls: (!tool_calls.is_empty()).then(|| {
                    tool_calls
                        .iter()
                        .map(|c| {
                            ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                                id: c.id.clone(),
                                function: FunctionCall {
                                    name: c.name.clone(),
                                    arguments: c.arguments.clone(),
                                },
                            })
                        })
                        .collect()
                }),
                name: name.map(str::to_owned),
                // The rest (refusal, audio, the deprecated function_call) chatmem never holds.
                ..Default::default()
            })
        }
        Sent::Tool { tool_call_id, content } => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: text_content(
                "tool",
                content,
                ChatCompletionRequestToolMessageContent::Text,
                ChatCompletionRequestToolMessageContent::Array,
                ChatCompletionRequestToolMessageContentPart::Text,
            )?,
            tool_call_id: tool_call_id.to_owned(),
        }),
    })
}

/// [`to_request_message`] for each message of a window, in order; an error names the
/// message's position ([`ConversionError::index`]). Takes `&Vec<Message>` (what
/// `ChatMemory::get` returns) as well as `Vec<&Message>` (what a turn's `prompt` returns).
///
/// # Errors
/// The first message that cannot be converted.
///
/// ```
/// use chatmem::Message;
/// use chatmem_openai::convert::to_request_messages;
///
/// let window = vec![Message::system("你是邻里仓售后。"), Message::user("那单能退吗？")];
/// assert_eq!(to_request_messages(&window)?.len(), 2);
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn to_request_messages<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
) -> Result<Vec<ChatCompletionRequestMessage>, ConversionError> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            to_request_message(m).map_err(|e| ConversionError {
                index: Some(i),
                kind: e.kind,
            })
        })
        .collect()
}

/// The chatmem message a request message holds, for storing messages an application built
/// with async-openai. The inverse of [`to_request_message`] for every message that sends all
/// it holds (no reasoning, metadata, `is_error` or tool `name`, and no `""` text next to tool
/// calls, which reads back as no text).
///
/// # Errors
/// A function message, assistant `audio` or `function_call`, a custom tool call, an empty tool call id or name,
/// an empty `tool_call_id`, text and a refusal together, or a part with a
/// `prompt_cache_breakpoint`: each [`ConversionErrorKind`] names what it is.
///
/// ```
/// use chatmem::Message;
/// use chatmem_openai::convert::{from_request_message, to_request_message};
///
/// let m = Message::tool_result("call_1", r#"{"status":"not shipped"}"#);
/// assert_eq!(from_request_message(to_request_message(&m)?)?, m);
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn from_request_message(request: ChatCompletionRequestMessage) -> Result<Message, ConversionError> {
    use ChatCompletionRequestMessage as M;
    let message = |body| Message {
        body,
        name: None,
        metadata: None,
    };
    let with_name = |m: Message, name: Option<String>| Message { name, ..m };
    Ok(match request {
        M::Developer(d) => {
            let content = match d.content {
                ChatCompletionRequestDeveloperMessageContent::Text(t) => Content::Text(t),
                ChatCompletionRequestDeveloperMessageContent::Array(parts) => text_parts_from(
                    "developer",
                    parts.into_iter().map(|p| match p {
                        ChatCompletionRequestDeveloperMessageContentPart::Text(t) => t,
                    }),
                )?,
            };
            with_name(message(Body::Developer { content }), d.name)
        }
        M::Function(_) => return Err(ConversionErrorKind::UnsupportedRole { role: "function" }.into()),
        M::System(s) => {
            let content = match s.content {
                ChatCompletionRequestSystemMessageContent::Text(t) => Content::Text(t),
                ChatCompletionRequestSystemMessageContent::Array(parts) => text_parts_from(
                    "system",
                    parts.into_iter().map(|p| match p {
                        ChatCompletionRequestSystemMessageContentPart::Text(t) => t,
                    }),
                )?,
            };
            with_name(message(Body::System { content }), s.name)
        }
        M::User(u) => {
            let m = match u.content {
                ChatCompletionRequestUserMessageContent::Text(t) => Message::user(t),
                ChatCompletionRequestUserMessageContent::Array(parts) => Message::user_parts(
                    parts
                        .into_iter()
                        .enumerate()
                        .map(|(i, p)| part_from_request(i, p))
                        .collect::<Result<_, _>>()?,
                ),
            };
            with_name(m, u.name)
        }
        M::Assistant(a) => {
            // Every field by name, so a field a new async-openai adds fails to compile here
            // instead of being dropped.
            #[allow(deprecated)]
            let ChatCompletionRequestAssistantMessage {
                content,
                refusal,
                name,
                audio,
                tool_calls,
                function_call,
            } = a;
            unsupported_if(audio.is_some(), "assistant", "audio")?;
            unsupported_if(function_call.is_some(), "assistant", "function_call")?;
            let content = match content {
                None => None,
                Some(ChatCompletionRequestAssistantMessageContent::Text(t)) => Some(Content::Text(t)),
                Some(ChatCompletionRequestAssistantMessageContent::Array(parts)) => Some(Content::Parts(
                    parts
                        .into_iter()
                        .map(assistant_part_from_request)
                        .collect::<Result<_, _>>()?,
                )),
            };
            let m = wire::answer(content, refusal, tool_calls_from(tool_calls)?, None)?;
            with_name(m, name)
        }
        M::Tool(t) => {
            if t.tool_call_id.is_empty() {
                return Err(ConversionErrorKind::EmptyToolCallId.into());
            }
            let content = match t.content {
                ChatCompletionRequestToolMessageContent::Text(c) => Content::Text(c),
                ChatCompletionRequestToolMessageContent::Array(parts) => text_parts_from(
                    "tool",
                    parts.into_iter().map(|p| match p {
                        ChatCompletionRequestToolMessageContentPart::Text(t) => t,
                    }),
                )?,
            };
            message(Body::Tool {
                tool_call_id: t.tool_call_id,
                content,
                is_error: false,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use async_openai::types::chat::ChatCompletionRequestFunctionMessage;
    use chatmem::{Body, ChatRequest, ContentPart, ImageUrl, Metadata, ToolCall};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::convert::tests::{both_ways, kind, request_json};

    #[test]
    fn system_both_ways() {
        both_ways(
            &Message::system("你是邻里仓售后。").with_name("ops"),
            json!({"role": "system", "content": "你是邻里仓售后。", "name": "ops"}),
        );
    }

    #[test]
    fn user_text_both_ways() {
        both_ways(
            &Message::user("我的订单是 LC202610060018，还没发货。").with_name("alice"),
            json!({"role": "user", "content": "我的订单是 LC202610060018，还没发货。", "name": "alice"}),
        );
    }

    #[test]
    fn assistant_text_and_tool_calls_both_ways() {
        both_ways(
            &Message::assistant("订单 LC202610060018 未发货，可以退。"),
            json!({"role": "assistant", "content": "订单 LC202610060018 未发货，可以退。"}),
        );
        let calls = vec![
            ToolCall::new("call_1", "order_status", r#"{"order":"LC202610060018"}"#),
            ToolCall::new("call_2", "refund_policy", "{}"),
        ];
        both_ways(
            &Message::assistant_tool_calls(calls.clone()),
            json!({"role": "assistant", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": "{\"order\":\"LC202610060018\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "refund_policy", "arguments": "{}"}}
            ]}),
        );
        let mut both = Message::assistant("let me check").with_name("bot");
        if let Body::Assistant { tool_calls, .. } = &mut both.body {
            *tool_calls = calls;
        }
        assert_eq!(
            &from_request_message(to_request_message(&both).unwrap()).unwrap(),
            &both
        );
    }

    #[test]
    fn tool_results_both_ways() {
        both_ways(
            &Message::tool_result("call_1", r#"{"status":"not shipped"}"#),
            json!({"role": "tool", "content": "{\"status\":\"not shipped\"}", "tool_call_id": "call_1"}),
        );
    }

    #[test]
    fn requests_never_carry_reasoning_metadata_is_error_or_a_tool_name() {
        let mut meta = Metadata::new();
        meta.insert("channel".into(), json!("app"));
        let mut answer = Message::assistant("已查询").with_metadata(meta.clone());
        if let Body::Assistant { reasoning_content, .. } = &mut answer.body {
            *reasoning_content = Some("secret thoughts".into());
        }
        let messages = vec![
            Message::system("rules").with_metadata(meta.clone()),
            Message::user("hi").with_metadata(meta),
            answer,
            Message::tool_error("c1", "boom").with_name("lookup"),
        ];
        let v = serde_json::to_value(to_request_messages(&messages).unwrap()).unwrap();
        let text = v.to_string();
        for absent in [
            "reasoning_content",
            "secret thoughts",
            "metadata",
            "channel",
            "is_error",
            "lookup",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert_eq!(v[3], json!({"role": "tool", "content": "boom", "tool_call_id": "c1"}));
    }

    #[test]
    fn an_assistant_message_without_text_or_calls_is_sent_as_empty_text() {
        let mut m = Message::assistant_tool_calls(Vec::new());
        m.name = None;
        assert_eq!(request_json(&m), json!({"role": "assistant", "content": ""}));
    }

    #[test]
    fn the_converted_window_is_what_openai_model_sends() {
        let mut reasoning = Message::assistant("a");
        if let Body::Assistant { reasoning_content, .. } = &mut reasoning.body {
            *reasoning_content = Some("r".into());
        }
        let messages = vec![
            Message::system("s").with_name("n"),
            Message::user_parts(vec![
                ContentPart::Text("t".into()),
                ContentPart::ImageUrl(ImageUrl {
                    url: "u".into(),
                    detail: Some("low".into()),
                }),
            ]),
            reasoning,
            Message::assistant_tool_calls(vec![ToolCall::new("c", "f", "{}")]),
            Message::tool_error("c", "x").with_name("f"),
            Message::assistant_tool_calls(Vec::new()),
        ];
        let ours = serde_json::to_value(to_request_messages(&messages).unwrap()).unwrap();
        // A turn's prompt is borrowed messages: the same conversion.
        let prompt: Vec<&Message> = messages.iter().collect();
        assert_eq!(
            serde_json::to_value(to_request_messages(prompt).unwrap()).unwrap(),
            ours
        );
        let req = ChatRequest::new(&messages);
        let wire = serde_json::to_value(wire::request("m", &req, false)).unwrap();
        assert_eq!(ours, wire["messages"]);
    }

    #[test]
    fn content_parts_of_every_role_both_ways() {
        let texts = || Content::Parts(vec![ContentPart::Text("a".into()), ContentPart::Text("b".into())]);
        let parts = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
        let with = |body| Message {
            body,
            name: None,
            metadata: None,
        };
        both_ways(
            &with(Body::System { content: texts() }),
            json!({"role": "system", "content": parts}),
        );
        both_ways(
            &with(Body::Developer { content: texts() }),
            json!({"role": "developer", "content": parts}),
        );
        both_ways(
            &with(Body::Tool {
                tool_call_id: "c".into(),
                content: texts(),
                is_error: false,
            }),
            json!({"role": "tool", "content": parts, "tool_call_id": "c"}),
        );
        for content in [
            texts(),
            Content::Parts(vec![ContentPart::Refusal("I can't help with that.".into())]),
        ] {
            let m = with(Body::Assistant {
                content: Some(content.clone()),
                reasoning_content: None,
                tool_calls: Vec::new(),
            });
            both_ways(&m, json!({"role": "assistant", "content": content}));
        }
    }

    #[test]
    fn a_part_a_role_does_not_take_is_an_error_naming_it() {
        let image = ContentPart::ImageUrl(ImageUrl {
            url: "u".into(),
            detail: None,
        });
        let cases = [
            (
                Message {
                    body: Body::System {
                        content: Content::Parts(vec![ContentPart::Text("t".into()), image.clone()]),
                    },
                    name: None,
                    metadata: None,
                },
                "system",
                "image_url",
            ),
            (
                Message {
                    body: Body::Assistant {
                        content: Some(Content::Parts(vec![ContentPart::Text("t".into()), image])),
                        reasoning_content: None,
                        tool_calls: Vec::new(),
                    },
                    name: None,
                    metadata: None,
                },
                "assistant",
                "image_url",
            ),
            (
                Message::user_parts(vec![ContentPart::Text("t".into()), ContentPart::Refusal("no".into())]),
                "user",
                "refusal",
            ),
        ];
        for (m, role, part) in cases {
            assert_eq!(
                to_request_message(&m).unwrap_err().kind(),
                &ConversionErrorKind::UnsupportedPart {
                    role,
                    index: 1,
                    kind: part.into()
                }
            );
        }
    }

    #[test]
    fn roles_and_shapes_chatmem_lacks_are_errors() {
        // A developer message is chatmem's too (it holds the system slot), both ways.
        both_ways(
            &Message::developer("x").with_name("ops"),
            serde_json::json!({"role": "developer", "content": "x", "name": "ops"}),
        );
        let f = ChatCompletionRequestMessage::Function(ChatCompletionRequestFunctionMessage {
            content: Some("x".into()),
            name: "f".into(),
        });
        assert_eq!(
            kind(from_request_message(f)),
            ConversionErrorKind::UnsupportedRole { role: "function" }
        );

        for (v, role, field) in [
            (
                json!({"role": "assistant", "content": "x", "audio": {"id": "a"}}),
                "assistant",
                "audio",
            ),
            (
                json!({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}),
                "assistant",
                "function_call",
            ),
            (
                json!({"role": "user", "content": [
                    {"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "explicit"}}
                ]}),
                "user",
                "prompt_cache_breakpoint",
            ),
        ] {
            let m: ChatCompletionRequestMessage = serde_json::from_value(v).unwrap();
            assert_eq!(
                kind(from_request_message(m)),
                ConversionErrorKind::UnsupportedField { role, field }
            );
        }
        let m: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "tool", "tool_call_id": "", "content": "x"})).unwrap();
        assert_eq!(kind(from_request_message(m)), ConversionErrorKind::EmptyToolCallId);
    }

    // ---- properties ------------------------------------------------------------------------

    fn text() -> impl Strategy<Value = String> {
        "[a-z0-9 订单\\n\"{}]{0,12}"
    }

    fn nonempty() -> impl Strategy<Value = String> {
        "[a-z0-9_订]{1,8}"
    }

    fn part() -> impl Strategy<Value = ContentPart> {
        prop_oneof![
            text().prop_map(ContentPart::Text),
            (
                text(),
                proptest::option::of(prop_oneof![Just("auto"), Just("low"), Just("high"), Just("original")])
            )
                .prop_map(|(url, d)| ContentPart::ImageUrl(ImageUrl {
                    url,
                    detail: d.map(str::to_owned)
                })),
            text().prop_map(
                |data| match json!({"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}}) {
                    Value::Object(o) => ContentPart::Other(o),
                    _ => unreachable!(),
                }
            ),
        ]
    }

    fn text_parts() -> impl Strategy<Value = Content> {
        prop_oneof![
            text().prop_map(Content::Text),
            proptest::collection::vec(text().prop_map(ContentPart::Text), 0..3).prop_map(Content::Parts),
        ]
    }

    fn call() -> impl Strategy<Value = ToolCall> {
        (nonempty(), nonempty(), text()).prop_map(|(id, name, args)| ToolCall::new(id, name, args))
    }

    /// Messages that send everything they hold: no reasoning, metadata, `is_error` or tool
    /// name, and no empty text next to tool calls.
    fn sendable() -> impl Strategy<Value = Message> {
        let name = proptest::option::of(nonempty());
        let body = prop_oneof![
            text_parts().prop_map(|content| Message {
                body: Body::System { content },
                name: None,
                metadata: None,
            }),
            text_parts().prop_map(|content| Message {
                body: Body::Developer { content },
                name: None,
                metadata: None,
            }),
            text().prop_map(Message::user),
            proptest::collection::vec(part(), 0..4).prop_map(Message::user_parts),
            (
                proptest::option::of(prop_oneof![
                    nonempty().prop_map(Content::Text),
                    proptest::collection::vec(
                        prop_oneof![
                            text().prop_map(ContentPart::Text),
                            text().prop_map(ContentPart::Refusal)
                        ],
                        0..3
                    )
                    .prop_map(Content::Parts),
                ]),
                proptest::collection::vec(call(), 0..3)
            )
                .prop_map(|(content, calls)| {
                    let content = match (content, calls.is_empty()) {
                        (None, true) => Some(Content::Text(String::new())),
                        (c, _) => c,
                    };
                    Message {
                        body: Body::Assistant {
                            content,
                            reasoning_content: None,
                            tool_calls: calls,
                        },
                        name: None,
                        metadata: None,
                    }
                }),
            (nonempty(), text_parts()).prop_map(|(tool_call_id, content)| Message {
                body: Body::Tool {
                    tool_call_id,
                    content,
                    is_error: false,
                },
                name: None,
                metadata: None,
            }),
        ];
        (body, name).prop_map(|(m, name)| match m.body {
            Body::Tool { .. } => m,
            _ => Message { name, ..m },
        })
    }

    proptest! {
        #[test]
        fn sendable_messages_round_trip(m in sendable()) {
            prop_assert_eq!(from_request_message(to_request_message(&m).unwrap()).unwrap(), m);
        }

        #[test]
        fn a_request_message_reads_back_the_same(m in sendable()) {
            let req = to_request_message(&m).unwrap();
            let back = to_request_message(&from_request_message(req.clone()).unwrap()).unwrap();
            prop_assert_eq!(back, req);
        }

        #[test]
        fn every_message_converts_as_openai_model_sends_it(m in sendable(), reasoning in proptest::option::of(text())) {
            let mut m = m;
            if let Body::Assistant { reasoning_content, .. } = &mut m.body {
                *reasoning_content = reasoning;
            }
            let messages = [m];
            let ours = serde_json::to_value(to_request_messages(&messages).unwrap()).unwrap();
            let wire = serde_json::to_value(wire::request("m", &ChatRequest::new(&messages), false)).unwrap();
            prop_assert_eq!(&ours, &wire["messages"]);
        }
    }
}
