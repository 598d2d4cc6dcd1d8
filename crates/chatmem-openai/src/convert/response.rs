//! async-openai's answer to a chatmem assistant message.

use async_openai::types::chat::{ChatCompletionResponseMessage, Role as OaiRole};
use chatmem::Message;

use super::{ConversionError, ConversionErrorKind, tool_calls_from, unsupported_if};
use crate::wire;

/// The assistant message an answer makes, to store with the turn: text, tool calls (ids and
/// arguments as the model wrote them), and a refusal as the text (chatmem has no refusal
/// field; see the [module docs](super)).
///
/// # Errors
/// A role other than assistant, both text and a refusal, non-empty `annotations`, `audio`,
/// `function_call`, a custom tool call, or an empty tool call id or name.
///
/// ```
/// use chatmem_openai::async_openai::types::chat::ChatCompletionResponseMessage;
/// use chatmem_openai::convert::from_response_message;
///
/// let answer = ChatCompletionResponseMessage {
///     refusal: Some("I can't help with that.".into()),
///     role: chatmem_openai::async_openai::types::chat::Role::Assistant,
///     ..Default::default()
/// };
/// let m = from_response_message(answer)?;
/// assert_eq!(m.text().as_deref(), Some("I can't help with that."));
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn from_response_message(message: ChatCompletionResponseMessage) -> Result<Message, ConversionError> {
    // Every field by name, so a field a new async-openai adds fails to compile here.
    #[allow(deprecated)]
    let ChatCompletionResponseMessage {
        content,
        refusal,
        tool_calls,
        annotations,
        role,
        function_call,
        audio,
    } = message;
    if role != OaiRole::Assistant {
        return Err(ConversionErrorKind::NotAssistant { role: role_name(role) }.into());
    }
    // OpenAI sends `"annotations": []` with every answer; only citations would be lost.
    unsupported_if(annotations.is_some_and(|a| !a.is_empty()), "assistant", "annotations")?;
    unsupported_if(audio.is_some(), "assistant", "audio")?;
    unsupported_if(function_call.is_some(), "assistant", "function_call")?;
    Ok(wire::answer(
        content.map(chatmem::Content::Text),
        refusal,
        tool_calls_from(tool_calls)?,
        None,
    )?)
}

fn role_name(role: OaiRole) -> &'static str {
    match role {
        OaiRole::Developer => "developer",
        OaiRole::System => "system",
        OaiRole::User => "user",
        OaiRole::Assistant => "assistant",
        OaiRole::Tool => "tool",
        OaiRole::Function => "function",
    }
}

#[cfg(test)]
mod tests {
    use async_openai::types::chat::{
        ChatCompletionMessageCustomToolCall, ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
        ChatCompletionRequestMessage, ChatCompletionResponseMessageAnnotation, ChatCompletionResponseMessageAudio,
        CustomTool, UrlCitation,
    };
    use chatmem::ToolCall;
    use serde_json::json;

    use super::*;
    use crate::convert::from_request_message;
    use crate::convert::tests::{kind, response};

    #[test]
    fn tool_calls_must_be_functions_with_ids_and_names() {
        let custom = response(json!({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"type": "custom", "id": "c2", "custom_tool": {"name": "g", "input": "x"}}
        ]}));
        assert_eq!(
            kind(from_response_message(custom)),
            ConversionErrorKind::UnsupportedToolCall {
                index: 1,
                kind: "custom"
            }
        );
        let custom = ChatCompletionMessageToolCalls::Custom(ChatCompletionMessageCustomToolCall {
            id: "c".into(),
            custom_tool: CustomTool {
                name: "g".into(),
                input: "x".into(),
            },
        });
        let a = ChatCompletionRequestAssistantMessage {
            tool_calls: Some(vec![custom]),
            ..Default::default()
        };
        assert_eq!(
            kind(from_request_message(ChatCompletionRequestMessage::Assistant(a))),
            ConversionErrorKind::UnsupportedToolCall {
                index: 0,
                kind: "custom"
            }
        );
        for (call, field) in [
            (
                json!({"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}),
                "id",
            ),
            (
                json!({"id": "c", "type": "function", "function": {"name": "", "arguments": "{}"}}),
                "function.name",
            ),
        ] {
            let r = response(json!({"role": "assistant", "tool_calls": [call]}));
            assert_eq!(
                kind(from_response_message(r)),
                ConversionErrorKind::EmptyToolCallField { index: 0, field }
            );
        }
    }

    #[test]
    fn a_response_becomes_an_assistant_message() {
        // An OpenAI answer as it comes, nulls and empty annotations included.
        let r = response(json!({
            "role": "assistant", "content": null, "refusal": null, "annotations": [],
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "order_status", "arguments": "{\"order\":\"LC202610060018\"}"}}]
        }));
        assert_eq!(
            from_response_message(r).unwrap(),
            Message::assistant_tool_calls(vec![ToolCall::new(
                "call_1",
                "order_status",
                "{\"order\":\"LC202610060018\"}"
            )])
        );
        let r = response(json!({"role": "assistant", "content": "可以退。", "annotations": []}));
        assert_eq!(from_response_message(r).unwrap(), Message::assistant("可以退。"));
        // DeepSeek's "" next to tool calls is no text.
        let r = response(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]}));
        assert_eq!(from_response_message(r).unwrap().text(), None);
        let r = response(json!({"role": "user", "content": "x"}));
        assert_eq!(
            kind(from_response_message(r)),
            ConversionErrorKind::NotAssistant { role: "user" }
        );
    }

    #[test]
    fn refusals_become_the_text_and_never_overwrite_it() {
        let r = response(json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}));
        assert_eq!(
            from_response_message(r).unwrap(),
            Message::assistant("I can't help with that.")
        );
        let r = response(json!({"role": "assistant", "content": "", "refusal": "no"}));
        assert_eq!(from_response_message(r).unwrap(), Message::assistant("no"));
        let r = response(json!({"role": "assistant", "content": "sure", "refusal": "no"}));
        assert_eq!(kind(from_response_message(r)), ConversionErrorKind::ContentAndRefusal);

        let req: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "assistant", "refusal": "no"})).unwrap();
        assert_eq!(from_request_message(req).unwrap(), Message::assistant("no"));
        let req: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "assistant", "content": "sure", "refusal": "no"})).unwrap();
        assert_eq!(kind(from_request_message(req)), ConversionErrorKind::ContentAndRefusal);
    }

    #[test]
    fn response_fields_chatmem_lacks_are_errors() {
        let mut r = response(json!({"role": "assistant", "content": "see the source"}));
        r.annotations = Some(vec![ChatCompletionResponseMessageAnnotation::UrlCitation {
            url_citation: UrlCitation {
                end_index: 1,
                start_index: 0,
                title: "t".into(),
                url: "https://example.com".into(),
            },
        }]);
        assert_eq!(
            kind(from_response_message(r.clone())),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "annotations"
            }
        );
        r.annotations = None;
        r.audio = Some(ChatCompletionResponseMessageAudio {
            id: "a".into(),
            expires_at: 0,
            data: String::new(),
            transcript: "hi".into(),
        });
        assert_eq!(
            kind(from_response_message(r)),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "audio"
            }
        );
        let r = response(json!({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}));
        assert_eq!(
            kind(from_response_message(r)),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "function_call"
            }
        );
    }
}
