//! The three real OpenAI clients against `chatmem serve`: the
//! official `openai` package for Python (`chat.completions.parse` with a Pydantic model),
//! LangChain's `ChatOpenAI` (a tool round trip and `with_structured_output`, resending the whole
//! conversation on every call) and the official `openai` package for Node (one turn streamed),
//! each over turns where a later one needs the order number from turn 1.
//!
//! Each example script runs twice against a recording loopback upstream: first straight at it
//! (what the client sends, the reference), then through `chatmem serve`. The upstream answers
//! from what it received, as a model would: the order number only when it is in the messages,
//! a tool call when tools are offered, JSON of the requested schema when `response_format` asks
//! for one. The tests assert what each upstream call received (every field as the client sent
//! it, in its order; `messages` the memory's window plus the turn's new messages), what was
//! stored (`GET /v1/conversations/{id}/history`) and what the client printed. All the
//! expectations of a client are checked before the test fails, so one run lists every miss.
//!
//! The interpreters come from the environment, as `.ci/run` sets them: `CHATMEM_TEST_PYTHON`
//! (the venv's python that `bash examples/python/setup.sh` prints) and `CHATMEM_TEST_NODE` (a
//! node binary; `npm ci` in `examples/node` first); without them the tests are ignored.

use std::path::PathBuf;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chatmem_test::upstream::{Canned, MockUpstream, Reply};
use serde_json::{Map, Value, json};

use crate::support::{Serve, examples_python, repo_path};

const ORDER: &str = "LC202610060018";

// ---------------------------------------------------------------------------------------------
// The recording upstream

/// One call the upstream received, and the assistant message it answered with.
#[derive(Debug, Clone)]
struct Call {
    request: Value,
    answer: Value,
}

/// The mock upstream answering as a model would (JSON and SSE), with the calls it answered
/// (request bodies as received, key order kept: serde_json's `preserve_order`).
struct Upstream {
    /// `http://127.0.0.1:PORT/v1`
    base_url: String,
    calls: Arc<Mutex<Vec<Call>>>,
    _mock: MockUpstream,
}

impl Upstream {
    async fn start() -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let answered = Arc::clone(&calls);
        let mock = MockUpstream::answering(Arc::new(move |request| Reply::Canned(chat(&answered, request)))).await;
        Self {
            base_url: mock.base_url.clone(),
            calls,
            _mock: mock,
        }
    }

    /// The calls received since the last `take`.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().expect("lock"))
    }
}

fn chat(calls: &Mutex<Vec<Call>>, request: &Value) -> Canned {
    if request.is_null() {
        return error("the body is not JSON".to_owned());
    }
    let n = calls.lock().expect("lock").len() + 1;
    let (message, finish) = match reply(request, n) {
        Ok(r) => r,
        Err(e) => return error(e),
    };
    calls.lock().expect("lock").push(Call {
        request: request.clone(),
        answer: message.clone(),
    });
    let id = format!("chatcmpl-upstream-{n}");
    let model = request["model"].clone();
    let prompt_tokens = request["messages"].as_array().map_or(0, Vec::len) * 10;
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": prompt_tokens + 5});
    if request["stream"] != json!(true) {
        let completion = json!({
            "id": id, "object": "chat.completion", "created": 1_700_000_000, "model": model,
            "system_fingerprint": "fp_upstream",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": usage,
        });
        return Canned::json(200, &completion.to_string());
    }
    // OpenAI's stream: the role, the content in pieces (or the tool calls), the finish reason,
    // the usage chunk only when asked for (with empty `choices`), then `[DONE]`.
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
               "system_fingerprint": "fp_upstream",
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    if let Some(text) = message["content"].as_str() {
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(chars.len().div_ceil(2).max(1)) {
            chunks.push(chunk(json!({"content": piece.iter().collect::<String>()}), Value::Null));
        }
    }
    if let Some(tool_calls) = message["tool_calls"].as_array() {
        let calls: Vec<Value> = tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"index": i, "id": c["id"], "type": "function", "function": c["function"]}))
            .collect();
        chunks.push(chunk(json!({"tool_calls": calls}), Value::Null));
    }
    chunks.push(chunk(json!({}), json!(finish)));
    if request["stream_options"]["include_usage"] == json!(true) {
        chunks.push(
            json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000,
                           "model": model, "system_fingerprint": "fp_upstream", "choices": [], "usage": usage}),
        );
    }
    let mut sse = String::new();
    for c in chunks {
        sse.push_str(&format!("data: {c}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    Canned {
        status: 200,
        headers: vec![("content-type", "text/event-stream".to_owned())],
        chunks: vec![(Duration::ZERO, sse.into())],
        cut: false,
    }
}

/// A 400 in OpenAI's error shape: the test's upstream met a request it has no answer for.
fn error(message: String) -> Canned {
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}});
    Canned::json(400, &body.to_string())
}

