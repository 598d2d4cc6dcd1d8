//! The parts of `/openapi.json` that utoipa's derives cannot say, written as JSON Schema
//! (OpenAPI 3.1 is JSON Schema 2020-12) and laid over the derived document by [`declare`]:
//!
//! - a conversation id (path `{id}`, a listing's `cursor`, the `X-Chatmem-Conversation`
//!   header) as the core checks it: non-empty, within the server's id limit, no control or
//!   invisible character (the pattern is built from the core's own rule);
//! - a message, one schema per role (what each role requires and refuses, as chatmem's message
//!   codec reads it), and the door's messages (a system message only first, at least one other);
//! - a window policy in a body (`max_messages` or `max_tokens`, not both; within the server's
//!   caps; `clear_tool_results` within the core's bounds) and in a query (within the caps;
//!   clearing's fields flat, `clear_tool_results.keep`);
//! - a history cursor (the decimal a page's `next_cursor` gives).
//!
//! What JSON Schema cannot say is left to each schema's description and the documented 4xx:
//! an id's limit is in bytes of UTF-8 (`maxLength` counts characters, so it is the same bound
//! only for ASCII), `evict_to` must be below the budget it goes with, and a query's two budgets
//! (separate parameters) are not given together.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::config::ServerConfig;

/// Lays the schemas over `doc` (the derived document, as JSON) for a server of `config`.
pub(crate) fn declare(doc: &mut Value, config: &ServerConfig) {
    let limits = &config.limits;
    let schemas = &mut doc["components"]["schemas"];
    // Replaced by the schemas of `messages()`.
    for orphan in ["Content", "ContentPart", "ImageUrl"] {
        if let Some(map) = schemas.as_object_mut() {
            map.remove(orphan);
        }
    }
    schemas["ConversationId"] = json!({
        "type": "string",
        "description": format!(
            "A conversation id: 1 to {} bytes of UTF-8 (`maxLength` is that many characters; \
             a longer id is answered 413), no control character, line or paragraph separator, \
             or invisible format character (bidi controls, zero-width spaces, ...). Any other \
             text is allowed.",
            limits.max_id_bytes
        ),
        "minLength": 1,
        "maxLength": limits.max_id_bytes,
        "pattern": &*ID_PATTERN,
    });
    // A user id follows a conversation id's rules (one check in the core for both).
    schemas["UserId"] = json!({
        "type": "string",
        "description": format!(
            "A user id: as a conversation id, 1 to {} bytes of UTF-8, no control or invisible character.",
            limits.max_id_bytes
        ),
        "minLength": 1,
        "maxLength": limits.max_id_bytes,
        "pattern": &*ID_PATTERN,
    });
    let key = json!({
        "description": "What the fact is about: segments of lowercase ASCII letters, digits, `_` and `-` joined by `.` (null: none).",
        "oneOf": [
            {"type": "string", "minLength": 1, "maxLength": chatmem::facts::MAX_KEY_BYTES,
             "pattern": "^[a-z0-9_-]+(\\.[a-z0-9_-]+)*$"},
            {"type": "null"},
        ],
    });
    let text = json!({"type": "string", "minLength": 1, "pattern": &*FACT_TEXT_PATTERN});
    for body in ["AddFact", "PatchFact"] {
        if schemas[body]["properties"].is_object() {
            schemas[body]["properties"]["key"] = key.clone();
            schemas[body]["properties"]["text"] = text.clone();
        }
    }
    // A change must change something: text, key or pin, each given as a value.
    schemas["PatchFact"]["minProperties"] = json!(1);
    schemas["PatchFact"]["properties"]["pinned"] = json!({"type": "boolean"});
    for (name, schema) in messages() {
        schemas[name] = schema;
    }
    schemas["Policy"] = policy(config);
    schemas["ClearToolResults"] = clear_tool_results();
    // The dry run takes what a write takes.
    for body in ["PostMessages", "PromptRequest"] {
        let messages = &mut schemas[body]["properties"]["messages"];
        messages["maxItems"] = json!(limits.batch.messages);
        schemas[body]["properties"]["policy"] = json!({
            "description": "A window policy for this request instead of the server's (null: the server's).",
            "oneOf": [{"$ref": "#/components/schemas/Policy"}, {"type": "null"}],
        });
        schemas[body]["properties"]["user"] = json!({
            "description": "The conversation's user, whose facts the turn is sent with (null or left out: none).",
            "oneOf": [{"$ref": "#/components/schemas/UserId"}, {"type": "null"}],
        });
    }
    schemas["ChatCompletionRequest"]["properties"]["messages"] = json!({
        "type": "array",
        "description": "The turn's new messages: a system (or developer) message only first, and \
            at least one other. A client that resends the whole conversation may: the leading \
            messages the conversation already holds are recognised and not stored twice.",
        "minItems": 1,
        "maxItems": limits.batch.messages,
        "prefixItems": [{"$ref": "#/components/schemas/ChatMessage"}],
        "items": {"$ref": "#/components/schemas/ChatTurnMessage"},
        "contains": {"$ref": "#/components/schemas/ChatTurnMessage"},
    });

    schemas["UpstreamError"] = json!({
        "type": "object",
        "description": "The upstream model's refusal of the client's request, passed through: \
            OpenAI's error object as the upstream wrote it (chatmem's upstream key masked), with \
            the request's `request_id` added.",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["request_id"],
                "properties": {"request_id": {"type": "string"}},
            },
        },
    });
    upstream_refusals(doc);
    // What a client does next with a conversation it wrote (for a generated client, and for
    // schemathesis's stateful phase).
    let same_id = json!({"id": "$request.path.id"});
    doc["paths"][crate::route::MESSAGES]["post"]["responses"]["200"]["links"] = json!({
        "GetWindow": {"operationId": "get_messages", "parameters": same_id, "description": "the window, as it is now"},
        "GetHistory": {"operationId": "get_history", "parameters": same_id, "description": "everything stored"},
        "Recall": {"operationId": "get_recall", "parameters": same_id, "description": "what recall finds for a question, and why"},
        "DeleteConversation": {"operationId": "delete_conversation", "parameters": same_id, "description": "forget it"},
    });
    // A streamed answer, one event at a time (what OpenAPI 3.1's `schema` of an event stream
    // describes).
    doc["paths"][crate::route::COMPLETIONS]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"] = json!({
        "type": "object",
        "description": "One server-sent event: its `data` a `ChatCompletionChunk` as JSON, the last one `[DONE]`.",
        "required": ["data"],
        "properties": {
            "data": {
                "anyOf": [
                    {"const": "[DONE]"},
                    {"type": "string", "contentMediaType": "application/json", "contentSchema": reference("ChatCompletionChunk")},
                ],
            },
            "event": {"type": "string"},
            "id": {"type": "string"},
            "retry": {"type": "integer", "minimum": 0},
        },
    });

    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else { continue };
        for (method, op) in item.iter_mut() {
            let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
                continue;
            };
            for param in params.iter_mut() {
                let (name, place) = (param["name"].as_str(), param["in"].as_str());
                match (name, place) {
                    (Some("id"), Some("path")) => {
                        param["schema"] = reference("ConversationId");
                    }
                    (Some("user"), Some("path")) => {
                        param["schema"] = reference("UserId");
                    }
                    (Some("cursor"), Some("query")) if path == crate::route::CONVERSATIONS => {
                        param["schema"] = reference("ConversationId");
                    }
                    (Some("cursor"), Some("query")) => {
                        param["schema"] = json!({
                            "type": "string",
                            "description": "A positive decimal with no sign or leading zero, as `next_cursor` gives it.",
                            "pattern": HISTORY_CURSOR_PATTERN,
                        });
                    }
                    (Some(header), Some("header"))
                        if header.eq_ignore_ascii_case(crate::extract::CONVERSATION_HEADER)
                            || header.eq_ignore_ascii_case(crate::extract::USER_HEADER) =>
                    {
                        param["schema"] = json!({
                            "type": "string",
                            "description": "A conversation id as a header value: visible ASCII and \
                                inner spaces (a header's bytes are read as UTF-8, so other text can be \
                                sent as its UTF-8 bytes, which JSON Schema cannot describe).",
                            "minLength": 1,
                            "maxLength": limits.max_id_bytes,
                            "pattern": HEADER_ID_PATTERN,
                        });
                    }
                    _ => {}
                }
            }
            if path == crate::route::MESSAGES && method == "get" {
                policy_query(params, config);
            }
        }
    }
}

