//! `/openapi.json` says what the server takes: for conversation ids, history cursors, window
//! policies (in a body and in a query), messages of every role (in `POST …/messages` and on the
//! door), a request the document calls valid is taken and one it calls invalid is refused. And
//! the door's answers (an upstream's refusal passed through, a stream's events) validate
//! against the schemas it declares for them. What schemathesis checks
//! (`tests/schemathesis/run.sh`), pinned case by case, driven in process.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, Method, StatusCode};
use chatmem::{ChatMemory, InMemoryStore, WindowPolicy};
use chatmem_server::{ServerConfig, Upstream, app};
use chatmem_test::app::{App, json_request};
use chatmem_test::upstream::{self as upstream, Canned, MockUpstream};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use crate::http::server;

/// Whether `instance` is valid by `schema`, its `$ref`s resolved within `doc`.
fn valid(doc: &Value, schema: &Value, instance: &Value) -> bool {
    let mut root = doc.clone();
    root["allOf"] = json!([schema]);
    jsonschema::validator_for(&root)
        .expect("the document is a valid schema")
        .is_valid(instance)
}

fn component(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The schema of parameter `name` of `method path`.
fn parameter(doc: &Value, path: &str, method: &str, name: &str) -> Value {
    doc["paths"][path][method]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has a parameter {name}"))["schema"]
        .clone()
}

fn segment(id: &str) -> String {
    utf8_percent_encode(id, NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn the_ids_the_document_allows_are_the_ids_the_server_takes() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let doc = server.get("/openapi.json").await.json();
    let id_schema = parameter(&doc, "/v1/conversations/{id}/messages", "get", "id");
    let cursor_schema = parameter(&doc, "/v1/conversations", "get", "cursor");
    let longest = "i".repeat(chatmem_server::DEFAULT_MAX_ID_BYTES);
    let over = format!("{longest}i");
    let cases = [
        "a",
        "订单-LC202610060018",
        "a/b",
        "a b",
        "%41",
        "{x}:*",
        "é",
        longest.as_str(),
        "\u{8b}Z",
        "a\nb",
        "\t",
        "a\u{200b}b",
        "\u{202e}x",
        "x\u{110bd}",
        "x\u{e0041}",
        over.as_str(),
    ];
    for id in cases {
        let documented = valid(&doc, &id_schema, &json!(id));
        assert_eq!(valid(&doc, &cursor_schema, &json!(id)), documented, "{id:?}");
        let r = server.get(&format!("/v1/conversations/{}/messages", segment(id))).await;
        assert_eq!(
            documented,
            r.status == StatusCode::NOT_FOUND,
            "{id:?}: {} {}",
            r.status,
            r.text()
        );
        let r = server.get(&format!("/v1/conversations?cursor={}", segment(id))).await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "cursor {id:?}: {} {}",
            r.status,
            r.text()
        );
    }
    // An id over the limit is refused as too large; the document says so.
    let r = server.get(&format!("/v1/conversations/{over}/messages")).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn the_history_cursors_the_document_allows_are_the_cursors_the_server_takes() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let url = "/v1/conversations/c1/messages";
    let batch = json!({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]});
    assert_eq!(server.post_json(url, &batch).await.status, StatusCode::OK);
    let doc = server.get("/openapi.json").await.json();
    let schema = parameter(&doc, "/v1/conversations/{id}/history", "get", "cursor");
    let first = server.get("/v1/conversations/c1/history?limit=1").await.json();
    let given = first["next_cursor"].as_str().expect("a next page").to_owned();
    for cursor in [
        given.as_str(),
        "1",
        "42",
        "9999999999999999999",
        "",
        "0",
        "+5",
        "007",
        "-1",
        "1.0",
        " 1",
        "abc",
        "10000000000000000000",
    ] {
        let documented = valid(&doc, &schema, &json!(cursor));
        let r = server
            .get(&format!("/v1/conversations/c1/history?cursor={}", segment(cursor)))
            .await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "{cursor:?}: {} {}",
            r.status,
            r.text()
        );
    }
}

/// A page past a cursor is empty at a conversation's end, and 404 once the conversation is
/// deleted, as before the cursor (what schemathesis's stateful phase checks of a `DELETE`).
#[tokio::test]
async fn a_deleted_conversation_has_no_history_past_a_cursor_either() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let batch = json!({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]});
    let r = server.post_json("/v1/conversations/c1/messages", &batch).await;
    assert_eq!(r.status, StatusCode::OK);
    let past_the_end = "/v1/conversations/c1/history?cursor=99";
    let r = server.get(past_the_end).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["messages"], json!([]));
    assert_eq!(
        server.delete("/v1/conversations/c1").await.status,
        StatusCode::NO_CONTENT
    );
    for url in [
        "/v1/conversations/c1/history",
        past_the_end,
        "/v1/conversations/c1/history?cursor=1",
    ] {
        let r = server.get(url).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{url}: {}", r.text());
        assert_eq!(r.error_code(), "not_found", "{url}");
    }
}