/// The answer a model would give to what this request holds: it knows the order number only
/// if some received message carries it.
fn reply(request: &Value, n: usize) -> Result<(Value, &'static str), String> {
    let messages = request["messages"].as_array().ok_or("no messages array")?;
    let order = find_order(&request["messages"].to_string());
    let last_role = messages.last().and_then(|m| m["role"].as_str()).unwrap_or_default();
    let tools_offered = request["tools"].as_array().is_some_and(|t| !t.is_empty()) && request["tool_choice"] != "none";
    if let (true, "user", Some(order)) = (tools_offered, last_role, &order) {
        let call = json!({"id": format!("call_{n}"), "type": "function", "function": {
            "name": "order_status", "arguments": json!({"order_id": order}).to_string()}});
        let message = json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [call]});
        return Ok((message, "tool_calls"));
    }
    let text = match (&order, last_role) {
        (Some(order), "tool") => format!("订单 {order} 查到了：尚未发货。"),
        (Some(order), _) => format!("订单 {order} 尚未发货，可以退款，1 到 3 天到账。"),
        (None, _) => "请提供订单号。".to_owned(),
    };
    let content = if request["response_format"]["type"] == "json_schema" {
        // JSON of the requested schema, filled from what the model knows.
        let properties = request["response_format"]["json_schema"]["schema"]["properties"]
            .as_object()
            .ok_or("response_format.json_schema.schema.properties is not an object")?;
        let mut answer = Map::new();
        for name in properties.keys() {
            let value = match name.as_str() {
                "order_id" => order.clone().map_or(Value::Null, Value::String),
                "refundable" => json!(order.is_some()),
                "reply" => json!(text),
                other => {
                    return Err(format!(
                        "the test upstream has no value for the schema property {other:?}"
                    ));
                }
            };
            answer.insert(name.clone(), value);
        }
        Value::Object(answer).to_string()
    } else {
        text
    };
    Ok((
        json!({"role": "assistant", "content": content, "refusal": null}),
        "stop",
    ))
}

/// The first `LC` followed by 12 digits in `text`.
fn find_order(text: &str) -> Option<String> {
    text.match_indices("LC").find_map(|(i, _)| {
        let digits = text.get(i + 2..i + 14)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| format!("LC{digits}"))
    })
}

// ---------------------------------------------------------------------------------------------
// Running a client straight at the upstream and through `chatmem serve`

/// A client example and the server settings it runs under.
struct Client {
    name: &'static str,
    program: PathBuf,
    script: PathBuf,
    conversation: &'static str,
    /// Window and retention flags of `chatmem serve`.
    policy: &'static [&'static str],
    /// The `--max-messages` among `policy`, for the expected windows.
    max_messages: usize,
    /// Whether the client resends the whole conversation (LangChain) rather than only the
    /// turn's new messages.
    full_history: bool,
}

/// What one client did, straight and through chatmem, and what chatmem stored.
struct Outcome {
    direct: Vec<Call>,
    direct_out: Output,
    through: Vec<Call>,
    through_out: Output,
    /// `GET /v1/conversations/{id}/history` (status, body).
    history: (u16, Value),
}

async fn run_script(client: &Client, base_url: &str) -> Output {
    let run = tokio::process::Command::new(&client.program)
        .arg(&client.script)
        .env("CHATMEM_BASE_URL", base_url)
        .env("CHATMEM_MODEL", "mock-model")
        .env("CHATMEM_CONVERSATION", client.conversation)
        .env_remove("CHATMEM_TOKEN")
        .env("NO_PROXY", "127.0.0.1,localhost") // loopback never goes through a proxy
        .env("no_proxy", "127.0.0.1,localhost")
        .env("LANGSMITH_TRACING", "false") // LangChain sends nothing anywhere else
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .unwrap_or_else(|_| panic!("{} finished within 120 s", client.name))
        .unwrap_or_else(|e| panic!("run {}: {e}", client.program.display()))
}

