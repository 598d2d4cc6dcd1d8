//! rig messages to chatmem messages and back.
//!
//! chatmem's fields hold what the model sees (so windows and token counts work on it); what
//! rig keeps beside that (who produced a turn, how it ended, provider items, a rig-issued call
//! id, JSON tool output, how tool results were grouped) rides in the message's metadata under
//! [`METADATA_KEY`], which chatmem stores and never sends to a model. Anything else rig can say
//! and chatmem cannot hold is refused with [`Unsupported`]; every converted message is also
//! converted back and compared, so a loss nobody foresaw is refused too, never stored.
//!
//! | rig | chatmem | `metadata.rig` |
//! |---|---|---|
//! | `System { content }` | system message | — |
//! | `User` with one `Text` | user message, text content | — |
//! | `User` with several `Text`/`Image` | user message, parts (`text`, `image_url`) | — |
//! | `Image` from a URL (no media type), `detail` | `image_url` part `{url, detail}` | — |
//! | `Image` from base64 with a media type | `image_url` part with a `data:<mime>;base64,…` URL | — |
//! | `User` of `ToolResult`s | one tool message per result: `tool_call_id` = the call id, `name` = the tool, `content` = its text, `is_error` | `joins_previous` (2nd result on), `content: "json"` (a `Json` block, stored as its JSON text), `local_call` (a rig-issued id) |
//! | `Assistant` blocks `Reasoning`?, `Text`?, `ToolCall`* | assistant message: `reasoning_content`, `content`, `tool_calls` (`id`, `name`, arguments as JSON text, or the invalid text rig kept) | `origin`, `stop`, `native` (each block's provider item), `reasoning_redacted`, `local_calls`, `no_text` (a turn with neither text nor calls is stored with empty text) |
//!
//! Refused ([`Unsupported`]): audio, video and document content; assistant images; opaque
//! provider items; citations; images as raw bytes, file ids, strings or base64 without a
//! media type, and image URLs with a media type; a user message mixing tool results with
//! other content; tool results of an image or of several blocks; assistant turns with two
//! text or reasoning blocks or blocks out of that order; provider items on user content.
//!
//! Back from chatmem ([`Unreadable`]): user content parts other than text and image URL,
//! content parts on a system, assistant or tool message, a `name`
//! on a user or assistant message, empty call ids or tool names, image details other than
//! low/high/auto, data URLs of media types rig does not know, and a `metadata.rig` record
//! this crate did not write are refused rather than changed. Other metadata is chatmem's and
//! not given to rig.

mod from_chatmem;
mod to_chatmem;

use chatmem::{Body, Message as CmMessage};
use rig_core::message::{Message as RigMessage, UserContent};
use serde_json::Value;

use from_chatmem::{message_to_rig, record, tool_result_to_rig};
use to_chatmem::message_to_chatmem;

/// The metadata key under which a converted message keeps what rig has and chatmem has no
/// field for (an object; absent when there is nothing).
pub const METADATA_KEY: &str = "rig";

