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
//! Back from chatmem ([`Unreadable`]): content parts other than text and image URL, a `name`
//! on a user or assistant message, empty call ids or tool names, image details other than
//! low/high/auto, data URLs of media types rig does not know, and a `metadata.rig` record
//! this crate did not write are refused rather than changed. Other metadata is chatmem's and
//! not given to rig.

use chatmem::{
    Body, ContentPart, ImageUrl, Message as CmMessage, Metadata, ToolCall as CmToolCall, UserContent as CmUser,
};
use rig_core::message::{
    AssistantContent, AssistantMessage, CallId, DocumentSourceKind, Image, ImageDetail, ImageMediaType,
    Message as RigMessage, MimeType, Native, ProviderCallId, Reasoning, Text, ToolCall, ToolFunction, ToolName,
    ToolResult, ToolResultContent, UserContent,
};
use serde_json::{Map, Value, json};

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

fn message_to_chatmem(message: &RigMessage) -> Result<Vec<CmMessage>, Unsupported> {
    match message {
        RigMessage::System { content } => Ok(vec![CmMessage::system(content.clone())]),
        RigMessage::User { content } => user_to_chatmem(content),
        RigMessage::Assistant(turn) => assistant_to_chatmem(turn).map(|m| vec![m]),
    }
}

fn user_to_chatmem(content: &[UserContent]) -> Result<Vec<CmMessage>, Unsupported> {
    let results = content
        .iter()
        .filter(|c| matches!(c, UserContent::ToolResult(_)))
        .count();
    if results > 0 {
        if results != content.len() {
            return Err(Unsupported::MixedToolResults);
        }
        return content
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                UserContent::ToolResult(r) => Some(tool_result_to_chatmem(r, i > 0)),
                _ => None,
            })
            .collect();
    }
    let mut parts = Vec::with_capacity(content.len());
    for block in content {
        parts.push(match block {
            UserContent::Text(text) => ContentPart::Text(plain_text(text, "user text")?),
            UserContent::Image(image) => ContentPart::ImageUrl(image_to_chatmem(image)?),
            UserContent::Audio(_) => return Err(Unsupported::Content("audio")),
            UserContent::Video(_) => return Err(Unsupported::Content("video")),
            UserContent::Document(_) => return Err(Unsupported::Content("document")),
            UserContent::ToolResult(_) => return Err(Unsupported::MixedToolResults),
        });
    }
    // One text block is chatmem's plain text content; anything else is a list of parts.
    let message = match parts.as_slice() {
        [ContentPart::Text(text)] => CmMessage::user(text.clone()),
        _ => CmMessage::user_parts(parts),
    };
    Ok(vec![message])
}

/// Text without citations or provider item (user and tool-result text).
fn plain_text(text: &Text, what: &'static str) -> Result<String, Unsupported> {
    if !text.citations().is_empty() {
        return Err(Unsupported::Citations);
    }
    if text.native.is_some() {
        return Err(Unsupported::Native(what));
    }
    Ok(text.text.clone())
}

fn image_to_chatmem(image: &Image) -> Result<ImageUrl, Unsupported> {
    if image.native.is_some() {
        return Err(Unsupported::Native("an image"));
    }
    let url = match (&image.data, &image.media_type) {
        (DocumentSourceKind::Url(url), None) => url.clone(),
        (DocumentSourceKind::Url(_), Some(_)) => return Err(Unsupported::ImageUrlMediaType),
        (DocumentSourceKind::Base64(data), Some(media_type)) => {
            format!("data:{};base64,{data}", media_type.to_mime_type())
        }
        (DocumentSourceKind::Base64(_), None) => return Err(Unsupported::ImageSource("base64 without a media type")),
        (DocumentSourceKind::Raw(_), _) => return Err(Unsupported::ImageSource("raw bytes")),
        (DocumentSourceKind::FileId(_), _) => return Err(Unsupported::ImageSource("a provider file id")),
        (DocumentSourceKind::String(_), _) => return Err(Unsupported::ImageSource("a string")),
        (DocumentSourceKind::Unknown, _) => return Err(Unsupported::ImageSource("an unknown source")),
    };
    let detail = image.detail.as_ref().map(|d| {
        match d {
            ImageDetail::Low => "low",
            ImageDetail::High => "high",
            ImageDetail::Auto => "auto",
        }
        .to_owned()
    });
    Ok(ImageUrl { url, detail })
}