/// The statuses of the door's and `/v1/models`' answers that may be the upstream's own
/// refusal passed through ([`crate::upstream`]'s table): chatmem's error body, or the
/// upstream's.
fn upstream_refusals(doc: &mut Value) {
    let either = json!({"anyOf": [reference("Error"), reference("UpstreamError")]});
    for (path, method) in [(crate::route::COMPLETIONS, "post"), (crate::route::MODELS, "get")] {
        let responses = &mut doc["paths"][path][method]["responses"];
        for status in crate::upstream::CLIENTS {
            let answer = &mut responses[status.to_string()];
            if answer.is_null() {
                *answer = json!({"description": "the upstream's refusal of the request, passed through"});
            }
            answer["content"] = json!({"application/json": {"schema": either}});
        }
    }
}

/// A history cursor: what `next_cursor` gives (a message's sequence number, below 10^19), and
/// nothing else the server takes.
pub(crate) const HISTORY_CURSOR_PATTERN: &str = "^[1-9][0-9]{0,18}$";

/// A conversation id in a header: visible ASCII, inner spaces (a header's outer white space is
/// not part of its value).
const HEADER_ID_PATTERN: &str = "^[!-~]([ -~]*[!-~])?$";

/// Any text without a character the core refuses in an id, built from the core's own rule
/// (`char::is_control` and `chatmem::printable::is_invisible_or_separator`). BMP characters
/// are written as `\uXXXX` escapes; the few refused characters above it are written as
/// themselves (an escape above the BMP is not one every regex dialect reads alike).
static ID_PATTERN: LazyLock<String> = LazyLock::new(|| {
    let refused = class(|c| c.is_control() || chatmem::printable::is_invisible_or_separator(c));
    format!("^[^{refused}]*$")
});

