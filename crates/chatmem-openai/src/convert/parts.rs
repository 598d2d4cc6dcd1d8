//! Content parts: chatmem's [`ContentPart`] and async-openai's parts of each role's message.

use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessageContentPart, ChatCompletionRequestMessageContentPartImage,
    ChatCompletionRequestMessageContentPartRefusal, ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestUserMessageContentPart, ImageDetail,
};
use chatmem::{ContentPart, ImageUrl};
use serde_json::Value;

use super::{ConversionErrorKind, unsupported_if};

fn detail_to_request(index: usize, detail: &str) -> Result<ImageDetail, ConversionErrorKind> {
    match detail {
        "auto" => Ok(ImageDetail::Auto),
        "low" => Ok(ImageDetail::Low),
        "high" => Ok(ImageDetail::High),
        "original" => Ok(ImageDetail::Original),
        _ => Err(ConversionErrorKind::UnsupportedImageDetail {
            index,
            detail: detail.to_owned(),
        }),
    }
}

fn detail_from_request(detail: ImageDetail) -> String {
    match detail {
        ImageDetail::Auto => "auto",
        ImageDetail::Low => "low",
        ImageDetail::High => "high",
        ImageDetail::Original => "original",
    }
    .to_owned()
}

/// A part's `type`, for errors.
fn kind(part: &ContentPart) -> String {
    match part {
        ContentPart::Text(_) => "text".into(),
        ContentPart::ImageUrl(_) => "image_url".into(),
        ContentPart::Refusal(_) => "refusal".into(),
        ContentPart::Other(obj) => obj.get("type").and_then(Value::as_str).unwrap_or_default().to_owned(),
    }
}

fn text(t: &str) -> ChatCompletionRequestMessageContentPartText {
    ChatCompletionRequestMessageContentPartText {
        text: t.to_owned(),
        prompt_cache_breakpoint: None,
    }
}

/// A text part of a `role` (system, developer or tool) message, the only part those take.
pub(super) fn text_part_to_request(
    role: &'static str,
    index: usize,
    part: &ContentPart,
) -> Result<ChatCompletionRequestMessageContentPartText, ConversionErrorKind> {
    match part {
        ContentPart::Text(t) => Ok(text(t)),
        other => Err(ConversionErrorKind::UnsupportedPart {
            role,
            index,
            kind: kind(other),
        }),
    }
}

pub(super) fn text_part_from_request(
    role: &'static str,
    part: ChatCompletionRequestMessageContentPartText,
) -> Result<ContentPart, ConversionErrorKind> {
    unsupported_if(part.prompt_cache_breakpoint.is_some(), role, "prompt_cache_breakpoint")?;
    Ok(ContentPart::Text(part.text))
}

/// A part of an assistant message: text or a refusal.
pub(super) fn assistant_part_to_request(
    index: usize,
    part: &ContentPart,
) -> Result<ChatCompletionRequestAssistantMessageContentPart, ConversionErrorKind> {
    use ChatCompletionRequestAssistantMessageContentPart as P;
    match part {
        ContentPart::Text(t) => Ok(P::Text(text(t))),
        ContentPart::Refusal(r) => Ok(P::Refusal(ChatCompletionRequestMessageContentPartRefusal {
            refusal: r.clone(),
        })),
        other => Err(ConversionErrorKind::UnsupportedPart {
            role: "assistant",
            index,
            kind: kind(other),
        }),
    }
}

pub(super) fn assistant_part_from_request(
    part: ChatCompletionRequestAssistantMessageContentPart,
) -> Result<ContentPart, ConversionErrorKind> {
    use ChatCompletionRequestAssistantMessageContentPart as P;
    match part {
        P::Text(t) => text_part_from_request("assistant", t),
        P::Refusal(r) => Ok(ContentPart::Refusal(r.refusal)),
    }
}

/// A user part as sent: text and images field by field; any other part through its JSON, which
/// must read back unchanged (serde ignores fields async-openai does not know, which would
/// drop them).
pub(super) fn part_to_request(
    index: usize,
    part: &ContentPart,
) -> Result<ChatCompletionRequestUserMessageContentPart, ConversionErrorKind> {
    Ok(match part {
        ContentPart::Text(t) => ChatCompletionRequestUserMessageContentPart::Text(text(t)),
        ContentPart::Refusal(_) => {
            return Err(ConversionErrorKind::UnsupportedPart {
                role: "user",
                index,
                kind: kind(part),
            });
        }
        ContentPart::ImageUrl(i) => {
            ChatCompletionRequestUserMessageContentPart::ImageUrl(ChatCompletionRequestMessageContentPartImage {
                image_url: async_openai::types::chat::ImageUrl {
                    url: i.url.clone(),
                    detail: i.detail.as_deref().map(|d| detail_to_request(index, d)).transpose()?,
                },
                prompt_cache_breakpoint: None,
            })
        }
        ContentPart::Other(obj) => {
            let unsupported = || ConversionErrorKind::UnsupportedPart {
                role: "user",
                index,
                kind: kind(part),
            };
            let original = Value::Object(obj.clone());
            let typed: ChatCompletionRequestUserMessageContentPart =
                serde_json::from_value(original.clone()).map_err(|_| unsupported())?;
            if serde_json::to_value(&typed).ok().as_ref() != Some(&original) {
                return Err(unsupported());
            }
            typed
        }
    })
}