fn tool_result_to_chatmem(result: &ToolResult, joins_previous: bool) -> Result<CmMessage, Unsupported> {
    let mut rig = Map::new();
    let content = match result.content.as_slice() {
        [ToolResultContent::Text(text)] => plain_text(text, "a tool result")?,
        [ToolResultContent::Json { value }] => {
            rig.insert("content".into(), json!("json"));
            value.to_string()
        }
        [ToolResultContent::Image(_)] => return Err(Unsupported::ToolResultContent("an image")),
        [] => return Err(Unsupported::ToolResultContent("no blocks")),
        _ => return Err(Unsupported::ToolResultContent("several blocks")),
    };
    if result.call.is_local() {
        rig.insert("local_call".into(), json!(true));
    }
    if joins_previous {
        rig.insert("joins_previous".into(), json!(true));
    }
    let id = result.call.wire().into_owned();
    let message = if result.is_error {
        CmMessage::tool_error(id, content)
    } else {
        CmMessage::tool_result(id, content)
    };
    Ok(with_record(message.with_name(result.name.as_str()), rig))
}

fn assistant_to_chatmem(turn: &AssistantMessage) -> Result<CmMessage, Unsupported> {
    let mut reasoning: Option<String> = None;
    let mut text: Option<String> = None;
    let mut calls = Vec::new();
    let mut natives = Vec::with_capacity(turn.content.len());
    let mut local_calls = Vec::new();
    let mut redacted = false;
    // 0 reasoning, 1 text, 2 calls: blocks must come in this order to be stored in order.
    let mut stage = 0;
    for block in &turn.content {
        let (this_stage, native) = match block {
            AssistantContent::Reasoning(r) => {
                if reasoning.is_some() {
                    return Err(Unsupported::AssistantLayout("more than one reasoning block"));
                }
                reasoning = Some(r.text.clone());
                redacted = r.redacted;
                (0, &r.native)
            }
            AssistantContent::Text(t) => {
                if text.is_some() {
                    return Err(Unsupported::AssistantLayout("more than one text block"));
                }
                if !t.citations().is_empty() {
                    return Err(Unsupported::Citations);
                }
                text = Some(t.text.clone());
                (1, &t.native)
            }
            AssistantContent::ToolCall(call) => {
                let arguments = match &call.function.invalid_arguments {
                    Some(raw) => raw.clone(),
                    None => Value::Object(call.function.arguments.clone()).to_string(),
                };
                if call.id.is_local() {
                    local_calls.push(json!(call.id.wire()));
                }
                calls.push(CmToolCall::new(call.id.wire(), call.function.name.as_str(), arguments));
                (2, &call.native)
            }
            AssistantContent::Image(_) => return Err(Unsupported::Content("assistant image")),
            AssistantContent::Opaque(_) => return Err(Unsupported::Content("opaque provider item")),
            _ => {
                return Err(Unsupported::Content(
                    "an assistant block of a kind this crate does not know",
                ));
            }
        };
        if this_stage < stage {
            return Err(Unsupported::AssistantLayout("blocks out of order"));
        }
        stage = this_stage;
        natives.push(native.as_ref());
    }
    let mut rig = Map::new();
    if let Some(origin) = &turn.origin {
        rig.insert("origin".into(), to_value(origin)?);
    }
    if let Some(stop) = &turn.stop {
        rig.insert("stop".into(), to_value(stop)?);
    }
    if natives.iter().any(Option::is_some) {
        let natives = natives
            .iter()
            .map(|n| n.map_or(Ok(Value::Null), to_value))
            .collect::<Result<_, _>>()?;
        rig.insert("native".into(), Value::Array(natives));
    }
    if redacted {
        rig.insert("reasoning_redacted".into(), json!(true));
    }
    if !local_calls.is_empty() {
        rig.insert("local_calls".into(), Value::Array(local_calls));
    }
    // chatmem's assistant message needs text or calls: a turn with neither (reasoning only,
    // or nothing) is stored with empty text, marked as no text block.
    if text.is_none() && calls.is_empty() {
        rig.insert("no_text".into(), json!(true));
    }
    let content = match text {
        None if calls.is_empty() => Some(String::new()),
        text => text,
    };
    let message = CmMessage {
        body: Body::Assistant {
            content,
            reasoning_content: reasoning,
            tool_calls: calls,
        },
        name: None,
        metadata: None,
    };
    Ok(with_record(message, rig))
}

fn to_value(value: &impl rig_core::serde::Serialize) -> Result<Value, Unsupported> {
    serde_json::to_value(value).map_err(|_| Unsupported::NotLossless("a provider record that does not serialize"))
}

fn with_record(mut message: CmMessage, rig: Map<String, Value>) -> CmMessage {
    if !rig.is_empty() {
        let mut metadata = Metadata::new();
        metadata.insert(METADATA_KEY.into(), Value::Object(rig));
        message.metadata = Some(metadata);
    }
    message
}