/// A fact's text as the core's `clean_text` takes it: white space anywhere (it is collapsed),
/// at least one other character, and no control or invisible character but white space and
/// the zero-width joiners.
static FACT_TEXT_PATTERN: LazyLock<String> = LazyLock::new(|| {
    let refused = |c: char| {
        !c.is_whitespace()
            && (c.is_control()
                || (chatmem::printable::is_invisible_or_separator(c) && !matches!(c, '\u{200C}' | '\u{200D}')))
    };
    let (r, rw) = (class(refused), class(|c| refused(c) || c.is_whitespace()));
    format!("^[^{r}]*[^{rw}][^{r}]*$")
});

/// The characters `pick` takes, as the inside of a regex character class. BMP characters
/// are written as `\uXXXX` escapes; those above it as themselves (an escape above the BMP is
/// not one every regex dialect reads alike).
fn class(pick: impl Fn(char) -> bool) -> String {
    let mut ranges: Vec<(char, char)> = Vec::new();
    for c in (0..=u32::from(char::MAX))
        .filter_map(char::from_u32)
        .filter(|&c| pick(c))
    {
        match ranges.last_mut() {
            Some((_, end)) if u32::from(*end) + 1 == u32::from(c) => *end = c,
            _ => ranges.push((c, c)),
        }
    }
    let one = |c: char| {
        if u32::from(c) <= 0xFFFF {
            format!("\\u{:04X}", u32::from(c))
        } else {
            c.to_string()
        }
    };
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                one(a)
            } else {
                format!("{}-{}", one(a), one(b))
            }
        })
        .collect()
}

