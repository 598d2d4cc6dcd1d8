//! The JSON form of [`Message`]: a hand-written codec because the wire shape depends on the
//! role (which fields are allowed, which content forms), and every error must name the field.
//!
//! JSON fields: `role`, `content`, `name`, `tool_calls: [{id, type: "function", function:
//! {name, arguments}}]`, `tool_call_id`, plus chatmem's `reasoning_content` (as DeepSeek
//! returns it), `is_error` (tool results) and `metadata`. Absent optional fields are omitted
//! when written, so reading then writing a message gives the same JSON value.
//! Unknown fields are rejected rather than silently dropped: stored data must round-trip.

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{Body, Content, ContentPart, Message, Metadata, Role, ToolCall};
use crate::error::{Error, Result};
/// Parses a JSON array of messages, as the CLI and server accept them.
///
/// # Errors
/// [`Error::InvalidMessages`] naming the message index and the field that was wrong.
///
/// ```
/// let msgs = chatmem::parse_messages(r#"[{"role":"user","content":"hi"}]"#)?;
/// assert_eq!(msgs.len(), 1);
/// let err = chatmem::parse_messages(r#"[{"role":"user","content":"hi"},{"role":"tool","content":"x"}]"#)
///     .unwrap_err();
/// assert_eq!(err.to_string(), "invalid message at [1]: missing field `tool_call_id` for role tool");
/// // A leading byte-order mark is skipped.
/// assert_eq!(chatmem::parse_messages("\u{feff}[]")?.len(), 0);
/// # Ok::<(), chatmem::Error>(())
/// ```
pub fn parse_messages(json: &str) -> Result<Vec<Message>> {
    // A UTF-8 byte-order mark (some editors write one) is not part of the JSON.
    let json = json.strip_prefix('\u{feff}').unwrap_or(json);
    let mut de = serde_json::Deserializer::from_str(json);
    let messages: Vec<Message> = crate::deserialize_json(&mut de).map_err(|e| Error::InvalidMessages {
        path: e.path().unwrap_or("input").to_owned(),
        reason: e.reason().to_owned(),
    })?;
    // Anything but white space after the array is an error, not silently ignored.
    de.end().map_err(|e| Error::InvalidMessages {
        path: "input".into(),
        reason: e.to_string(),
    })?;
    Ok(messages)
}

// ---------------------------------------------------------------------------------------------
// JSON

// Each wire type says what it expects in the client's words: serde's default names the Rust
// type ("expected struct WireIn").
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a function object with `name` and `arguments`")]
struct WireFunction {
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a tool call object with `id`, `type` and `function`"
)]
struct WireToolCallIn {
    id: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a message object with `role`")]
struct WireIn {
    role: Role,
    #[serde(default, deserialize_with = "unique_keys_opt")]
    content: Option<Value>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallIn>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default, deserialize_with = "unique_keys_metadata")]
    metadata: Option<Metadata>,
}