/// The message's `rig` record (empty when it has none).
fn record(message: &CmMessage) -> Result<Map<String, Value>, Unreadable> {
    match message.metadata.as_ref().and_then(|m| m.get(METADATA_KEY)) {
        None => Ok(Map::new()),
        Some(Value::Object(rig)) => Ok(rig.clone()),
        Some(_) => Err(Unreadable::Metadata("(not an object)")),
    }
}

fn message_to_rig(message: CmMessage, rig: &Map<String, Value>) -> Result<RigMessage, Unreadable> {
    match message.body {
        Body::System { content } => Ok(RigMessage::System { content }),
        Body::User { content } => {
            if message.name.is_some() {
                return Err(Unreadable::Name("user"));
            }
            let content = match content {
                CmUser::Text(text) => vec![UserContent::text(text)],
                CmUser::Parts(parts) => parts.into_iter().map(part_to_rig).collect::<Result<_, _>>()?,
            };
            Ok(RigMessage::User { content })
        }
        Body::Assistant {
            content,
            reasoning_content,
            tool_calls,
        } => {
            if message.name.is_some() {
                return Err(Unreadable::Name("assistant"));
            }
            assistant_to_rig(content, reasoning_content, tool_calls, rig).map(RigMessage::Assistant)
        }
        // `to_rig` handles tool results, which may join the previous message.
        Body::Tool { .. } => Err(Unreadable::Metadata("(a tool result out of place)")),
    }
}

fn part_to_rig(part: ContentPart) -> Result<UserContent, Unreadable> {
    match part {
        ContentPart::Text(text) => Ok(UserContent::text(text)),
        ContentPart::ImageUrl(image) => image_to_rig(image).map(UserContent::Image),
        ContentPart::Other(obj) => Err(Unreadable::ContentPart(
            obj.get("type").and_then(Value::as_str).unwrap_or("(none)").to_owned(),
        )),
    }
}

fn image_to_rig(image: ImageUrl) -> Result<Image, Unreadable> {
    let detail = image
        .detail
        .map(|d| d.parse::<ImageDetail>().map_err(|()| Unreadable::ImageDetail(d)))
        .transpose()?;
    // A base64 data URL is how a base64 image with a media type is stored.
    let (data, media_type) = match image
        .url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((mime, data)) => {
            let media_type =
                ImageMediaType::from_mime_type(mime).ok_or_else(|| Unreadable::ImageMediaType(mime.to_owned()))?;
            (DocumentSourceKind::Base64(data.to_owned()), Some(media_type))
        }
        None => (DocumentSourceKind::Url(image.url), None),
    };
    Ok(Image {
        data,
        media_type,
        detail,
        native: None,
    })
}

fn tool_result_to_rig(message: CmMessage, rig: &Map<String, Value>) -> Result<ToolResult, Unreadable> {
    let Body::Tool {
        tool_call_id,
        content,
        is_error,
    } = message.body
    else {
        return Err(Unreadable::Metadata("(not a tool result)"));
    };
    let name = ToolName::new(message.name.unwrap_or_default()).map_err(|_| Unreadable::EmptyToolName("result"))?;
    let call = call_id(
        tool_call_id,
        rig.get("local_call").and_then(Value::as_bool) == Some(true),
    )?;
    let content = match rig.get("content").and_then(Value::as_str) {
        Some("json") => {
            ToolResultContent::json(serde_json::from_str(&content).map_err(|_| Unreadable::Metadata("content"))?)
        }
        None => ToolResultContent::text(content),
        Some(_) => return Err(Unreadable::Metadata("content")),
    };
    Ok(ToolResult {
        call,
        name,
        content: vec![content],
        is_error,
    })
}

fn call_id(id: String, local: bool) -> Result<CallId, Unreadable> {
    if local {
        // A rig-issued id is a UUID; serde is the only public way to rebuild one.
        return serde_json::from_value(json!({ "local": id })).map_err(|_| Unreadable::Metadata("local_call"));
    }
    ProviderCallId::new(id)
        .map(CallId::Provider)
        .ok_or(Unreadable::EmptyCallId)
}