/// `oneOf` the schemas named.
fn one_of(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| reference(n)).collect()
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// A message of any role: the fields of every role, loosely (what a role takes is its own
/// schema's, one of `roles`); `door`: with the fields of an answer sent back.
fn union(description: &str, roles: &[&str], door: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "description": description,
        "required": ["role"],
        "properties": {
            "role": reference("Role"),
            "content": {"description": "Text or a list of parts, as the role takes them; null or absent on an assistant's tool calls."},
            "name": {"type": ["string", "null"], "description": "The participant's name."},
            "tool_calls": {"type": ["array", "null"], "items": {"type": "object"}, "description": "An assistant's tool calls."},
            "tool_call_id": {"type": ["string", "null"], "description": "A tool result's call id."},
            "reasoning_content": {"type": ["string", "null"], "description": "An assistant's reasoning text; kept in memory, never sent to a model."},
            "is_error": {"type": ["boolean", "null"], "description": "A tool result that reports a failure."},
            "metadata": {"type": ["object", "null"], "description": "Application data kept with the message, never sent to a model."},
        },
        "oneOf": one_of(roles),
    });
    if door {
        let props = &mut schema["properties"];
        props["refusal"] =
            json!({"type": ["string", "null"], "description": "An assistant's refusal, kept as its text."});
        for field in ["annotations", "parsed", "audio", "function_call"] {
            props[field] =
                json!({"description": "Of an answer sent back: dropped (`audio` and `function_call` only when null)."});
        }
    }
    schema
}

/// A field a role does not take: absent, or null (which reads as absent).
fn not_for_role() -> Value {
    json!({"type": "null", "description": "not for this role (absent or null)"})
}