pub(super) fn part_from_request(
    index: usize,
    part: ChatCompletionRequestUserMessageContentPart,
) -> Result<ContentPart, ConversionErrorKind> {
    use ChatCompletionRequestUserMessageContentPart as P;
    let no_breakpoint = |present: bool| unsupported_if(present, "user", "prompt_cache_breakpoint");
    Ok(match part {
        P::Text(t) => {
            no_breakpoint(t.prompt_cache_breakpoint.is_some())?;
            ContentPart::Text(t.text)
        }
        P::ImageUrl(i) => {
            no_breakpoint(i.prompt_cache_breakpoint.is_some())?;
            ContentPart::ImageUrl(ImageUrl {
                url: i.image_url.url,
                detail: i.image_url.detail.map(detail_from_request),
            })
        }
        // Audio and files: chatmem keeps parts it does not model as their JSON.
        other @ (P::InputAudio(_) | P::File(_)) => match serde_json::to_value(&other) {
            Ok(Value::Object(obj)) => ContentPart::Other(obj),
            _ => {
                return Err(ConversionErrorKind::UnsupportedPart {
                    role: "user",
                    index,
                    kind: if matches!(other, P::File(_)) {
                        "file"
                    } else {
                        "input_audio"
                    }
                    .to_owned(),
                });
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use chatmem::Message;
    use serde_json::{Value, json};

    use super::*;
    use crate::convert::tests::both_ways;
    use crate::convert::{ConversionErrorKind, from_request_message, to_request_message};

    #[test]
    fn user_images_both_ways() {
        let m = Message::user_parts(vec![
            ContentPart::Text("what is in this photo?".into()),
            ContentPart::ImageUrl(ImageUrl {
                url: "https://example.com/parcel.jpg".into(),
                detail: Some("high".into()),
            }),
            ContentPart::ImageUrl(ImageUrl {
                url: "data:image/png;base64,iVBORw0KGgo=".into(),
                detail: None,
            }),
        ]);
        both_ways(
            &m,
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is in this photo?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/parcel.jpg", "detail": "high"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]}),
        );
        for detail in ["auto", "low", "high", "original"] {
            let m = Message::user_parts(vec![ContentPart::ImageUrl(ImageUrl {
                url: "u".into(),
                detail: Some(detail.into()),
            })]);
            assert_eq!(&from_request_message(to_request_message(&m).unwrap()).unwrap(), &m);
        }
    }

    #[test]
    fn audio_and_file_parts_travel_as_their_json() {
        let audio = json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}});
        let file = json!({"type": "file", "file": {"file_id": "file-1"}});
        let Value::Object(a) = audio.clone() else {
            unreachable!()
        };
        let Value::Object(f) = file.clone() else { unreachable!() };
        both_ways(
            &Message::user_parts(vec![ContentPart::Other(a), ContentPart::Other(f)]),
            json!({"role": "user", "content": [audio, file]}),
        );
    }

    #[test]
    fn parts_async_openai_cannot_carry_unchanged_are_errors() {
        let obj = |v: Value| match v {
            Value::Object(o) => ContentPart::Other(o),
            _ => unreachable!(),
        };
        for (part, kind) in [
            (json!({"type": "video_url", "video_url": {"url": "u"}}), "video_url"),
            (json!({"no_type": 1}), ""),
            // A field async-openai does not know would be dropped by serde.
            (
                json!({"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}, "extra": 1}),
                "input_audio",
            ),
            (
                json!({"type": "input_audio", "input_audio": {"data": "x", "format": "flac"}}),
                "input_audio",
            ),
        ] {
            let e =
                to_request_message(&Message::user_parts(vec![ContentPart::Text("t".into()), obj(part)])).unwrap_err();
            assert_eq!(
                e.kind(),
                &ConversionErrorKind::UnsupportedPart {
                    role: "user",
                    index: 1,
                    kind: kind.into()
                }
            );
        }
    }
}
