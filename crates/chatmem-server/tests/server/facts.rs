//! Users' facts over HTTP: the `/v1/users/{user}/facts` routes end to end on the in-memory
//! store (list, add, patch, pin, delete, history, forget; tenants kept apart; hostile user
//! ids; read-only tokens), and the OpenAI door's `X-Chatmem-User`: a second conversation of
//! the same user is sent a fact from the first, a deleted fact never again, and with a facts
//! model a fact read from conversation 1 reaches conversation 2's request.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, Method, Request, StatusCode};
use chatmem::facts::{FACTS_HEADING, FactExtractor, Facts};
use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
use chatmem_server::{Auth, ServerConfig, Upstream, app};
use chatmem_test::app::{App, json_request};
use chatmem_test::upstream::{self as upstream, MockUpstream, text};
use chatmem_test::{FactsModel, Scripted};
use serde_json::{Value, json};

/// A server over a fresh in-memory store, window of 4, facts on.
fn server(config: ServerConfig) -> App {
    server_with(config, None)
}

fn server_with(config: ServerConfig, extractor: Option<FactExtractor>) -> App {
    server_over(Arc::new(InMemoryStore::new()), config, extractor)
}

fn server_over(store: Arc<dyn Store>, config: ServerConfig, extractor: Option<FactExtractor>) -> App {
    let builder = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(4))
        .facts(Facts::new());
    let builder = match extractor {
        Some(e) => builder.fact_extractor(e),
        None => builder,
    };
    App::new(app(builder.build().expect("valid memory settings"), config))
}

fn two_tenants() -> ServerConfig {
    let auth = Auth::from_toml(
        "[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n\
         [[token]]\ntoken = \"reader-of-team-a-0\"\ntenant = \"team-a\"\nwrite = false\n\
         [[token]]\ntoken = \"token-of-team-b-000\"\ntenant = \"team-b\"\n",
    )
    .expect("auth");
    ServerConfig {
        auth: Some(auth),
        ..ServerConfig::default()
    }
}

#[tokio::test]
async fn facts_are_listed_added_patched_pinned_deleted_and_forgotten() {
    by_hand(&server(ServerConfig::default())).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn facts_by_hand_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = chatmem_sqlite::SqliteStore::open(dir.path().join("facts.db"))
        .await
        .expect("open");
    by_hand(&server_over(Arc::new(store), ServerConfig::default(), None)).await;
}