/// The message schemas: `Message` (a stored message, in `POST …/messages` and every answer),
/// one per role, their content and parts, and the door's `ChatMessage`.
fn messages() -> Vec<(&'static str, Value)> {
    let name = json!({"type": ["string", "null"], "description": "The participant's name."});
    let metadata = json!({
        "type": ["object", "null"],
        "description": "Application data kept with the message, never sent to a model.",
    });
    // The fields of a role that takes text content only, and its own.
    let text_role = |role: &str, description: &str| {
        json!({
            "type": "object",
            "description": description,
            "required": ["role", "content"],
            "additionalProperties": false,
            "properties": {
                "role": {"const": role},
                "content": reference("TextContent"),
                "name": name,
                "metadata": metadata,
                "tool_calls": not_for_role(),
                "tool_call_id": not_for_role(),
                "reasoning_content": not_for_role(),
                "is_error": not_for_role(),
            },
        })
    };
    let system = text_role(
        "system",
        "Instructions for the model: one per conversation, first, never evicted.",
    );
    let developer = text_role(
        "developer",
        "Instructions in the system slot, as a system message (OpenAI's newer name).",
    );
    let mut user = text_role("user", "What the user said: text, images, or parts of any other type.");
    user["properties"]["content"] = reference("UserContent");
    let mut tool = text_role("tool", "A tool's result, for the call its `tool_call_id` names.");
    tool["required"] = json!(["role", "tool_call_id", "content"]);
    tool["properties"]["tool_call_id"] = json!({"type": "string", "minLength": 1, "description": "The call's id."});
    tool["properties"]["is_error"] =
        json!({"type": ["boolean", "null"], "description": "The result reports a failure."});
    let assistant = json!({
        "type": "object",
        "description": "The model's answer: content, tool calls, or both.",
        "required": ["role"],
        "additionalProperties": false,
        "properties": {
            "role": {"const": "assistant"},
            "content": {
                "description": "Absent or null on an answer of tool calls only.",
                "oneOf": [reference("AssistantContent"), {"type": "null"}],
            },
            "name": name,
            "metadata": metadata,
            "tool_calls": {
                "description": "The tools the model calls.",
                "oneOf": [{"type": "array", "items": reference("ToolCallIn")}, {"type": "null"}],
            },
            "reasoning_content": {
                "type": ["string", "null"],
                "description": "Reasoning text (DeepSeek's); kept in memory, never sent to a model.",
            },
            "tool_call_id": not_for_role(),
            "is_error": not_for_role(),
        },
        "anyOf": [
            {"required": ["content"], "properties": {"content": {"not": {"type": "null"}}}},
            {"required": ["tool_calls"], "properties": {"tool_calls": {"type": "array", "minItems": 1}}},
        ],
    });
    // What OpenAI's clients send back of an answer they were given: its `refusal` is its text
    // (never beside other text), `annotations` and `parsed` are dropped, a null `audio` or
    // `function_call` says nothing.
    let mut door_assistant = assistant.clone();
    door_assistant["description"] = json!(
        "The model's answer as a client sends it back: content, tool calls or a refusal (which is kept as its text)."
    );
    let props = &mut door_assistant["properties"];
    props["refusal"] =
        json!({"type": ["string", "null"], "description": "The model's refusal, kept as the message's text."});
    props["annotations"] = json!({"description": "Dropped (citations say nothing a model is sent)."});
    props["parsed"] = json!({"description": "Dropped (a client's parsed structured output)."});
    props["audio"] = json!({"type": "null"});
    props["function_call"] = json!({"type": "null"});
    door_assistant["anyOf"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"required": ["refusal"], "properties": {"refusal": {"type": "string", "minLength": 1}}}));
    door_assistant["not"] = json!({
        "required": ["content", "refusal"],
        "properties": {
            "content": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "minItems": 1}]},
            "refusal": {"type": "string", "minLength": 1},
        },
    });

    let part = |kind: &str, field: &str, value: Value, description: &str| {
        json!({
            "type": "object",
            "description": description,
            "required": ["type", field],
            "additionalProperties": false,
            "properties": {"type": {"const": kind}, field: value},
        })
    };
    let image_url = json!({
        "type": "object",
        "required": ["url"],
        "additionalProperties": false,
        "properties": {
            "url": {"type": "string", "description": "The image's URL (or a `data:` URL)."},
            "detail": {"type": ["string", "null"], "description": "The provider's detail hint (`low`, `high`, `auto`)."},
        },
    });
    let parts = |items: Value| json!({"type": "array", "items": items});
    vec![
        (
            "Message",
            union(
                "A message in OpenAI's Chat Completions shape plus chatmem's own fields \
                 (`reasoning_content`, `is_error`, `metadata`): every role's fields, and what \
                 each role takes in its own schema.",
                &[
                    "MessageSystem",
                    "MessageDeveloper",
                    "MessageUser",
                    "MessageAssistant",
                    "MessageTool",
                ],
                false,
            ),
        ),
        ("MessageSystem", system),
        ("MessageDeveloper", developer),
        ("MessageUser", user),
        ("MessageAssistant", assistant),
        ("MessageTool", tool),
        (
            "ChatMessage",
            union(
                "A message of a chat-completion request: a message as memory takes it, an \
                 assistant's as OpenAI's clients send an answer back.",
                &[
                    "MessageSystem",
                    "MessageDeveloper",
                    "MessageUser",
                    "ChatMessageAssistant",
                    "MessageTool",
                ],
                true,
            ),
        ),
        (
            "ChatTurnMessage",
            json!({
                "description": "A chat-completion request's message after the first: not a system or developer message.",
                "oneOf": one_of(&["MessageUser", "ChatMessageAssistant", "MessageTool"]),
            }),
        ),
        ("ChatMessageAssistant", door_assistant),
        (
            "TextContent",
            json!({
                "description": "Text, or a list of text parts.",
                "oneOf": [{"type": "string"}, parts(reference("TextPart"))],
            }),
        ),
        (
            "UserContent",
            json!({
                "description": "Text, or a list of parts: text, images, and any other type kept as sent.",
                "oneOf": [
                    {"type": "string"},
                    parts(json!({"oneOf": [reference("TextPart"), reference("ImagePart"), reference("OtherPart")]})),
                ],
            }),
        ),
        (
            "AssistantContent",
            json!({
                "description": "Text, or a list of text and refusal parts.",
                "oneOf": [
                    {"type": "string"},
                    parts(json!({"oneOf": [reference("TextPart"), reference("RefusalPart")]})),
                ],
            }),
        ),
        (
            "TextPart",
            part("text", "text", json!({"type": "string"}), "A text part."),
        ),
        (
            "ImagePart",
            part("image_url", "image_url", image_url, "An image part (a user's)."),
        ),
        (
            "RefusalPart",
            part(
                "refusal",
                "refusal",
                json!({"type": "string"}),
                "A refusal part (an assistant's).",
            ),
        ),
        (
            "OtherPart",
            json!({
                "type": "object",
                "description": "A user's part of another type (audio, files, a refusal, ...), kept with all its fields.",
                "required": ["type"],
                "properties": {"type": {"type": "string", "not": {"enum": ["text", "image_url"]}}},
            }),
        ),
        (
            "ToolCallIn",
            json!({
                "type": "object",
                "description": "One tool call: `{\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}`.",
                "required": ["id", "function"],
                "additionalProperties": false,
                "properties": {
                    "id": {"type": "string", "minLength": 1, "description": "The call's id, which the tool result names."},
                    "type": {"enum": ["function", null]},
                    "function": {
                        "type": "object",
                        "required": ["name", "arguments"],
                        "additionalProperties": false,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "arguments": {"type": "string", "description": "Its arguments, as JSON text."},
                        },
                    },
                },
            }),
        ),
    ]
}

