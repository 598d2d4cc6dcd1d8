//! rig messages to chatmem messages: what chatmem holds in its fields, the rest in the
//! `rig` metadata record, and what it cannot hold refused.

use chatmem::{Body, ContentPart, ImageUrl, Message as CmMessage, Metadata, ToolCall as CmToolCall};
use rig_core::message::{
    AssistantContent, AssistantMessage, DocumentSourceKind, Image, ImageDetail, Message as RigMessage, MimeType, Text,
    ToolResult, ToolResultContent, UserContent,
};
use serde_json::{Map, Value, json};

use super::{METADATA_KEY, Unsupported};

pub(super) fn message_to_chatmem(message: &RigMessage) -> Result<Vec<CmMessage>, Unsupported> {
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
    }
    .map(chatmem::Content::Text);
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

#[cfg(test)]
mod tests {
    use rig_core::message::{Audio, Document, ImageMediaType, Opaque, Video};

    use super::*;
    use crate::convert::tests::{call, refused};

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
}