/// A JSON value read like [`Value`] except that an object with a key twice is an error,
/// at any depth: a message field given twice is rejected, so a metadata key, a content
/// part's field or an `image_url` field given twice must be too (never silently last-wins).
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = UniqueKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::String(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::String(v)))
            }
            fn visit_unit<E>(self) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::Null))
            }
            fn visit_none<E>(self) -> std::result::Result<UniqueKeys, E> {
                Ok(UniqueKeys(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<UniqueKeys, D::Error> {
                UniqueKeys::deserialize(d)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<UniqueKeys, A::Error> {
                let mut items = Vec::new();
                while let Some(UniqueKeys(v)) = seq.next_element()? {
                    items.push(v);
                }
                Ok(UniqueKeys(Value::Array(items)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<UniqueKeys, A::Error> {
                let mut obj = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if obj.contains_key(&key) {
                        return Err(A::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let UniqueKeys(v) = map.next_value()?;
                    obj.insert(key, v);
                }
                Ok(UniqueKeys(Value::Object(obj)))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

fn unique_keys_opt<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    Ok(Option::<UniqueKeys>::deserialize(d)?.map(|UniqueKeys(v)| v))
}

fn unique_keys_metadata<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Metadata>, D::Error> {
    match Option::<UniqueKeys>::deserialize(d)? {
        None | Some(UniqueKeys(Value::Null)) => Ok(None),
        Some(UniqueKeys(Value::Object(obj))) => Ok(Some(obj)),
        Some(_) => Err(D::Error::custom("field `metadata` must be an object")),
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let w = WireIn::deserialize(deserializer)?;
        w.into_message().map_err(D::Error::custom)
    }
}

fn not_for(field: &str, role: Role) -> String {
    format!("field `{field}` is not allowed for role {role}")
}

/// A message's `content`: a string, or an array of the parts `role` takes (see
/// [`ContentPart`]); `required` for every role but assistant.
fn content(content: Option<Value>, role: Role, required: bool) -> std::result::Result<Option<Content>, String> {
    match content {
        None | Some(Value::Null) if required => Err(format!("missing field `content` for role {role}")),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(Content::Text(s))),
        Some(Value::Array(parts)) => parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| content_part(p, Some(role)).map_err(|e| format!("content[{i}]: {e}")))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(|parts| Some(Content::Parts(parts))),
        Some(_) => Err(format!(
            "field `content` must be a string or an array of parts for role {role}"
        )),
    }
}

impl WireIn {
    fn into_message(self) -> std::result::Result<Message, String> {
        let role = self.role;
        let tool_fields = [
            ("tool_calls", self.tool_calls.is_some() && role != Role::Assistant),
            (
                "reasoning_content",
                self.reasoning_content.is_some() && role != Role::Assistant,
            ),
            ("tool_call_id", self.tool_call_id.is_some() && role != Role::Tool),
            ("is_error", self.is_error.is_some() && role != Role::Tool),
        ];
        if let Some((field, _)) = tool_fields.iter().find(|(_, bad)| *bad) {
            return Err(not_for(field, role));
        }
        let body = match role {
            Role::System => Body::System {
                content: required(content(self.content, role, true)?),
            },
            Role::Developer => Body::Developer {
                content: required(content(self.content, role, true)?),
            },
            Role::User => Body::User {
                content: required(content(self.content, role, true)?),
            },
            Role::Assistant => {
                let content = content(self.content, role, false)?;
                let tool_calls = self
                    .tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| tool_call(i, c))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                if content.is_none() && tool_calls.is_empty() {
                    return Err("assistant message needs `content` or `tool_calls`".into());
                }
                Body::Assistant {
                    content,
                    reasoning_content: self.reasoning_content,
                    tool_calls,
                }
            }
            Role::Tool => {
                let tool_call_id = match self.tool_call_id {
                    Some(id) if !id.is_empty() => id,
                    Some(_) => return Err("field `tool_call_id` is empty".into()),
                    None => return Err("missing field `tool_call_id` for role tool".into()),
                };
                Body::Tool {
                    tool_call_id,
                    content: required(content(self.content, role, true)?),
                    is_error: self.is_error.unwrap_or(false),
                }
            }
        };
        Ok(Message {
            body,
            name: self.name,
            metadata: self.metadata,
        })
    }
}

fn tool_call(i: usize, c: WireToolCallIn) -> std::result::Result<ToolCall, String> {
    if let Some(kind) = c.kind.as_deref()
        && kind != "function"
    {
        {
            return Err(format!(
                "tool_calls[{i}]: unsupported `type` {kind:?}; only \"function\" is supported"
            ));
        }
    }
    if c.id.is_empty() {
        return Err(format!("tool_calls[{i}]: field `id` is empty"));
    }
    if c.function.name.is_empty() {
        return Err(format!("tool_calls[{i}]: field `function.name` is empty"));
    }
    Ok(ToolCall {
        id: c.id,
        name: c.function.name,
        arguments: c.function.arguments,
    })
}

/// Content that [`content`] was told is required, so is present.
fn required(content: Option<Content>) -> Content {
    content.unwrap_or(Content::Text(String::new()))
}

/// One content part of a message of `role` (any role when `None`): text for every role,
/// images and any other type for a user, refusals for an assistant. A user's `refusal` part
/// is kept verbatim as any other part is.
fn content_part(part: Value, role: Option<Role>) -> std::result::Result<ContentPart, String> {
    let Value::Object(mut obj) = part else {
        return Err("a content part must be an object".into());
    };
    let kind = match obj.get("type") {
        Some(Value::String(k)) => k.clone(),
        Some(_) => return Err("field `type` must be a string".into()),
        None => return Err("missing field `type`".into()),
    };
    let only = |obj: &Map<String, Value>, allowed: &[&str]| match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown field `{k}` in a {kind} part")),
        None => Ok(()),
    };
    let string = |obj: &mut Map<String, Value>, field: &str| match obj.remove(field) {
        Some(Value::String(t)) => Ok(t),
        Some(_) => Err(format!("field `{field}` must be a string")),
        None => Err(format!("missing field `{field}`")),
    };
    let user = matches!(role, None | Some(Role::User));
    let assistant = matches!(role, None | Some(Role::Assistant));
    match kind.as_str() {
        "text" => {
            only(&obj, &["type", "text"])?;
            string(&mut obj, "text").map(ContentPart::Text)
        }
        "image_url" if user => {
            only(&obj, &["type", "image_url"])?;
            let v = obj.remove("image_url").ok_or("missing field `image_url`")?;
            serde_json::from_value(v)
                .map(ContentPart::ImageUrl)
                .map_err(|e| format!("field `image_url`: {e}"))
        }
        "refusal" if assistant => {
            only(&obj, &["type", "refusal"])?;
            string(&mut obj, "refusal").map(ContentPart::Refusal)
        }
        _ if user => Ok(ContentPart::Other(obj)),
        _ => {
            let takes = if assistant { "text and refusal" } else { "text" };
            let role = role.map_or("any", Role::as_str);
            Err(format!(
                "a {kind:?} part is not allowed for role {role} (it takes {takes} parts)"
            ))
        }
    }
}

impl Serialize for ContentPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            ContentPart::Text(text) => {
                let mut m = serializer.serialize_map(Some(2))?;
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", text)?;
                m.end()
            }
            ContentPart::ImageUrl(url) => {
                let mut m = serializer.serialize_map(Some(2))?;
                m.serialize_entry("type", "image_url")?;
                m.serialize_entry("image_url", url)?;
                m.end()
            }
            ContentPart::Refusal(refusal) => {
                let mut m = serializer.serialize_map(Some(2))?;
                m.serialize_entry("type", "refusal")?;
                m.serialize_entry("refusal", refusal)?;
                m.end()
            }
            ContentPart::Other(obj) => obj.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        content_part(UniqueKeys::deserialize(deserializer)?.0, None).map_err(D::Error::custom)
    }
}

struct WireToolCallOut<'a>(&'a ToolCall);

impl Serialize for WireToolCallOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(Some(3))?;
        m.serialize_entry("id", &self.0.id)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry(
            "function",
            &WireFunctionRef {
                name: &self.0.name,
                arguments: &self.0.arguments,
            },
        )?;
        m.end()
    }
}