/// A recall question and `k` the document allows are what the server takes (the URI limit's
/// 414 aside, which the document also lists).
#[tokio::test]
async fn the_recall_parameters_the_document_allows_are_the_ones_the_server_takes() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let batch = json!({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]});
    assert_eq!(
        server.post_json("/v1/conversations/c1/messages", &batch).await.status,
        StatusCode::OK
    );
    let doc = server.get("/openapi.json").await.json();
    let path = "/v1/conversations/{id}/recall";
    let q_schema = parameter(&doc, path, "get", "q");
    let k_schema = parameter(&doc, path, "get", "k");
    let required: Vec<&str> = doc["paths"][path]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter(|p| p["required"] == true)
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(required, ["id", "q"]);
    for q in ["order", "订单 LC202610060018", " ", "?!", "a&b=c", "\u{0}", ""] {
        let documented = valid(&doc, &q_schema, &json!(q));
        let r = server
            .get(&format!("/v1/conversations/c1/recall?q={}", segment(q)))
            .await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "q {q:?}: {} {}",
            r.status,
            r.text()
        );
    }
    for k in ["1", "5", "100", "0", "101", "-1", "1.5", "abc", ""] {
        let value = k.parse::<i64>().map_or_else(|_| json!(k), |n| json!(n));
        let documented = valid(&doc, &k_schema, &value);
        let r = server
            .get(&format!("/v1/conversations/c1/recall?q=a&k={}", segment(k)))
            .await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "k {k:?}: {} {}",
            r.status,
            r.text()
        );
    }
}

#[tokio::test]
async fn the_policies_the_document_allows_are_the_policies_the_server_takes() {
    // The window is 6 messages: an `evict_to` alone must be below 6.
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let doc = server.get("/openapi.json").await.json();
    let url = "/v1/conversations/c1/messages";
    let user = json!([{"role": "user", "content": "hi"}]);
    assert_eq!(
        server.post_json(url, &json!({"messages": user})).await.status,
        StatusCode::OK
    );
    let body = component("PostMessages");
    for policy in [
        json!(null),
        json!({}),
        json!({"max_messages": 5}),
        json!({"max_messages": 5.0}),
        json!({"max_tokens": 100, "evict_to": 50, "tokenizer": "o200k", "boundary": "pair-safe"}),
        json!({"max_messages": 5, "max_tokens": null}),
        json!({"max_messages": null, "max_tokens": null, "tokenizer": null, "boundary": null, "evict_to": null}),
        json!({"evict_to": 3}),
        json!({"max_messages": 1000}),
        json!({"max_messages": 5, "max_tokens": 100}),
        json!({"max_messages": 1001}),
        json!({"max_messages": 0}),
        json!({"max_messages": 5.5}),
        json!({"max_messages": -1}),
        json!({"max_messages": "5"}),
        json!({"tokenizer": "gpt2"}),
        json!({"colour": 1}),
        json!([null, null]),
        json!([5]),
        json!("max_messages=5"),
    ] {
        let request = json!({"messages": user, "policy": policy});
        let documented = valid(&doc, &body, &request);
        let r = server.post_json(url, &request).await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "{policy}: {} {}",
            r.status,
            r.text()
        );
    }
    // The same policy as query parameters, each by its own schema. That both budgets are
    // refused no one parameter's schema can say: their descriptions say it.
    for text in [
        "max_messages=5",
        "max_tokens=100&evict_to=50",
        "tokenizer=heuristic&boundary=user",
        "max_messages=1000",
        "max_messages=1001",
        "max_messages=0",
        "max_tokens=abc",
        "tokenizer=gpt2",
        "colour=red",
    ] {
        let documented = text.split('&').all(|pair| {
            let (name, value) = pair.split_once('=').expect("name=value");
            let params = doc["paths"]["/v1/conversations/{id}/messages"]["get"]["parameters"].clone();
            let Some(param) = params
                .as_array()
                .expect("parameters")
                .iter()
                .find(|p| p["name"] == name)
                .cloned()
            else {
                return false;
            };
            let value = value.parse::<u64>().map_or_else(|_| json!(value), |n| json!(n));
            valid(&doc, &param["schema"], &value)
        });
        let r = server.get(&format!("{url}?{text}")).await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "{text}: {} {}",
            r.status,
            r.text()
        );
    }
    let r = server.get(&format!("{url}?max_messages=5&max_tokens=100")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let params = doc["paths"]["/v1/conversations/{id}/messages"]["get"]["parameters"].clone();
    let max_tokens = params
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == "max_tokens")
        .cloned();
    assert!(
        max_tokens.is_some_and(|p| p["description"]
            .as_str()
            .is_some_and(|d| d.contains("not with `max_messages`"))),
        "the description says it"
    );
}