/// What a client printed: stdout, and the end of stderr (where a traceback names its error).
fn printed(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    format!(
        "stdout:\n{}\nstderr (the last lines):\n{}",
        String::from_utf8_lossy(&out.stdout),
        lines[lines.len().saturating_sub(12)..].join("\n")
    )
}

/// Runs `client` straight at a fresh upstream, then through a fresh `chatmem serve` (SQLite)
/// in front of the same upstream.
async fn exercise(client: &Client) -> Outcome {
    let upstream = Upstream::start().await;

    // The reference: what the client sends when nothing stands between it and the model. The
    // script and the upstream must work here, or the harness itself is broken.
    let direct_out = run_script(client, &upstream.base_url).await;
    assert!(
        direct_out.status.success(),
        "{} straight at the upstream failed: {}",
        client.name,
        printed(&direct_out)
    );
    let direct = upstream.take();

    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("clients.db").display());
    let server = Serve::start(
        &[
            &["--store", &store][..],
            client.policy,
            &["--upstream-base-url", &upstream.base_url],
        ]
        .concat(),
        |command| {
            command
                .env("CHATMEM_UPSTREAM_API_KEY", "test-key")
                .env_remove("RUST_LOG");
        },
    )
    .await;
    let base = &server.base;
    let http = reqwest::Client::new();

    let through_out = run_script(client, &format!("{base}/v1")).await;
    let through = upstream.take();

    let r = http
        .get(format!(
            "{base}/v1/conversations/{}/history?limit=1000",
            client.conversation
        ))
        .send()
        .await
        .expect("GET history");
    let status = r.status().as_u16();
    let history = r.json().await.unwrap_or(Value::Null);

    let out = server.stop();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    Outcome {
        direct,
        direct_out,
        through,
        through_out,
        history: (status, history),
    }
}

// ---------------------------------------------------------------------------------------------
// Expectations

/// The failed expectations of one client, reported together at the end.
#[derive(Default)]
struct Misses(Vec<String>);

impl Misses {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn finish(self, client: &str, outcome: &Outcome) {
        assert!(
            self.0.is_empty(),
            "{client} through chatmem serve: {} expectation(s) failed:\n\n- {}\n\nthe client through chatmem: {}",
            self.0.len(),
            self.0.join("\n\n- "),
            printed(&outcome.through_out)
        );
    }
}

/// A message as memory must keep it: role, text, tool calls (id, name, arguments as JSON) and
/// the answered call's id. How a client spells "no text" (`null`, `""`, absent) and how it
/// spaces a call's arguments are the client's business.
fn norm(m: &Value) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), m["role"].clone());
    let content = match &m["content"] {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p["text"].as_str()).collect()),
        _ => None,
    };
    if let Some(c) = content {
        o.insert("content".into(), Value::String(c));
    }
    if let Some(calls) = m["tool_calls"].as_array().filter(|c| !c.is_empty()) {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                let args = c["function"]["arguments"].as_str().unwrap_or_default();
                json!({"id": c["id"], "name": c["function"]["name"],
                       "arguments": serde_json::from_str::<Value>(args).unwrap_or_else(|_| json!(args))})
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = m.get("tool_call_id") {
        o.insert("tool_call_id".into(), id.clone());
    }
    Value::Object(o)
}

fn norm_all(messages: &Value) -> Vec<Value> {
    messages
        .as_array()
        .map(|a| a.iter().map(norm).collect())
        .unwrap_or_default()
}

fn is_instruction(m: &Value) -> bool {
    matches!(m["role"].as_str(), Some("system" | "developer"))
}

/// The window of chatmem's contract (`chatmem::window`) under a message budget, for
/// conversations without damaged tool pairs: the instructions count as one message; the run
/// is the longest newest run that fits and starts on a user message.
fn window(conversation: &[Value], max_messages: usize, instruction: bool) -> &[Value] {
    let room = max_messages - usize::from(instruction);
    let mut start = conversation.len().saturating_sub(room);
    while start < conversation.len() && conversation[start]["role"] != "user" {
        start += 1;
    }
    &conversation[start..]
}