/// The window policy a request may give in a body: each field may be null, as if absent. Each
/// budget within the server's cap; both budgets are refused; a server that takes no policy
/// from requests takes only nulls.
fn policy(config: &ServerConfig) -> Value {
    let caps = config.limits.policy;
    let maybe_null = |schema: Value| json!({"oneOf": [schema, {"type": "null"}]});
    let mut schema = json!({
        "type": "object",
        "description": "A window policy instead of the server's: each field absent is the server's \
            (a new budget drops the server's `evict_to`).",
        "additionalProperties": false,
        "properties": {
            "max_messages": {
                "type": ["integer", "null"], "minimum": 1, "maximum": caps.max_messages,
                "description": format!("At most this many messages in the window, the system message included (1 to this server's cap, {}).", caps.max_messages),
            },
            "max_tokens": {
                "type": ["integer", "null"], "minimum": 1, "maximum": caps.max_tokens,
                "description": format!("At most this many tokens in the window (1 to this server's cap, {}); not with `max_messages`.", caps.max_tokens),
            },
            "evict_to": {
                "type": ["integer", "null"], "minimum": 1,
                "description": EVICT_TO,
            },
            "tokenizer": maybe_null(reference("Tokenizer")),
            "boundary": maybe_null(reference("Boundary")),
            "clear_tool_results": maybe_null(reference("ClearToolResults")),
        },
        "not": {
            "required": ["max_messages", "max_tokens"],
            "properties": {"max_messages": {"type": "integer"}, "max_tokens": {"type": "integer"}},
        },
    });
    if !caps.allowed {
        schema["description"] = json!("This server takes no window policy from requests: only nulls.");
        if let Some(props) = schema["properties"].as_object_mut() {
            for value in props.values_mut() {
                *value = json!({"type": "null"});
            }
        }
    }
    schema
}