/// Every facts route, as a person in charge of a user's facts uses them.
async fn by_hand(app: &App) {
    let facts = "/v1/users/app-user-42/facts";
    let empty = app.get(facts).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.json(), json!({"facts": [], "version": 0}));

    let nuts = app.post_json(facts, &json!({"text": "Allergic to nuts"})).await;
    assert_eq!(nuts.status, StatusCode::CREATED, "{}", nuts.text());
    let nuts = nuts.json();
    assert_eq!(nuts["text"], "Allergic to nuts");
    assert_eq!(nuts["key"], Value::Null);
    assert_eq!(nuts["pinned"], false);
    assert_eq!(nuts["sources"], json!([]));
    assert!(nuts["created"].as_str().is_some_and(|t| t.ends_with('Z')), "{nuts}");
    let berlin = app
        .post_json(facts, &json!({"text": "Lives in Berlin", "key": "home.city"}))
        .await
        .json();
    let hamburg = app
        .post_json(facts, &json!({"text": "Lives in Hamburg", "key": "home.city"}))
        .await
        .json();
    let listed = app.get(facts).await.json();
    let texts: Vec<&str> = listed["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .filter_map(|f| f["text"].as_str())
        .collect();
    // Keyed facts first, by key; the superseded one is gone from the list.
    assert_eq!(texts, ["Lives in Hamburg", "Allergic to nuts"]);
    assert_eq!(listed["version"], 3);
    // Berlin's history: added, then superseded by Hamburg.
    let history = app.get(&format!("{facts}/{}/history", berlin["id"])).await.json();
    let kinds: Vec<&str> = history["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|c| c["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["added", "superseded"]);
    assert_eq!(history["history"][1]["by"], hamburg["id"]);
    assert_eq!(history["history"][0]["cause"], json!({"by": "hand"}));

    // Patch the text and pin, in one request.
    let nut = format!("{facts}/{}", nuts["id"]);
    let patched = app
        .send_json(
            Method::PATCH,
            &nut,
            &json!({"text": "Allergic to peanuts", "pinned": true}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    assert_eq!(patched.json()["text"], "Allergic to peanuts");
    assert_eq!(patched.json()["pinned"], true);
    let first = app.get(facts).await.json();
    assert_eq!(first["facts"][0]["text"], "Allergic to peanuts", "pinned first");
    // A key another fact has is refused, naming the key.
    let taken = app.send_json(Method::PATCH, &nut, &json!({"key": "home.city"})).await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert_eq!(taken.error_code(), "fact_refused");
    assert_eq!(taken.json()["error"]["param"], "key");
    // Bad bodies and keys.
    for (body, param) in [
        (json!({}), Value::Null),
        (json!({"key": "Not A Key"}), json!("key")),
        (json!({"text": ""}), json!("text")),
        (json!({"text": "x".repeat(600)}), json!("text")),
        (json!({"colour": "red"}), Value::Null),
    ] {
        let refused = app.send_json(Method::PATCH, &nut, &body).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{body}: {}", refused.text());
        assert_eq!(refused.error_code(), "invalid_request");
        if !param.is_null() {
            assert_eq!(refused.json()["error"]["param"], param, "{body}");
        }
    }
    // Unknown facts are 404; a fact id that is not one is 400 naming `fact`.
    assert_eq!(
        app.send_json(Method::PATCH, &format!("{facts}/999"), &json!({"pinned": true}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.delete(&format!("{facts}/999")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&format!("{facts}/999/history")).await.status,
        StatusCode::NOT_FOUND
    );
    for bad in ["0", "-1", "x", "1.5", "99999999999999999999999"] {
        let refused = app.get(&format!("{facts}/{bad}/history")).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(refused.json()["error"]["param"], "fact", "{bad}");
    }

    // Delete Hamburg: Berlin (which it superseded) goes with it, histories included.
    let deleted = app.delete(&format!("{facts}/{}", hamburg["id"])).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get(&format!("{facts}/{}/history", berlin["id"])).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.get(facts).await.json()["facts"].as_array().map(Vec::len), Some(1));

    // Forget the user: nothing kept; forgetting again is no error.
    assert_eq!(app.delete(facts).await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.get(facts).await.json(), json!({"facts": [], "version": 0}));
    assert_eq!(app.delete(facts).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn tenants_are_kept_apart_and_read_only_tokens_may_only_read() {
    let server = server(two_tenants());
    let (a, reader, b) = (
        server.as_bearer("token-of-team-a-000"),
        server.as_bearer("reader-of-team-a-0"),
        server.as_bearer("token-of-team-b-000"),
    );
    let facts = "/v1/users/u1/facts";
    let added = a.post_json(facts, &json!({"text": "Prefers email"})).await;
    assert_eq!(added.status, StatusCode::CREATED);
    let id = added.json()["id"].clone();
    // Tenant B's user u1 is another user: none of A's facts, and A's fact is not B's to touch.
    assert_eq!(b.get(facts).await.json()["facts"], json!([]));
    assert_eq!(
        b.get(&format!("{facts}/{id}/history")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(b.delete(&format!("{facts}/{id}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(b.delete(facts).await.status, StatusCode::NO_CONTENT);
    assert_eq!(a.get(facts).await.json()["facts"].as_array().map(Vec::len), Some(1));
    // No token: 401.
    assert_eq!(server.get(facts).await.status, StatusCode::UNAUTHORIZED);
    // The reader reads, and every write is 403 `read_only_token`.
    assert_eq!(reader.get(facts).await.json()["facts"][0]["text"], "Prefers email");
    assert_eq!(
        reader.get(&format!("{facts}/{id}/history")).await.status,
        StatusCode::OK
    );
    for answer in [
        reader.post_json(facts, &json!({"text": "x"})).await,
        reader
            .send_json(Method::PATCH, &format!("{facts}/{id}"), &json!({"pinned": true}))
            .await,
        reader.delete(&format!("{facts}/{id}")).await,
        reader.delete(facts).await,
    ] {
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        assert_eq!(answer.error_code(), "read_only_token");
    }
    assert_eq!(a.get(facts).await.json()["facts"][0]["pinned"], false);
}

#[tokio::test]
async fn hostile_user_ids_are_refused_naming_user() {
    let app = server(ServerConfig::default());
    for (path, status) in [
        ("/v1/users/a%0Ab/facts", StatusCode::BAD_REQUEST),
        ("/v1/users/a%E2%80%8Bb/facts", StatusCode::BAD_REQUEST),
        ("/v1/users/%FF/facts", StatusCode::BAD_REQUEST),
        (
            &*format!("/v1/users/{}/facts", "u".repeat(300)),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ] {
        let refused = app.get(path).await;
        assert_eq!(refused.status, status, "{path}: {}", refused.text());
        assert_eq!(refused.json()["error"]["param"], "user", "{path}");
    }
    // A `/` in a user id is one segment, sent as %2F.
    let slashed = app
        .post_json("/v1/users/a%2Fb/facts", &json!({"text": "Has a slash"}))
        .await;
    assert_eq!(slashed.status, StatusCode::CREATED);
    assert_eq!(app.get("/v1/users/a/facts").await.json()["facts"], json!([]));
    // A PATCH body must be declared JSON, as a POST's.
    let request = chatmem_test::app::request(Method::PATCH, "/v1/users/u/facts/1", axum::body::Body::from("{}"));
    assert_eq!(app.send(request).await.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

/// A store that keeps conversations and no facts.
#[derive(Debug)]
pub(crate) struct NoFacts(pub(crate) InMemoryStore);

#[async_trait::async_trait]
impl Store for NoFacts {
    async fn load(&self, id: &chatmem::ConversationId) -> Result<chatmem::store::Snapshot, chatmem::store::StoreError> {
        self.0.load(id).await
    }
    async fn commit(
        &self,
        id: &chatmem::ConversationId,
        commit: chatmem::store::Commit,
    ) -> Result<u64, chatmem::store::StoreError> {
        self.0.commit(id, commit).await
    }
    async fn history(
        &self,
        id: &chatmem::ConversationId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<chatmem::store::StoredMessage>, chatmem::store::StoreError> {
        self.0.history(id, after, limit).await
    }
    async fn clear(&self, id: &chatmem::ConversationId) -> Result<bool, chatmem::store::StoreError> {
        self.0.clear(id).await
    }
    async fn list(
        &self,
        after: Option<&chatmem::ConversationId>,
        limit: usize,
    ) -> Result<chatmem::Page, chatmem::store::StoreError> {
        self.0.list(after, limit).await
    }
    async fn recent(
        &self,
        query: &chatmem::store::RecentQuery,
    ) -> Result<chatmem::store::RecentPage, chatmem::store::StoreError> {
        self.0.recent(query).await
    }
}

#[tokio::test]
async fn a_store_that_keeps_no_facts_is_answered_clearly() {
    let store: Arc<dyn Store> = Arc::new(NoFacts(InMemoryStore::new()));
    let app = App::new(app(ChatMemory::new(store), ServerConfig::default()));
    let answer = app.get("/v1/users/u/facts").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text());
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("keeps no"))
    );
}

/// `POST /v1/chat/completions` on `conversation` for `user`.
fn completion(conversation: &str, user: Option<&[u8]>, said: &str) -> Request<axum::body::Body> {
    let body = json!({"model": "mock-model", "messages": [{"role": "user", "content": said}]});
    let mut r = json_request(Method::POST, "/v1/chat/completions", &body);
    r.headers_mut().insert(
        "x-chatmem-conversation",
        HeaderValue::from_str(conversation).expect("a header value"),
    );
    if let Some(user) = user {
        r.headers_mut()
            .insert("x-chatmem-user", HeaderValue::from_bytes(user).expect("a header value"));
    }
    r
}

fn door_config(upstream: &MockUpstream) -> ServerConfig {
    ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some(upstream::TEST_KEY.into()),
        }),
        ..ServerConfig::default()
    }
}

/// The texts of the messages a request sent upstream held.
fn sent_texts(request: &Value) -> Vec<String> {
    upstream::roles_and_texts(request).into_iter().map(|(_, t)| t).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_door_sends_a_users_facts_in_their_other_conversations_and_never_a_deleted_one() {
    let upstream = MockUpstream::start(vec![
        text("Noted."),
        text("Try sorbet."),
        text("Try fruit."),
        text("Hi."),
    ])
    .await;
    let app = server(door_config(&upstream));
    let added = app
        .post_json("/v1/users/u42/facts", &json!({"text": "Allergic to nuts"}))
        .await
        .json();
    // Conversation 1, then conversation 2 of the same user: both carry the fact.
    for conversation in ["c1", "c2"] {
        let answer = app.send(completion(conversation, Some(b"u42"), "Dessert ideas?")).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
        let sent = sent_texts(&upstream.last_request());
        assert!(
            sent.contains(&format!("{FACTS_HEADING}\n- Allergic to nuts")),
            "{conversation}: {sent:?}"
        );
    }
    // Another user is not sent it.
    app.send(completion("c3", Some(b"u43"), "Dessert ideas?")).await;
    assert!(
        !sent_texts(&upstream.last_request()).iter().any(|t| t.contains("nuts")),
        "another user's turn"
    );
    // Deleted: never sent again.
    let deleted = app.delete(&format!("/v1/users/u42/facts/{}", added["id"])).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    app.send(completion("c2", Some(b"u42"), "And now?")).await;
    let sent = sent_texts(&upstream.last_request());
    assert!(
        !sent.iter().any(|t| t.contains("nuts") || t.contains(FACTS_HEADING)),
        "{sent:?}"
    );
    // A bad header is 400 naming it, and nothing goes upstream.
    let before = upstream.requests().len();
    let refused = app.send(completion("c2", Some("bad\u{200b}id".as_bytes()), "Hi")).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.json()["error"]["param"], "X-Chatmem-User");
    let refused = app.send(completion("c2", Some(&[0xff, 0xfe]), "Hi")).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.json()["error"]["param"], "X-Chatmem-User");
    assert_eq!(upstream.requests().len(), before);
}

#[tokio::test]
async fn the_rest_turn_routes_take_a_user() {
    let app = server(ServerConfig::default());
    app.post_json("/v1/users/u42/facts", &json!({"text": "Allergic to nuts"}))
        .await;
    let messages = json!([{"role": "user", "content": "Dessert ideas?"}]);
    let prompt = app
        .post_json(
            "/v1/conversations/c1/prompt",
            &json!({"messages": messages, "user": "u42"}),
        )
        .await;
    assert_eq!(prompt.status, StatusCode::OK, "{}", prompt.text());
    assert_eq!(
        prompt.json()["messages"][0]["content"],
        format!("{FACTS_HEADING}\n- Allergic to nuts")
    );
    let without = app
        .post_json("/v1/conversations/c1/prompt", &json!({"messages": messages}))
        .await
        .json();
    assert_eq!(without["messages"].as_array().map(Vec::len), Some(1));
    let written = app
        .post_json(
            "/v1/conversations/c1/messages",
            &json!({"messages": messages, "user": "u42"}),
        )
        .await;
    assert_eq!(written.status, StatusCode::OK);
    // The facts are never stored with the conversation.
    assert_eq!(written.json()["messages"].as_array().map(Vec::len), Some(1));
    let refused = app
        .post_json(
            "/v1/conversations/c1/messages",
            &json!({"messages": messages, "user": ""}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.json()["error"]["param"], "user");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fact_the_facts_model_reads_in_one_conversation_reaches_the_next() {
    let upstream = MockUpstream::answering(Arc::new(|_| text("Sure."))).await;
    // The facts model states the fact of the first message it is shown.
    let model = Arc::new(FactsModel::new(|request| {
        let seq = request.shown_seqs().first().copied().unwrap_or(1);
        Scripted::Answer(format!(
            r#"{{"facts": [{{"text": "Lives in Hamburg", "key": "home.city", "sources": [{seq}]}}]}}"#
        ))
    }));
    let extractor = FactExtractor::from_arc(model.clone(), |f| {
        tokio::spawn(f);
    });
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(4))
        .facts(Facts::new())
        .fact_extractor(extractor)
        .build()
        .expect("valid memory settings");
    let watched = memory.clone();
    let app = App::new(app(memory, door_config(&upstream)));
    // Three turns of conversation 1 (six messages) evict from its window of 4.
    for said in ["I moved to Hamburg.", "What's nice there?", "And in winter?"] {
        let answer = app.send(completion("c1", Some(b"u42"), said)).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    }
    let extractor = watched.fact_extractor().expect("an extractor");
    assert!(extractor.settle(Duration::from_secs(10)).await, "extractions finished");
    assert!(model.calls() >= 1, "the facts model was called");
    let listed = app.get("/v1/users/u42/facts").await.json();
    assert_eq!(listed["facts"][0]["text"], "Lives in Hamburg", "{listed}");
    assert_eq!(listed["facts"][0]["sources"][0]["conversation"], "c1");
    // Conversation 2 is sent it.
    app.send(completion("c2", Some(b"u42"), "Any plans this weekend?"))
        .await;
    let sent = sent_texts(&upstream.last_request());
    assert!(
        sent.contains(&format!("{FACTS_HEADING}\n- Lives in Hamburg")),
        "{sent:?}"
    );
    // And /metrics counts the extraction.
    let metrics = app.get("/metrics").await.text();
    assert!(metrics.contains("chatmem_fact_extractions_total"), "{metrics}");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("chatmem_fact_changes_total{kind=\"added\"} 1")),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|l| l == "chatmem_fact_extractions_running 0"),
        "every extraction landed: {metrics}"
    );
}
