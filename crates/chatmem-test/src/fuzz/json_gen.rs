//! JSON text built from fuzz bytes in the shape of chat messages: the known field names and
//! roles, content parts, tool calls, nesting, escapes, and keys given twice (which plain
//! `serde_json::Value` cannot hold), so the decoder's deep paths are reached from the first run
//! instead of waiting for random bytes to spell `"role":"assistant"`.

use arbitrary::{Result, Unstructured};

const FIELDS: &[&str] = &[
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
    "is_error",
    "metadata",
    "type",
    "text",
    "image_url",
    "url",
    "detail",
    "id",
    "function",
    "arguments",
    "messages",
    "model",
    "stream",
    "stop",
    "tools",
    "temperature",
    "max_tokens",
];
const WORDS: &[&str] = &[
    "system",
    "user",
    "assistant",
    "tool",
    "function",
    "text",
    "image_url",
    "input_audio",
    "robot",
    "",
    "LC202610060018",
    "那单能退吗？",
    "\u{1b}]0;x\u{7}",
    "\u{2028}",
    "\u{feff}",
    "{}",
];

/// An array of 0–5 message-like objects.
pub fn messages(u: &mut Unstructured<'_>) -> Result<String> {
    let n = u.int_in_range(0..=5)?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(message(u)?);
    }
    Ok(format!("[{}]", items.join(",")))
}

/// One message-like object: mostly known fields with fitting values, sometimes anything.
pub fn message(u: &mut Unstructured<'_>) -> Result<String> {
    let mut pairs = vec![("role".to_string(), string_of(u.choose(&WORDS[..4])?))];
    let extra = u.int_in_range(0..=4)?;
    for _ in 0..extra {
        let key = key(u)?;
        let value = match key.as_str() {
            "content" => content(u)?,
            "tool_calls" => tool_calls(u)?,
            "metadata" => value(u, 3)?,
            "is_error" => u.choose(&["true", "false", "null", "1"])?.to_string(),
            _ if u.ratio(3, 4)? => string(u)?,
            _ => value(u, 2)?,
        };
        pairs.push((key, value));
    }
    if u.ratio(1, 8)? {
        // The role last, or given twice.
        let first = pairs.remove(0);
        pairs.push(first);
    }
    Ok(object(&pairs))
}

fn key(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(if u.ratio(7, 8)? {
        (*u.choose(FIELDS)?).to_string()
    } else {
        u.arbitrary::<String>()?
    })
}

fn content(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=4)? {
        0 | 1 => string(u)?,
        2 => {
            let n = u.int_in_range(0..=3)?;
            let mut parts = Vec::new();
            for _ in 0..n {
                let kind = *u.choose(&["text", "image_url", "input_audio", "", "x"])?;
                let mut pairs = vec![("type".to_string(), string_of(kind))];
                match u.int_in_range(0..=3)? {
                    0 => pairs.push(("text".into(), string(u)?)),
                    1 => {
                        let url = vec![("url".to_string(), string(u)?), ("detail".to_string(), string(u)?)];
                        pairs.push(("image_url".into(), object(&url)));
                    }
                    2 => pairs.push((key(u)?, value(u, 2)?)),
                    _ => {}
                }
                parts.push(object(&pairs));
            }
            format!("[{}]", parts.join(","))
        }
        3 => "null".into(),
        _ => value(u, 2)?,
    })
}

fn tool_calls(u: &mut Unstructured<'_>) -> Result<String> {
    let n = u.int_in_range(0..=2)?;
    let mut calls = Vec::new();
    for _ in 0..n {
        let function = vec![("name".to_string(), string(u)?), ("arguments".to_string(), string(u)?)];
        let mut pairs = vec![
            ("id".to_string(), string(u)?),
            ("function".to_string(), object(&function)),
        ];
        if u.ratio(3, 4)? {
            pairs.push(("type".into(), string_of(u.choose(&["function", "code"])?)));
        }
        if u.ratio(1, 8)? {
            pairs.push((key(u)?, value(u, 1)?));
        }
        calls.push(object(&pairs));
    }
    Ok(format!("[{}]", calls.join(",")))
}

/// Any JSON value, `depth` levels deep at most.
pub fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<String> {
    let top = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=top)? {
        0 => "null".into(),
        1 => u.arbitrary::<bool>()?.to_string(),
        2 => match u.int_in_range(0..=2)? {
            0 => u.arbitrary::<i64>()?.to_string(),
            1 => u.arbitrary::<u64>()?.to_string(),
            _ => serde_json::to_string(&u.arbitrary::<f64>()?).unwrap_or_else(|_| "0".into()),
        },
        3 | 4 => string(u)?,
        5 => {
            let n = u.int_in_range(0..=3)?;
            let mut items = Vec::new();
            for _ in 0..n {
                items.push(value(u, depth - 1)?);
            }
            format!("[{}]", items.join(","))
        }
        _ => {
            let n = u.int_in_range(0..=3)?;
            let mut pairs = Vec::new();
            for _ in 0..n {
                pairs.push((key(u)?, value(u, depth - 1)?));
            }
            if n > 0 && u.ratio(1, 6)? {
                pairs.push(pairs[0].clone()); // a key given twice
            }
            object(&pairs)
        }
    })
}

/// A JSON string: a known word or arbitrary text (control and invisible characters included).
pub fn string(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(if u.ratio(1, 2)? {
        string_of(u.choose(WORDS)?)
    } else {
        string_of(&u.arbitrary::<String>()?)
    })
}

fn string_of(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// An object from pairs, keys given twice kept (as a client may send them).
pub fn object(pairs: &[(String, String)]) -> String {
    let fields: Vec<String> = pairs.iter().map(|(k, v)| format!("{}:{v}", string_of(k))).collect();
    format!("{{{}}}", fields.join(","))
}