/// Messages by role: `(message, whether memory takes it)`; the door takes the same ones,
/// alone in a request (a system message alone is no turn).
fn messages() -> Vec<Value> {
    let call = json!({"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}});
    let text = json!({"type": "text", "text": "t"});
    vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "user", "content": ""}),
        json!({"role": "user", "content": [], "name": "alice", "metadata": {"k": [1]}}),
        json!({"role": "user", "content": [text, {"type": "image_url", "image_url": {"url": "https://x/p.jpg", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}, {"type": "refusal", "why": 1}]}),
        json!({"role": "user", "content": "hi", "name": null, "metadata": null, "tool_calls": null, "tool_call_id": null,
            "reasoning_content": null, "is_error": null}),
        json!({"role": "system", "content": [text]}),
        json!({"role": "developer", "content": "rules"}),
        json!({"role": "assistant", "content": "a", "reasoning_content": "r"}),
        json!({"role": "assistant", "content": [], "tool_calls": null}),
        json!({"role": "assistant", "content": [text, {"type": "refusal", "refusal": "no"}]}),
        json!({"role": "assistant", "content": null, "tool_calls": [call]}),
        json!({"role": "assistant", "tool_calls": [{"id": "c", "type": null, "function": {"name": "f", "arguments": ""}}]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "42", "is_error": true}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": [text], "is_error": null}),
        // Refused.
        json!({"role": "tool", "content": "42"}),
        json!({"role": "tool", "tool_call_id": "", "content": "42"}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": null}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": [{"type": "refusal", "refusal": "no"}]}),
        json!({"role": "user"}),
        json!({"role": "user", "content": 5}),
        json!({"role": "user", "content": "hi", "tool_call_id": "call_1"}),
        json!({"role": "user", "content": "hi", "tool_calls": []}),
        json!({"role": "user", "content": "hi", "is_error": false}),
        json!({"role": "user", "content": "hi", "metadata": "m"}),
        json!({"role": "user", "content": "hi", "colour": "red"}),
        json!({"role": "user", "content": [{"type": "text", "text": "t", "extra": 1}]}),
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"detail": "low"}}]}),
        json!({"role": "user", "content": [{"text": "t"}]}),
        json!({"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}),
        json!({"role": "system", "content": "s", "reasoning_content": "r"}),
        json!({"role": "assistant"}),
        json!({"role": "assistant", "content": null, "tool_calls": []}),
        json!({"role": "assistant", "content": [{"type": "input_audio"}]}),
        json!({"role": "assistant", "tool_calls": [{"id": "", "function": {"name": "f", "arguments": ""}}]}),
        json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "tool", "function": {"name": "f", "arguments": ""}}]}),
        json!({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "", "arguments": ""}}]}),
        json!({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}),
        json!({"role": "robot", "content": "hi"}),
        json!("hi"),
    ]
}

