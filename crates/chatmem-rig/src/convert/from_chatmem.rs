//! chatmem messages to rig messages: chatmem's fields and the `rig` metadata record read
//! back into what rig had, and what rig cannot hold refused.

use chatmem::{Body, Content, ContentPart, ImageUrl, Message as CmMessage, ToolCall as CmToolCall};
use rig_core::message::{
    AssistantContent, AssistantMessage, CallId, DocumentSourceKind, Image, ImageDetail, ImageMediaType,
    Message as RigMessage, MimeType, Native, ProviderCallId, Reasoning, Text, ToolCall, ToolFunction, ToolName,
    ToolResult, ToolResultContent, UserContent,
};
use serde_json::{Map, Value, json};

use super::{METADATA_KEY, Unreadable};

/// The message's `rig` record (empty when it has none).
pub(super) fn record(message: &CmMessage) -> Result<Map<String, Value>, Unreadable> {
    match message.metadata.as_ref().and_then(|m| m.get(METADATA_KEY)) {
        None => Ok(Map::new()),
        Some(Value::Object(rig)) => Ok(rig.clone()),
        Some(_) => Err(Unreadable::Metadata("(not an object)")),
    }
}

pub(super) fn message_to_rig(message: CmMessage, rig: &Map<String, Value>) -> Result<RigMessage, Unreadable> {
    match message.body {
        Body::System { content } => Ok(RigMessage::System {
            content: one_text(content, "system")?,
        }),
        Body::Developer { .. } => Err(Unreadable::Developer),
        Body::User { content } => {
            if message.name.is_some() {
                return Err(Unreadable::Name("user"));
            }
            let content = match content {
                Content::Text(text) => vec![UserContent::text(text)],
                Content::Parts(parts) => parts.into_iter().map(part_to_rig).collect::<Result<_, _>>()?,
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
            let text = content.map(|c| one_text(c, "assistant")).transpose()?;
            assistant_to_rig(text, reasoning_content, tool_calls, rig).map(RigMessage::Assistant)
        }
        // `to_rig` handles tool results, which may join the previous message.
        Body::Tool { .. } => Err(Unreadable::Metadata("(a tool result out of place)")),
    }
}

/// Content rig holds as one text.
fn one_text(content: Content, role: &'static str) -> Result<String, Unreadable> {
    match content {
        Content::Text(text) => Ok(text),
        Content::Parts(_) => Err(Unreadable::Parts(role)),
    }
}

fn part_to_rig(part: ContentPart) -> Result<UserContent, Unreadable> {
    match part {
        ContentPart::Text(text) => Ok(UserContent::text(text)),
        ContentPart::ImageUrl(image) => image_to_rig(image).map(UserContent::Image),
        ContentPart::Refusal(_) => Err(Unreadable::ContentPart("refusal".into())),
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

pub(super) fn tool_result_to_rig(message: CmMessage, rig: &Map<String, Value>) -> Result<ToolResult, Unreadable> {
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
    let content = one_text(content, "tool")?;
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
    use chatmem::Message as Cm;

    use super::*;
    use crate::convert::tests::{rig_record, unreadable};

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
}