#[derive(Serialize)]
struct WireFunctionRef<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Content::Text(t) => serializer.serialize_str(t),
            Content::Parts(p) => p.serialize(serializer),
        }
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("role", &self.role())?;
        match &self.body {
            Body::System { content } | Body::Developer { content } | Body::User { content } => {
                m.serialize_entry("content", content)?
            }
            Body::Assistant {
                content,
                reasoning_content,
                tool_calls,
            } => {
                if let Some(c) = content {
                    m.serialize_entry("content", c)?;
                }
                if !tool_calls.is_empty() {
                    let calls: Vec<_> = tool_calls.iter().map(WireToolCallOut).collect();
                    m.serialize_entry("tool_calls", &calls)?;
                }
                if let Some(r) = reasoning_content {
                    m.serialize_entry("reasoning_content", r)?;
                }
            }
            Body::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                m.serialize_entry("tool_call_id", tool_call_id)?;
                m.serialize_entry("content", content)?;
                if *is_error {
                    m.serialize_entry("is_error", &true)?;
                }
            }
        }
        if let Some(name) = &self.name {
            m.serialize_entry("name", name)?;
        }
        if let Some(meta) = &self.metadata {
            m.serialize_entry("metadata", meta)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: Value) {
        let m: Message = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
    }

    #[test]
    fn every_shape_round_trips() {
        round_trip(json!({"role": "system", "content": "be brief", "name": "policy"}));
        round_trip(json!({"role": "user", "content": "hi", "metadata": {"channel": "app", "n": [1, 2]}}));
        round_trip(json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
        ]}));
        round_trip(json!({"role": "assistant", "content": "done", "reasoning_content": "thinking..."}));
        round_trip(json!({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":1}"}},
            {"id": "c2", "type": "function", "function": {"name": "other", "arguments": ""}}
        ]}));
        round_trip(json!({"role": "tool", "tool_call_id": "c1", "content": "boom", "is_error": true}));
        round_trip(json!({"role": "tool", "tool_call_id": "c1", "content": "{}"}));
    }

    /// Every role takes its content as a list of the parts OpenAI's chat completions accept
    /// for it, kept as sent.
    #[test]
    fn content_parts_of_every_role_round_trip() {
        let texts = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
        round_trip(json!({"role": "system", "content": texts}));
        round_trip(json!({"role": "developer", "content": texts}));
        round_trip(json!({"role": "tool", "tool_call_id": "c1", "content": texts}));
        round_trip(json!({"role": "assistant", "content": texts}));
        round_trip(
            json!({"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}),
        );
        round_trip(
            json!({"role": "assistant", "content": [{"type": "text", "text": "a"}], "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ]}),
        );
        // A user's refusal part is kept verbatim, as any part a user sends.
        let user: Message =
            serde_json::from_value(json!({"role": "user", "content": [{"type": "refusal", "refusal": "x", "n": 1}]}))
                .unwrap();
        assert!(
            matches!(&user.body, Body::User { content: Content::Parts(p) } if matches!(p[0], ContentPart::Other(_)))
        );
        let m: Message = serde_json::from_value(json!({"role": "system", "content": texts})).unwrap();
        assert_eq!(m.text().as_deref(), Some("a\nb"));
        let refusal: Message =
            serde_json::from_value(json!({"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}))
                .unwrap();
        assert_eq!(refusal.text().as_deref(), Some(""), "a refusal is not answer text");
        assert_eq!(refusal.payload_len(), 2);
    }

    #[test]
    fn a_part_a_role_does_not_take_is_refused_naming_it() {
        for (input, expected) in [
            (
                r#"[{"role":"system","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}]"#,
                r#"invalid message at [0]: content[1]: a "image_url" part is not allowed for role system (it takes text parts)"#,
            ),
            (
                r#"[{"role":"assistant","content":[{"type":"input_audio","input_audio":{}}]}]"#,
                r#"invalid message at [0]: content[0]: a "input_audio" part is not allowed for role assistant (it takes text and refusal parts)"#,
            ),
            (
                r#"[{"role":"tool","tool_call_id":"c","content":[{"type":"refusal","refusal":"no"}]}]"#,
                r#"invalid message at [0]: content[0]: a "refusal" part is not allowed for role tool (it takes text parts)"#,
            ),
            (
                r#"[{"role":"developer","content":5}]"#,
                "invalid message at [0]: field `content` must be a string or an array of parts for role developer",
            ),
            (
                r#"[{"role":"assistant","content":[{"type":"refusal"}]}]"#,
                "invalid message at [0]: content[0]: missing field `refusal`",
            ),
            (
                r#"[{"role":"assistant","content":[{"type":"refusal","refusal":"x","why":1}]}]"#,
                "invalid message at [0]: content[0]: unknown field `why` in a refusal part",
            ),
        ] {
            assert_eq!(err(input), expected, "{input}");
        }
    }

    #[test]
    fn null_assistant_content_reads_as_absent() {
        let m: Message = serde_json::from_value(json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}))
        .unwrap();
        assert_eq!(m.text(), None);
        assert_eq!(m.tool_calls().len(), 1);
    }

    fn err(json: &str) -> String {
        parse_messages(json).unwrap_err().to_string()
    }

    #[test]
    fn errors_quote_input_escaped() {
        let e = err("[{\"role\":\"user\",\"content\":\"x\",\"metadata\":{\"k\\u001b\":1,\"k\\u001b\":2}}]");
        assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        let e = err("[{\"role\":\"\\u001b]0;pwned\\u0007\\u2028\",\"content\":\"x\"}]");
        assert!(
            !e.chars()
                .any(|c| c.is_control() || crate::printable::is_invisible_or_separator(c)),
            "{e:?}"
        );
        assert!(e.contains("\\u{1b}"), "{e:?}");
    }

    #[test]
    fn duplicate_keys_are_rejected_at_every_depth() {
        for (input, key) in [
            (r#"[{"role":"user","role":"user","content":"x"}]"#, "role"),
            (r#"[{"role":"user","content":"x","metadata":{"a":1,"a":2}}]"#, "a"),
            (r#"[{"role":"user","content":"x","metadata":{"n":{"b":1,"b":1}}}]"#, "b"),
            (
                r#"[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]"#,
                "text",
            ),
            (
                r#"[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","url":"v"}}]}]"#,
                "url",
            ),
        ] {
            let e = err(input);
            assert!(
                e.contains(&format!("duplicate field `{key}`")) || e.contains(&format!("duplicate key `{key}`")),
                "{input}: {e}"
            );
        }
        // Equal keys in different objects are fine.
        assert!(parse_messages(r#"[{"role":"user","content":"x","metadata":{"a":{"a":1}}}]"#).is_ok());
    }

    #[test]
    fn errors_name_index_and_field() {
        assert_eq!(
            err(r#"[{"role":"robot","content":"x"}]"#),
            "invalid message at [0].role: unknown variant `robot`, expected one of `system`, `developer`, `user`, `assistant`, `tool`"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":"a"},{"role":"user"}]"#),
            "invalid message at [1]: missing field `content` for role user"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":5}]"#),
            "invalid message at [0]: field `content` must be a string or an array of parts for role user"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":"x","tool_call_id":"c"}]"#),
            "invalid message at [0]: field `tool_call_id` is not allowed for role user"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":"x","colour":"red"}]"#),
            "invalid message at [0].colour: unknown field `colour`, expected one of `role`, `content`, `name`, `tool_calls`, `tool_call_id`, `reasoning_content`, `is_error`, `metadata`"
        );
        assert_eq!(
            err(
                r#"[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]"#
            ),
            "invalid message at [0].tool_calls[0].function.arguments: invalid type: map, expected a string"
        );
        assert_eq!(
            err(r#"[{"role":"assistant"}]"#),
            "invalid message at [0]: assistant message needs `content` or `tool_calls`"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":[{"type":"text"}]}]"#),
            "invalid message at [0]: content[0]: missing field `text`"
        );
        assert_eq!(
            err(r#"{"role":"user"}"#),
            "invalid message at input: invalid type: map, expected a sequence at line 1 column 0"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":"x"}] trailing"#),
            "invalid message at input: trailing characters at line 1 column 33"
        );
        assert_eq!(
            err("["),
            "invalid message at input: EOF while parsing a list at line 1 column 1"
        );
        assert_eq!(
            err(r#"[{"role":"tool","tool_call_id":"","content":"x"}]"#),
            "invalid message at [0]: field `tool_call_id` is empty"
        );
    }

    /// Found by the `messages` fuzz target: a syntax error inside the array said only
    /// "invalid message at [3]: expected value", dropping where it was.
    #[test]
    fn a_syntax_error_inside_a_message_keeps_its_position() {
        assert_eq!(
            err("[{\"role\":\"user\",\"content\":\"a\"},\n\u{e0}{}]"),
            "invalid message at [1]: expected value at line 2 column 1"
        );
        assert_eq!(
            err(r#"[{"role":"user","content":"a"#),
            "invalid message at [0].content: EOF while parsing a string at line 1 column 28"
        );
    }

    /// Found by the `messages` fuzz target: a message that was not an object was refused as
    /// "expected struct WireIn", a Rust type name the client has never seen.
    #[test]
    fn errors_say_what_was_expected_in_the_clients_words() {
        for (input, expected) in [
            (r#"["x"]"#, "expected a message object with `role`"),
            (
                r#"[{"role":"assistant","tool_calls":[1]}]"#,
                "expected a tool call object with `id`, `type` and `function`",
            ),
            (
                r#"[{"role":"assistant","tool_calls":[{"id":"c","function":[]}]}]"#,
                "expected a function object with `name` and `arguments`",
            ),
            (
                r#"[{"role":"user","content":[{"type":"image_url","image_url":"u"}]}]"#,
                "expected an object with `url` and, optionally, `detail`",
            ),
        ] {
            let e = err(input);
            assert!(e.contains(expected), "{input}: {e}");
        }
    }

    #[test]
    fn text_joins_parts() {
        let m = Message::user_parts(vec![ContentPart::Text("a".into()), ContentPart::Text("b".into())]);
        assert_eq!(m.text().as_deref(), Some("a\nb"));
    }
}