#[tokio::test]
async fn the_messages_the_document_allows_are_the_messages_the_server_takes() {
    // No upstream: a door request the server reads is answered 503 before any model call.
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let doc = server.get("/openapi.json").await.json();
    let memory_body = component("PostMessages");
    let door_body = component("ChatCompletionRequest");
    let door = |body: &Value| {
        let mut r = json_request(Method::POST, "/v1/chat/completions", body);
        r.headers_mut()
            .insert("x-chatmem-conversation", HeaderValue::from_static("door"));
        server.send(r)
    };
    let (mut taken, mut refused) = (0, 0);
    for (i, message) in messages().into_iter().enumerate() {
        let request = json!({"messages": [message]});
        let documented = valid(&doc, &memory_body, &request);
        let r = server
            .post_json(&format!("/v1/conversations/m{i}/messages"), &request)
            .await;
        assert_eq!(
            documented,
            r.status == StatusCode::OK,
            "{message}: {} {}",
            r.status,
            r.text()
        );
        if documented {
            taken += 1
        } else {
            refused += 1
        }

        let system_alone = message["role"] == "system" || message["role"] == "developer";
        let request = json!({"model": "m", "messages": [message]});
        let documented = valid(&doc, &door_body, &request);
        let r = door(&request).await;
        let read = r.status == StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(documented, read, "door {message}: {} {}", r.status, r.text());
        assert!(!(system_alone && read), "a system message alone is no turn");
    }
    assert!(taken >= 10 && refused >= 20, "{taken} taken, {refused} refused");

    // The door's own: an answer sent back, the turn's order, `n`.
    let user = json!({"role": "user", "content": "hi"});
    let system = json!({"role": "system", "content": "rules"});
    for request in [
        json!({"model": "m", "messages": [{"role": "assistant", "content": null, "refusal": "no"}]}),
        json!({"model": "m", "messages": [{"role": "assistant", "content": "", "refusal": "no"}]}),
        json!({"model": "m", "messages": [{"role": "assistant", "content": "a", "refusal": null, "annotations": [],
            "parsed": {"x": 1}, "audio": null, "function_call": null}]}),
        json!({"model": "m", "messages": [system, user]}),
        json!({"model": "m", "messages": [user], "n": 1}),
        json!({"model": "m", "messages": [user], "n": 1.0}),
        json!({"model": "m", "messages": [user], "n": null, "stream": null}),
        json!({"model": "m", "messages": [{"role": "assistant", "content": "a", "refusal": "no"}]}),
        json!({"model": "m", "messages": [{"role": "assistant", "refusal": ""}]}),
        json!({"model": "m", "messages": [{"role": "assistant", "content": "a", "audio": {"id": "x"}}]}),
        json!({"model": "m", "messages": [{"role": "assistant", "content": "a", "refusal": 5}]}),
        json!({"model": "m", "messages": [user, system]}),
        json!({"model": "m", "messages": [system]}),
        json!({"model": "m", "messages": []}),
        json!({"model": "m", "messages": [user], "n": 2}),
        json!({"model": "m", "messages": [user], "stream": "yes"}),
    ] {
        let documented = valid(&doc, &door_body, &request);
        let r = door(&request).await;
        let read = r.status == StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(documented, read, "door {request}: {} {}", r.status, r.text());
    }
}

/// The server in front of `upstream`.
fn door_to(upstream: &MockUpstream) -> App {
    let memory = ChatMemory::builder(Arc::new(InMemoryStore::new()) as Arc<dyn chatmem::Store>)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    let config = ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: None,
        }),
        ..ServerConfig::default()
    };
    App::new(app(memory, config))
}

#[tokio::test]
async fn the_doors_answers_validate_against_the_document() {
    let refusal =
        json!({"error": {"message": "invalid model", "type": "invalid_request_error", "param": "model", "code": null}});
    let upstream = MockUpstream::canned(vec![
        Canned::json(400, &refusal.to_string()),
        Canned::sse(upstream::chunks(&["Noted."], true), Duration::ZERO),
    ])
    .await;
    let server = door_to(&upstream);
    let doc = server.get("/openapi.json").await.json();
    let send = |stream: bool| {
        let body = json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}],
            "stream_options": {"include_usage": true}});
        let mut r = json_request(Method::POST, "/v1/chat/completions", &body);
        r.headers_mut()
            .insert("x-chatmem-conversation", HeaderValue::from_static("c1"));
        server.send(r)
    };
    let answers = &doc["paths"]["/v1/chat/completions"]["post"]["responses"];

    let r = send(false).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let passed = r.json();
    assert_eq!(
        passed["error"]["message"], "invalid model",
        "the upstream's refusal, passed through"
    );
    let schema = &answers["400"]["content"]["application/json"]["schema"];
    assert!(valid(&doc, schema, &passed), "{passed} by {schema}");
    assert!(
        !valid(&doc, &component("Error"), &passed),
        "not chatmem's own error shape"
    );
    let own = server.get("/v1/conversations/none/messages").await.json();
    assert!(valid(&doc, schema, &own), "chatmem's own 400 too: {own}");

    let r = send(true).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let schema = &answers["200"]["content"]["text/event-stream"]["schema"];
    let events: Vec<Value> = r
        .text()
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|data| json!({"data": data}))
        .collect();
    assert!(events.len() >= 3, "{events:?}");
    assert_eq!(events.last(), Some(&json!({"data": "[DONE]"})));
    for event in &events {
        assert!(valid(&doc, schema, event), "{event} by {schema}");
    }
    assert!(!valid(&doc, schema, &json!("data: [DONE]")), "an event is an object");
}

/// The links of a write name operations the document has, each taking the written id.
#[tokio::test]
async fn a_writes_links_name_documented_operations() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let doc = server.get("/openapi.json").await.json();
    let links = &doc["paths"]["/v1/conversations/{id}/messages"]["post"]["responses"]["200"]["links"];
    let operations: Vec<&str> = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("a path item").values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let links = links.as_object().expect("links");
    assert_eq!(links.len(), 4, "{links:?}");
    for (name, link) in links {
        let id = link["operationId"].as_str().expect("an operationId");
        assert!(operations.contains(&id), "{name}: {id} is not an operation");
        assert_eq!(link["parameters"], json!({"id": "$request.path.id"}), "{name}");
    }
}