/// How `got` differs from the client's request `sent`, `messages` aside: fields left out,
/// added, changed (values compared as JSON text, so `0.5` read back as `0.5000000001` shows),
/// and the order of the fields both hold. Empty when the upstream got what the client sent.
fn field_diff(sent: &Value, got: &Value) -> Vec<String> {
    let empty = Map::new();
    let sent = sent.as_object().unwrap_or(&empty);
    let got = got.as_object().unwrap_or(&empty);
    let mut diff = Vec::new();
    for (k, v) in sent.iter().filter(|(k, _)| *k != "messages") {
        match got.get(k) {
            None => diff.push(format!("`{k}` dropped (the client sent {})", short(v))),
            Some(g) if !same_text(g, v) => {
                diff.push(format!("`{k}` changed {}", first_difference(&format!("/{k}"), v, g)));
            }
            Some(_) => {}
        }
    }
    for (k, v) in got.iter().filter(|(k, _)| !sent.contains_key(*k)) {
        diff.push(format!("`{k}` added: {}", short(v)));
    }
    let order = |a: &Map<String, Value>, b: &Map<String, Value>| -> Vec<String> {
        a.keys().filter(|k| b.contains_key(*k)).cloned().collect()
    };
    let (in_sent, in_got) = (order(sent, got), order(got, sent));
    if in_sent != in_got {
        diff.push(format!(
            "field order: the client sent {in_sent:?}, the upstream got {in_got:?}"
        ));
    }
    diff
}

/// Equal as JSON text: objects with the same fields in another order differ (`Value`'s `==`
/// ignores the order, which a faithful proxy keeps).
fn same_text(a: &Value, b: &Value) -> bool {
    serde_json::to_string(a).ok() == serde_json::to_string(b).ok()
}

/// Where `got` first departs from `sent`: a JSON pointer and both values there.
fn first_difference(at: &str, sent: &Value, got: &Value) -> String {
    match (sent, got) {
        (Value::Object(a), Value::Object(b)) => {
            let dropped: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
            let added: Vec<&String> = b.keys().filter(|k| !a.contains_key(*k)).collect();
            if !dropped.is_empty() || !added.is_empty() {
                return format!("at {at}: keys {dropped:?} dropped, {added:?} added");
            }
            if let Some((k, v)) = a.iter().find(|(k, v)| !same_text(v, &b[*k])) {
                return first_difference(&format!("{at}/{k}"), v, &b[k]);
            }
            let keys = |m: &Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
            return format!("at {at}: keys reordered from {:?} to {:?}", keys(a), keys(b));
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            if let Some(i) = (0..a.len()).find(|&i| !same_text(&a[i], &b[i])) {
                return first_difference(&format!("{at}/{i}"), &a[i], &b[i]);
            }
        }
        _ => {}
    }
    format!(
        "at {at}: the client sent {}, the upstream got {}",
        short(sent),
        short(got)
    )
}