/// A policy's `clear_tool_results`: the core's [`chatmem::ClearSpec`] within its bounds (that the
/// trigger is not below the block, nor above a token budget, JSON Schema cannot say: the
/// descriptions do, and the server answers 400).
fn clear_tool_results() -> Value {
    let count = |description: &str| json!({"type": ["integer", "null"], "minimum": 0, "description": description});
    json!({
        "type": "object",
        "description": "Old tool results cleared from the prompt, never from memory: each is sent as a \
            short placeholder (`[cleared: {tool} result for call {id}, {tokens} tokens]`) with its \
            role, `tool_call_id` and place, except the `keep` most recent tool uses. Each field \
            absent is the server's clearing's, or the default.",
        "additionalProperties": false,
        "properties": {
            "keep": {
                "type": ["integer", "null"], "minimum": 1, "maximum": chatmem::MAX_CLEAR_KEEP,
                "description": format!("The most recent tool uses (a call and its result) kept whole (1 to {}; default {}).", chatmem::MAX_CLEAR_KEEP, chatmem::DEFAULT_CLEAR_KEEP),
            },
            "trigger_tokens": count(TRIGGER),
            "clear_at_least_tokens": count(BLOCK),
            "exclude_tools": {
                "type": ["array", "null"],
                "maxItems": chatmem::MAX_EXCLUDED_TOOLS,
                "items": {"type": "string", "minLength": 1, "maxLength": chatmem::MAX_TOOL_NAME_BYTES},
                "description": format!("Tools whose results are never cleared (at most {} names, each 1 to {} bytes of UTF-8: `maxLength` counts characters, the same bound only for ASCII).", chatmem::MAX_EXCLUDED_TOOLS, chatmem::MAX_TOOL_NAME_BYTES),
            },
            "clear_inputs": {"type": ["boolean", "null"], "description": "Send the cleared calls' arguments as `{}` too (default false)."},
        },
    })
}

const TRIGGER: &str = "Clear only once the window, uncleared, would exceed this many tokens (default: a \
    token window's budget, else 100,000); not below `clear_at_least_tokens`, nor above `max_tokens` \
    (400 otherwise).";
const BLOCK: &str = "Clear in blocks that save at least this many tokens each, so the prompt's \
    beginning changes only when a block is cleared (default 0: one result at a time).";

const EVICT_TO: &str = "Block eviction: once the window outgrows the budget, evict until it fits this \
    many (in the budget's unit; below the budget, which JSON Schema cannot say: 400 otherwise).";

/// The policy as the query parameters of `GET …/messages`: each budget within the server's cap
/// (that both budgets are refused, one parameter's schema cannot say: their descriptions do);
/// none on a server that takes no policy from requests.
fn policy_query(params: &mut Vec<Value>, config: &ServerConfig) {
    let caps = config.limits.policy;
    if !caps.allowed {
        params.retain(|p| p["in"] != "query");
        return;
    }
    for param in params.iter_mut().filter(|p| p["in"] == "query") {
        match param["name"].as_str() {
            Some("max_messages") => {
                param["schema"]["maximum"] = json!(caps.max_messages);
                param["description"] = json!(format!(
                    "At most this many messages in the window, the system message included (1 to this server's cap, {}); not with `max_tokens`.",
                    caps.max_messages
                ));
            }
            Some("max_tokens") => {
                param["schema"]["maximum"] = json!(caps.max_tokens);
                param["description"] = json!(format!(
                    "At most this many tokens in the window (1 to this server's cap, {}); not with `max_messages`.",
                    caps.max_tokens
                ));
            }
            Some("evict_to") => param["description"] = json!(EVICT_TO),
            Some("clear_tool_results.keep") => param["schema"]["maximum"] = json!(chatmem::MAX_CLEAR_KEEP),
            Some("clear_tool_results.trigger_tokens") => {
                param["description"] = json!(TRIGGER);
                param["schema"]["maximum"] = json!(u64::MAX);
            }
            Some("clear_tool_results.clear_at_least_tokens") => {
                param["description"] = json!(BLOCK);
                param["schema"]["maximum"] = json!(u64::MAX);
            }
            Some("clear_tool_results.exclude_tools") => {
                param["schema"]["maxItems"] = json!(chatmem::MAX_EXCLUDED_TOOLS);
                param["schema"]["items"] =
                    json!({"type": "string", "minLength": 1, "maxLength": chatmem::MAX_TOOL_NAME_BYTES});
            }
            _ => {}
        }
    }
}