/// Something a rig message holds that chatmem cannot store. Named so the caller knows which
/// content to change; nothing of the batch was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unsupported {
    /// A content kind chatmem has no field for (`audio`, `video`, `document`, an assistant
    /// `image`, an `opaque` provider item).
    #[error("{0} content (chatmem has no field for it)")]
    Content(&'static str),
    /// An image source other than a URL or base64 data with a media type.
    #[error("an image given as {0} (chatmem holds images as a URL or a base64 data URL with a media type)")]
    ImageSource(&'static str),
    /// An image URL with a media type: chatmem's image part has no media type field.
    #[error("an image URL with a media type (chatmem's image part has no media type field)")]
    ImageUrlMediaType,
    /// A user message that mixes tool results with other content.
    #[error(
        "a user message mixing tool results with other content (chatmem holds each tool result as its own message)"
    )]
    MixedToolResults,
    /// A tool result that is not one text or one JSON block.
    #[error("a tool result of {0} (chatmem holds one text or one JSON block per result)")]
    ToolResultContent(&'static str),
    /// An assistant turn that chatmem's one text, one reasoning and list of calls cannot hold in
    /// its order: more than one text or reasoning block, or blocks out of the order
    /// reasoning, text, tool calls.
    #[error("an assistant turn with {0} (chatmem holds at most one reasoning, then one text, then tool calls)")]
    AssistantLayout(&'static str),
    /// Citations on text: chatmem has no field for them.
    #[error("text with citations (chatmem has no field for them)")]
    Citations,
    /// A provider item on user or tool-result content.
    #[error("a provider item on {0} (kept only on assistant blocks)")]
    Native(&'static str),
    /// The message would not read back as it was (the last check, after every rule above).
    #[error("content that would not read back unchanged: {0}")]
    NotLossless(&'static str),
}

/// Something stored in chatmem that rig cannot hold, or a rig record in metadata that does
/// not read: loading it would change what the model sees, so it is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unreadable {
    /// A content part kind rig has no type for (`input_audio`, `file`, ...).
    #[error("a content part of type {0:?} (rig has no type for it)")]
    ContentPart(String),
    /// Content parts on a system, assistant or tool message: rig holds that content as one
    /// text.
    #[error("a {0} message's content as a list of parts (rig holds it as one text)")]
    Parts(&'static str),
    /// A participant `name` on a user or assistant message: rig's messages have no name.
    #[error("a participant name on a {0} message (rig's messages have no name)")]
    Name(&'static str),
    /// A tool call or result with an empty id.
    #[error("a tool call id that is empty")]
    EmptyCallId,
    /// A tool call or result without a tool name (a tool result's name is chatmem's `name`).
    #[error("a tool {0} without a tool name")]
    EmptyToolName(&'static str),
    /// An image detail other than `low`, `high` or `auto`.
    #[error("an image detail {0:?} (rig knows low, high and auto)")]
    ImageDetail(String),
    /// A base64 data URL whose media type rig does not know.
    #[error("an image data URL of media type {0:?} (rig does not know it)")]
    ImageMediaType(String),
    /// A developer message: rig has system messages only, and would lose the role.
    #[error("a developer message (rig has system messages only)")]
    Developer,
    /// The `rig` metadata record is not what this crate writes.
    #[error("metadata `{METADATA_KEY}.{0}` that does not read")]
    Metadata(&'static str),
}

/// Converts rig messages to chatmem messages, one or more per rig message (a user message of
/// several tool results becomes one tool message per result). Checks every message reads
/// back unchanged.
///
/// ```
/// use rig_core::message::Message;
/// let stored = chatmem_rig::to_chatmem(&[Message::user("我的订单是 LC202610060018，还没发货。")])?;
/// assert_eq!(stored[0], chatmem::Message::user("我的订单是 LC202610060018，还没发货。"));
/// # Ok::<(), chatmem_rig::ConvertError>(())
/// ```
///
/// # Errors
/// [`ConvertError::Unsupported`] naming the message (by index) and what chatmem cannot hold.
pub fn to_chatmem(messages: &[RigMessage]) -> Result<Vec<CmMessage>, ConvertError> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let converted = message_to_chatmem(message).map_err(|what| ConvertError::Unsupported { index, what })?;
        // The last check: what would load back is what was given.
        let back = to_rig(converted.clone()).map_err(|_| ConvertError::Unsupported {
            index,
            what: Unsupported::NotLossless("it does not read back"),
        })?;
        if back.len() != 1 || back.first() != Some(message) {
            return Err(ConvertError::Unsupported {
                index,
                what: Unsupported::NotLossless(lost_what(message)),
            });
        }
        // And a durable store reads it back: stores keep chatmem's JSON form, whose reader
        // has rules of its own.
        if converted.iter().any(|m| !stores_as_json(m)) {
            return Err(ConvertError::Unsupported {
                index,
                what: Unsupported::NotLossless("chatmem's stored form would not read back"),
            });
        }
        out.extend(converted);
    }
    Ok(out)
}

/// Converts chatmem messages (a window, system first) to rig messages. Consecutive tool
/// results that were one rig message are one again.
///
/// ```
/// let rig = chatmem_rig::to_rig(vec![chatmem::Message::system("你是邻里仓售后。")])?;
/// assert_eq!(rig, [rig_core::message::Message::system("你是邻里仓售后。")]);
/// # Ok::<(), chatmem_rig::ConvertError>(())
/// ```
///
/// # Errors
/// [`ConvertError::Unreadable`] naming the message (by index) and what rig cannot hold.
pub fn to_rig(messages: Vec<CmMessage>) -> Result<Vec<RigMessage>, ConvertError> {
    let mut out: Vec<RigMessage> = Vec::with_capacity(messages.len());
    let mut previous_was_tool = false;
    for (index, message) in messages.into_iter().enumerate() {
        let err = |what| ConvertError::Unreadable { index, what };
        let rig = record(&message).map_err(err)?;
        let is_tool = matches!(message.body, Body::Tool { .. });
        if is_tool {
            let result = tool_result_to_rig(message, &rig).map_err(err)?;
            let joins = previous_was_tool && rig.get("joins_previous").and_then(Value::as_bool) == Some(true);
            match out.last_mut() {
                Some(RigMessage::User { content }) if joins => content.push(UserContent::ToolResult(result)),
                _ => out.push(RigMessage::User {
                    content: vec![UserContent::ToolResult(result)],
                }),
            }
        } else {
            out.push(message_to_rig(message, &rig).map_err(err)?);
        }
        previous_was_tool = is_tool;
    }
    Ok(out)
}

/// A failed conversion, naming the message by its index in the batch (rig's messages for
/// [`to_chatmem`], chatmem's for [`to_rig`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// rig → chatmem: chatmem cannot hold this.
    #[error("rig message {index} cannot be stored in chatmem: {what}")]
    Unsupported {
        /// The index of the rig message.
        index: usize,
        /// What chatmem cannot hold.
        #[source]
        what: Unsupported,
    },
    /// chatmem → rig: rig cannot hold this.
    #[error("stored message {index} cannot be given to rig: {what}")]
    Unreadable {
        /// The index of the chatmem message.
        index: usize,
        /// What rig cannot hold.
        #[source]
        what: Unreadable,
    },
}

/// Whether `message` written as chatmem's JSON reads back as itself.
fn stores_as_json(message: &CmMessage) -> bool {
    serde_json::to_value(message)
        .and_then(serde_json::from_value::<CmMessage>)
        .is_ok_and(|back| back == *message)
}

/// A best guess at what the round-trip check lost, for its error.
fn lost_what(message: &RigMessage) -> &'static str {
    match message {
        RigMessage::User { content } if content.iter().any(|c| matches!(c, UserContent::Image(_))) => {
            "an image (a URL that is itself a base64 data URL?)"
        }
        RigMessage::Assistant(_) => "an assistant turn (tool arguments or provider items)",
        _ => "the message",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::{ContentPart, ImageUrl, Message as Cm, Metadata, ToolCall as CmCall};
    use rig_core::message::{
        AssistantContent, AssistantMessage, Audio, ImageDetail, ImageMediaType, Origin, Reasoning, StopReason,
        ToolCall, ToolFunction, ToolName, ToolResultContent,
    };
    use serde_json::json;

    fn name(n: &str) -> ToolName {
        ToolName::new(n).unwrap_or_else(|_| unreachable!())
    }

    pub(super) fn call(id: &str, tool: &str, arguments: Value) -> ToolCall {
        ToolCall::from_wire(id, ToolFunction::new(name(tool), arguments))
    }

    /// rig → chatmem gives `expected`, and chatmem → rig gives the rig messages back.
    fn round_trip(rig: Vec<RigMessage>, expected: Vec<Cm>) {
        let stored = to_chatmem(&rig).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored, expected);
        assert_eq!(to_rig(stored).unwrap_or_else(|e| panic!("{e}")), rig);
    }

    pub(super) fn refused(rig: RigMessage) -> Unsupported {
        match to_chatmem(&[RigMessage::user("ok"), rig]) {
            Err(ConvertError::Unsupported { index: 1, what }) => what,
            other => panic!("not refused at index 1: {other:?}"),
        }
    }

    pub(super) fn unreadable(cm: Cm) -> Unreadable {
        match to_rig(vec![Cm::user("ok"), cm]) {
            Err(ConvertError::Unreadable { index: 1, what }) => what,
            other => panic!("not refused at index 1: {other:?}"),
        }
    }

    pub(super) fn rig_record(rig: Value) -> Metadata {
        let mut m = Metadata::new();
        m.insert(METADATA_KEY.into(), rig);
        m
    }

    #[test]
    fn system_user_and_assistant_text() {
        round_trip(
            vec![
                RigMessage::system("你是邻里仓售后。"),
                RigMessage::user("我的订单是 LC202610060018，还没发货。"),
                RigMessage::assistant("已查到订单 LC202610060018，尚未发货。"),
            ],
            vec![
                Cm::system("你是邻里仓售后。"),
                Cm::user("我的订单是 LC202610060018，还没发货。"),
                Cm::assistant("已查到订单 LC202610060018，尚未发货。"),
            ],
        );
    }

    #[test]
    fn several_text_blocks_are_parts() {
        round_trip(
            vec![RigMessage::User {
                content: vec![UserContent::text("a"), UserContent::text("b")],
            }],
            vec![Cm::user_parts(vec![
                ContentPart::Text("a".into()),
                ContentPart::Text("b".into()),
            ])],
        );
    }

    #[test]
    fn images_by_url_and_base64() {
        round_trip(
            vec![RigMessage::User {
                content: vec![
                    UserContent::text("这个包裹破了"),
                    UserContent::image_url("https://example.invalid/p.jpg", None, Some(ImageDetail::High)),
                    UserContent::image_base64("aGVsbG8=", Some(ImageMediaType::PNG), None),
                ],
            }],
            vec![Cm::user_parts(vec![
                ContentPart::Text("这个包裹破了".into()),
                ContentPart::ImageUrl(ImageUrl {
                    url: "https://example.invalid/p.jpg".into(),
                    detail: Some("high".into()),
                }),
                ContentPart::ImageUrl(ImageUrl {
                    url: "data:image/png;base64,aGVsbG8=".into(),
                    detail: None,
                }),
            ])],
        );
    }

    #[test]
    fn tool_calls_and_results_keep_their_ids() {
        let order = call("call_1", "order_status", json!({"order": "LC202610060018"}));
        let refund = call("call_2", "refund_policy", json!({}));
        round_trip(
            vec![
                RigMessage::Assistant(AssistantMessage::new(vec![
                    AssistantContent::text("我查一下。"),
                    AssistantContent::ToolCall(order.clone()),
                    AssistantContent::ToolCall(refund.clone()),
                ])),
                RigMessage::tool_results(vec![
                    order.result(vec![ToolResultContent::text("未发货")]),
                    refund.error_result(vec![ToolResultContent::text("服务超时")]),
                ]),
            ],
            vec![
                Cm {
                    body: Body::Assistant {
                        content: Some("我查一下。".into()),
                        reasoning_content: None,
                        tool_calls: vec![
                            CmCall::new("call_1", "order_status", r#"{"order":"LC202610060018"}"#),
                            CmCall::new("call_2", "refund_policy", "{}"),
                        ],
                    },
                    name: None,
                    metadata: None,
                },
                Cm::tool_result("call_1", "未发货").with_name("order_status"),
                Cm::tool_error("call_2", "服务超时")
                    .with_name("refund_policy")
                    .with_metadata(rig_record(json!({"joins_previous": true}))),
            ],
        );
    }

    #[test]
    fn separate_tool_result_messages_stay_separate() {
        let a = call("call_1", "t", json!({}));
        let b = call("call_2", "t", json!({}));
        let rig = vec![
            RigMessage::tool_results(vec![a.result(vec![ToolResultContent::text("1")])]),
            RigMessage::tool_results(vec![b.result(vec![ToolResultContent::text("2")])]),
        ];
        let stored = to_chatmem(&rig).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(to_rig(stored).unwrap_or_else(|e| panic!("{e}")), rig);
    }

    #[test]
    fn json_tool_output_and_invalid_arguments() {
        let bad = ToolCall::from_wire("call_1", ToolFunction::parse(name("t"), r#"{"order": "LC2"#));
        round_trip(
            vec![
                RigMessage::from(bad.clone()),
                RigMessage::tool_results(vec![
                    bad.result(vec![ToolResultContent::json(json!({"b": 1, "a": [true]}))]),
                ]),
            ],
            vec![
                Cm::assistant_tool_calls(vec![CmCall::new("call_1", "t", r#"{"order": "LC2"#)]),
                Cm::tool_result("call_1", r#"{"b":1,"a":[true]}"#)
                    .with_name("t")
                    .with_metadata(rig_record(json!({"content": "json"}))),
            ],
        );
    }

    #[test]
    fn reasoning_origin_stop_and_rig_issued_ids() {
        let local = ToolCall::from_wire("", ToolFunction::new(name("t"), json!({"x": 1})));
        assert!(local.id.is_local());
        let turn = AssistantMessage::new(vec![
            AssistantContent::Reasoning(Reasoning {
                text: String::new(),
                redacted: true,
                native: None,
            }),
            AssistantContent::text("好的"),
            AssistantContent::ToolCall(local.clone()),
        ])
        .with_origin(Origin::new("openai.chat", "openai", "m"))
        .with_stop(StopReason::ToolUse);
        let rig = vec![
            RigMessage::Assistant(turn),
            RigMessage::tool_results(vec![local.result(vec![ToolResultContent::text("r")])]),
        ];
        let stored = to_chatmem(&rig).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored[0].tool_calls()[0].id, local.id.wire());
        assert_eq!(stored[1].tool_call_id(), Some(&*local.id.wire()));
        assert_eq!(to_rig(stored).unwrap_or_else(|e| panic!("{e}")), rig);
    }

    #[test]
    fn a_turn_without_text_or_calls_is_stored_readable() {
        let rig = vec![
            RigMessage::Assistant(AssistantMessage::new(vec![AssistantContent::reasoning("先查订单")])),
            RigMessage::Assistant(AssistantMessage::new(vec![])),
        ];
        let stored = to_chatmem(&rig).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored[0].text().as_deref(), Some(""));
        assert!(stored.iter().all(stores_as_json));
        assert_eq!(to_rig(stored).unwrap_or_else(|e| panic!("{e}")), rig);
    }

    #[test]
    fn provider_items_on_assistant_blocks_are_kept() {
        let text = AssistantContent::text("好的").with_native(json!({"type": "output_text", "text": "好的"}));
        let rig = vec![RigMessage::Assistant(AssistantMessage::new(vec![text]))];
        let stored = to_chatmem(&rig).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored[0].text().as_deref(), Some("好的"));
        assert_eq!(to_rig(stored).unwrap_or_else(|e| panic!("{e}")), rig);
    }

    #[test]
    fn errors_name_the_message_and_the_content() {
        let err = to_chatmem(&[UserContent::Audio(Audio::default()).into()]).err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("rig message 0 cannot be stored in chatmem: audio content (chatmem has no field for it)")
        );
    }
}