/// A value as one line, cut at 160 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Messages one per line.
fn lines(messages: &[Value]) -> String {
    messages
        .iter()
        .map(|m| format!("    {m}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `assistant: …` lines a client printed.
fn assistant_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("assistant: "))
        .map(str::to_owned)
        .collect()
}

/// What every client must see through chatmem: it succeeds; each upstream call gets the
/// client's request unchanged but for `messages`, which are the memory's window plus the turn's
/// new messages; everything said is stored once, in order; every answer knows the order.
fn check_memory(client: &Client, o: &Outcome, misses: &mut Misses) {
    misses.check(o.through_out.status.success(), || {
        format!("the client exits with status 0 (got {:?})", o.through_out.status.code())
    });
    misses.check(o.through.len() == o.direct.len(), || {
        format!(
            "the upstream gets one call per client call: {} straight, {} through chatmem",
            o.direct.len(),
            o.through.len()
        )
    });

    // The conversation as memory should hold it, built from what the client sent and what
    // the upstream answered through chatmem.
    let mut instruction: Option<Value> = None;
    let mut conversation: Vec<Value> = Vec::new();
    // What memory should hold after each call that reached the upstream.
    let mut stored: Vec<Value> = Vec::new();
    for (i, direct) in o.direct.iter().enumerate() {
        let sent = norm_all(&direct.request["messages"]);
        if let Some(first) = sent.iter().take_while(|m| is_instruction(m)).last() {
            instruction = Some(first.clone());
        }
        let said: Vec<Value> = sent.into_iter().skip_while(is_instruction).collect();
        // A full-history client resends what memory holds; only the rest is new.
        let new = if client.full_history {
            said.get(conversation.len()..).unwrap_or_default().to_vec()
        } else {
            said
        };
        conversation.extend(new);
        let expected: Vec<Value> = instruction
            .iter()
            .cloned()
            .chain(
                window(&conversation, client.max_messages, instruction.is_some())
                    .iter()
                    .cloned(),
            )
            .collect();
        let answer = o.through.get(i).unwrap_or(direct).answer.clone();
        conversation.push(norm(&answer));

        let Some(through) = o.through.get(i) else { continue };
        stored = instruction.iter().chain(&conversation).cloned().collect();
        let got = norm_all(&through.request["messages"]);
        misses.check(got == expected, || {
            format!(
                "call {}: the upstream gets memory's window plus the new messages:\n{}\n  but got (the client sent {}):\n{}",
                i + 1,
                lines(&expected),
                direct.request["messages"].as_array().map_or(0, Vec::len),
                lines(&got)
            )
        });
        let diff = field_diff(&direct.request, &through.request);
        misses.check(diff.is_empty(), || {
            format!(
                "call {}: every other field reaches the upstream as the client sent it, in its order:\n    {}",
                i + 1,
                diff.join("\n    ")
            )
        });
    }

    // Stored: every message once, in order, up to the last call that reached the upstream (a
    // conversation with nothing stored may answer 404).
    let (status, history) = &o.history;
    let got = norm_all(&history["messages"]);
    misses.check(
        (*status == 200 && got == stored) || (*status == 404 && stored.is_empty()),
        || {
            format!(
                "GET …/history holds each message once, in order:\n{}\n  but answers {status} with:\n{}",
                lines(&stored),
                lines(&got)
            )
        },
    );

    let answers = assistant_lines(&o.through_out);
    misses.check(!answers.is_empty() && answers.iter().all(|a| a.contains(ORDER)), || {
        format!("every answer the client printed names {ORDER}: {answers:?}")
    });
}

/// Asserts that the client sent `field` with `value` on every call (the script's own
/// behaviour, checked on the straight run: a field the client never sends proves nothing).
fn sends(o: &Outcome, calls: std::ops::Range<usize>, pointer: &str, value: Value) {
    for i in calls {
        assert_eq!(
            o.direct[i].request.pointer(pointer),
            Some(&value),
            "call {} of the client sends {pointer}: {}",
            i + 1,
            o.direct[i].request
        );
    }
}

/// Without memory, a client that sends only the new messages gets no order number after turn
/// 1: the number in its answers through chatmem came from chatmem.
fn control_without_memory(o: &Outcome) {
    let answers = assistant_lines(&o.direct_out);
    assert!(answers.len() >= 3, "{}", printed(&o.direct_out));
    assert!(answers[0].contains(ORDER), "{answers:?}");
    assert!(answers[1..].iter().all(|a| !a.contains(ORDER)), "{answers:?}");
}

// ---------------------------------------------------------------------------------------------
// The clients

/// Python `openai`: `client.chat.completions.parse(response_format=AfterSaleAnswer)` on three
/// turns, each sending the system message and the new user message only.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PYTHON"]
async fn python_openai_parse_gets_structured_answers_with_memory() {
    let program = examples_python();
    let client = Client {
        name: "examples/python/aftersale_parse.py",
        program,
        script: repo_path("examples/python/aftersale_parse.py"),
        conversation: "app-user-42-aftersale-parse",
        policy: &["--max-messages", "10"],
        max_messages: 10,
        full_history: false,
    };
    let o = exercise(&client).await;
    assert_eq!(o.direct.len(), 3, "{}", printed(&o.direct_out));
    sends(&o, 0..3, "/response_format/type", json!("json_schema"));
    sends(&o, 0..3, "/response_format/json_schema/name", json!("AfterSaleAnswer"));
    sends(&o, 0..3, "/response_format/json_schema/strict", json!(true));
    sends(&o, 0..3, "/max_completion_tokens", json!(300));
    sends(&o, 0..3, "/seed", json!(7));
    control_without_memory(&o);

    let mut misses = Misses::default();
    check_memory(&client, &o, &mut misses);
    // The parsed answers: turns 2 and 3 know the order from memory, and say it may be refunded.
    let answers = assistant_lines(&o.through_out);
    for (i, line) in answers.iter().enumerate() {
        let parsed: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        misses.check(parsed["order_id"] == ORDER && parsed["refundable"] == true, || {
            format!(
                "turn {}: the parsed AfterSaleAnswer names the order, refundable: {line}",
                i + 1
            )
        });
    }
    misses.finish(client.name, &o);
}

/// LangChain `ChatOpenAI`: a tool round trip (`bind_tools` with `strict`, `tool_choice`,
/// `parallel_tool_calls`), `with_structured_output`, then plain text; LangChain resends the
/// whole conversation on every call. Under a window of 6 (with `keep-history`), the last call
/// carries 8 messages from the client and must reach the upstream as the window of 4.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PYTHON"]
async fn langchain_resends_everything_and_the_upstream_gets_the_window() {
    let program = examples_python();
    let client = Client {
        name: "examples/python/aftersale_langchain.py",
        program,
        script: repo_path("examples/python/aftersale_langchain.py"),
        conversation: "app-user-42-aftersale-langchain",
        policy: &["--max-messages", "6", "--retention", "keep-history"],
        max_messages: 6,
        full_history: true,
    };
    let o = exercise(&client).await;
    // The tool call, the tool result, the structured answer, the plain question.
    assert_eq!(o.direct.len(), 4, "{}", printed(&o.direct_out));
    sends(&o, 0..2, "/tools/0/function/name", json!("order_status"));
    sends(&o, 0..2, "/tools/0/function/strict", json!(true));
    sends(&o, 0..2, "/tool_choice", json!("auto"));
    sends(&o, 0..2, "/parallel_tool_calls", json!(false));
    sends(&o, 2..3, "/response_format/type", json!("json_schema"));
    sends(&o, 2..3, "/response_format/json_schema/name", json!("RefundAnswer"));
    sends(&o, 0..4, "/max_completion_tokens", json!(300));
    let lens: Vec<usize> = o
        .direct
        .iter()
        .map(|c| c.request["messages"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(lens, [2, 4, 6, 8], "LangChain resends the whole conversation");

    let mut misses = Misses::default();
    check_memory(&client, &o, &mut misses);
    misses.finish(client.name, &o);
}

/// Node `openai`: a `developer` message and the order, then a streamed turn with only the new
/// message (`stream_options.include_usage`), then the developer message again with a question.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_NODE"]
async fn node_openai_gets_memory_plain_and_streaming() {
    let program = chatmem_test::required_env(
        "CHATMEM_TEST_NODE",
        "name a node binary (after `npm ci` in examples/node)",
    );
    assert!(
        repo_path("examples/node/node_modules/openai/package.json").exists(),
        "CHATMEM_TEST_NODE is set but examples/node/node_modules has no openai: run `npm ci` in examples/node"
    );
    let client = Client {
        name: "examples/node/aftersale.mjs",
        program: PathBuf::from(program),
        script: repo_path("examples/node/aftersale.mjs"),
        conversation: "app-user-42-aftersale-node",
        policy: &["--max-messages", "10"],
        max_messages: 10,
        full_history: false,
    };
    let o = exercise(&client).await;
    assert_eq!(o.direct.len(), 3, "{}", printed(&o.direct_out));
    sends(&o, 0..1, "/messages/0/role", json!("developer"));
    sends(&o, 0..1, "/max_completion_tokens", json!(300));
    sends(&o, 0..1, "/presence_penalty", json!(0.5));
    sends(&o, 0..1, "/metadata", json!({"app": "aftersale"}));
    sends(&o, 1..2, "/stream", json!(true));
    sends(&o, 1..2, "/stream_options", json!({"include_usage": true}));
    sends(&o, 2..3, "/temperature", json!(0.2));
    control_without_memory(&o);

    let mut misses = Misses::default();
    check_memory(&client, &o, &mut misses);
    misses.finish(client.name, &o);
}