fn assistant_to_rig(
    text: Option<String>,
    reasoning: Option<String>,
    calls: Vec<CmToolCall>,
    rig: &Map<String, Value>,
) -> Result<AssistantMessage, Unreadable> {
    let local_calls: Vec<&str> = match rig.get("local_calls") {
        None => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| id.as_str().ok_or(Unreadable::Metadata("local_calls")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(Unreadable::Metadata("local_calls")),
    };
    let mut content = Vec::with_capacity(2 + calls.len());
    if let Some(text) = reasoning {
        let redacted = rig.get("reasoning_redacted").and_then(Value::as_bool) == Some(true);
        content.push(AssistantContent::Reasoning(Reasoning {
            text,
            redacted,
            native: None,
        }));
    }
    let no_text = rig.get("no_text").and_then(Value::as_bool) == Some(true);
    match text {
        Some(text) if !no_text => content.push(AssistantContent::Text(Text::new(text))),
        Some(text) if text.is_empty() => {}
        Some(_) => return Err(Unreadable::Metadata("no_text")),
        None => {}
    }
    for call in calls {
        let name = ToolName::new(call.name).map_err(|_| Unreadable::EmptyToolName("call"))?;
        let local = local_calls.contains(&call.id.as_str());
        let id = call_id(call.id, local)?;
        content.push(AssistantContent::ToolCall(ToolCall::new(
            id,
            ToolFunction::parse(name, &call.arguments),
        )));
    }
    if let Some(natives) = rig.get("native") {
        let natives = natives.as_array().ok_or(Unreadable::Metadata("native"))?;
        if natives.len() != content.len() {
            return Err(Unreadable::Metadata("native"));
        }
        for (block, native) in content.iter_mut().zip(natives) {
            if native.is_null() {
                continue;
            }
            let native: Native = serde_json::from_value(native.clone()).map_err(|_| Unreadable::Metadata("native"))?;
            match block {
                AssistantContent::Reasoning(b) => b.native = Some(native),
                AssistantContent::Text(b) => b.native = Some(native),
                AssistantContent::ToolCall(b) => b.native = Some(native),
                _ => return Err(Unreadable::Metadata("native")),
            }
        }
    }
    let origin = rig
        .get("origin")
        .map(|o| serde_json::from_value(o.clone()).map_err(|_| Unreadable::Metadata("origin")))
        .transpose()?;
    let stop = rig
        .get("stop")
        .map(|s| serde_json::from_value(s.clone()).map_err(|_| Unreadable::Metadata("stop")))
        .transpose()?;
    Ok(AssistantMessage::new(content).with_origin(origin).with_stop(stop))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::{Message as Cm, ToolCall as CmCall};
    use rig_core::message::{Audio, Document, Opaque, Origin, StopReason, Video};

    fn name(n: &str) -> ToolName {
        ToolName::new(n).unwrap_or_else(|_| unreachable!())
    }

    fn call(id: &str, tool: &str, arguments: Value) -> ToolCall {
        ToolCall::from_wire(id, ToolFunction::new(name(tool), arguments))
    }

    /// rig → chatmem gives `expected`, and chatmem → rig gives the rig messages back.
    fn round_trip(rig: Vec<RigMessage>, expected: Vec<Cm>) {
        let stored = to_chatmem(&rig).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored, expected);
        assert_eq!(to_rig(stored).unwrap_or_else(|e| panic!("{e}")), rig);
    }

    fn refused(rig: RigMessage) -> Unsupported {
        match to_chatmem(&[RigMessage::user("ok"), rig]) {
            Err(ConvertError::Unsupported { index: 1, what }) => what,
            other => panic!("not refused at index 1: {other:?}"),
        }
    }

    fn unreadable(cm: Cm) -> Unreadable {
        match to_rig(vec![Cm::user("ok"), cm]) {
            Err(ConvertError::Unreadable { index: 1, what }) => what,
            other => panic!("not refused at index 1: {other:?}"),
        }
    }

    fn rig_record(rig: Value) -> Metadata {
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
    fn refuses_what_chatmem_cannot_hold() {
        let audio = UserContent::Audio(Audio::default());
        assert_eq!(refused(audio.into()), Unsupported::Content("audio"));
        assert_eq!(
            refused(UserContent::Video(Video::default()).into()),
            Unsupported::Content("video")
        );
        let doc = UserContent::Document(Document::default());
        assert_eq!(refused(doc.into()), Unsupported::Content("document"));
        let image = AssistantContent::image_base64("aGVsbG8=", Some(ImageMediaType::PNG), None);
        assert_eq!(refused(image.into()), Unsupported::Content("assistant image"));
        let opaque = AssistantContent::Opaque(Opaque {
            item: json!({"type": "web_search_call"}),
            replay: true,
        });
        assert_eq!(refused(opaque.into()), Unsupported::Content("opaque provider item"));
    }

    #[test]
    fn refuses_image_sources_without_a_url() {
        let raw = UserContent::image_raw(vec![1, 2], Some(ImageMediaType::PNG), None);
        assert_eq!(refused(raw.into()), Unsupported::ImageSource("raw bytes"));
        let b64 = UserContent::image_base64("aGVsbG8=", None, None);
        assert_eq!(
            refused(b64.into()),
            Unsupported::ImageSource("base64 without a media type")
        );
        let typed_url = UserContent::image_url("https://x.invalid/a.png", Some(ImageMediaType::PNG), None);
        assert_eq!(refused(typed_url.into()), Unsupported::ImageUrlMediaType);
        // A URL that is itself a data URL would read back as base64: refused, not changed.
        let data_url = UserContent::image_url("data:image/png;base64,aGVsbG8=", None, None);
        assert!(matches!(refused(data_url.into()), Unsupported::NotLossless(_)));
    }

    #[test]
    fn refuses_tool_results_chatmem_cannot_hold() {
        let c = call("call_1", "t", json!({}));
        let mixed = RigMessage::User {
            content: vec![
                UserContent::ToolResult(c.result(vec![ToolResultContent::text("r")])),
                UserContent::text("and"),
            ],
        };
        assert_eq!(refused(mixed), Unsupported::MixedToolResults);
        let two = RigMessage::tool_results(vec![
            c.result(vec![ToolResultContent::text("a"), ToolResultContent::text("b")]),
        ]);
        assert_eq!(refused(two), Unsupported::ToolResultContent("several blocks"));
        let image = ToolResultContent::image_url("https://x.invalid/a.png", None, None);
        let image = RigMessage::tool_results(vec![c.result(vec![image])]);
        assert_eq!(refused(image), Unsupported::ToolResultContent("an image"));
    }

    #[test]
    fn refuses_assistant_turns_out_of_chatmem_order() {
        let two = RigMessage::Assistant(AssistantMessage::new(vec![
            AssistantContent::text("a"),
            AssistantContent::text("b"),
        ]));
        assert_eq!(refused(two), Unsupported::AssistantLayout("more than one text block"));
        let c = AssistantContent::ToolCall(call("call_1", "t", json!({})));
        let late = RigMessage::Assistant(AssistantMessage::new(vec![c, AssistantContent::text("a")]));
        assert_eq!(refused(late), Unsupported::AssistantLayout("blocks out of order"));
    }

    #[test]
    fn refuses_citations_and_provider_items_off_the_assistant() {
        use rig_core::message::{Citation, Source, SourceLocation};
        let source = Source::new(SourceLocation::Url {
            url: "https://example.invalid/policy".into(),
        });
        let cited = Text::new("未发货可退。").with_citations([Citation::new([source])]);
        let turn = RigMessage::Assistant(AssistantMessage::new(vec![AssistantContent::Text(cited)]));
        assert_eq!(refused(turn), Unsupported::Citations);
        // A user text block never carries a provider item in rig; one that does is refused.
        let user_native = match AssistantContent::text("hi").with_native(json!({"t": 1})) {
            AssistantContent::Text(t) => t,
            _ => unreachable!(),
        };
        assert_eq!(
            refused(UserContent::Text(user_native).into()),
            Unsupported::Native("user text")
        );
    }

    #[test]
    fn refuses_what_rig_cannot_hold() {
        let audio = Cm::user_parts(vec![ContentPart::Other(
            json!({"type": "input_audio", "input_audio": {}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )]);
        assert_eq!(unreadable(audio), Unreadable::ContentPart("input_audio".into()));
        assert_eq!(unreadable(Cm::user("hi").with_name("bob")), Unreadable::Name("user"));
        assert_eq!(
            unreadable(Cm::tool_result("call_1", "r")),
            Unreadable::EmptyToolName("result")
        );
        assert_eq!(
            unreadable(Cm::tool_result("", "r").with_name("t")),
            Unreadable::EmptyCallId
        );
        let detail = Cm::user_parts(vec![ContentPart::ImageUrl(ImageUrl {
            url: "https://x.invalid/a.png".into(),
            detail: Some("ultra".into()),
        })]);
        assert_eq!(unreadable(detail), Unreadable::ImageDetail("ultra".into()));
        let bmp = Cm::user_parts(vec![ContentPart::ImageUrl(ImageUrl {
            url: "data:image/bmp;base64,AA==".into(),
            detail: None,
        })]);
        assert_eq!(unreadable(bmp), Unreadable::ImageMediaType("image/bmp".into()));
        let bad = Cm::assistant("a").with_metadata(rig_record(json!({"origin": 5})));
        assert_eq!(unreadable(bad), Unreadable::Metadata("origin"));
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
