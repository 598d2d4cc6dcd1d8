//! Facts read by a model off the turn's path: what a commit that evicts shows the model (the
//! evicted messages, numbered), what lands in the user's facts, what is discarded and counted,
//! and that no model — hung, failing or garbled — holds or fails a turn.

use std::sync::Arc;
use std::time::Duration;

use chatmem::facts::{FACTS_EXTRACTION_PROMPT, FactExtractor, Facts};
use chatmem::{ChatMemory, ConversationId, Error, InMemoryStore, Message, ModelErrorKind, Store, UserId, WindowPolicy};
use chatmem_test::{FactsModel, FactsRequest, Scripted};

/// The store is shared: the extractor's background commits go to it too.
type Memory = ChatMemory<Arc<InMemoryStore>>;

fn id(s: &str) -> ConversationId {
    ConversationId::new(s).expect("a valid id")
}

fn user(s: &str) -> UserId {
    UserId::new(s).expect("a valid user")
}

/// A memory of 4 messages that evicts down to 2, with facts, whose extractor calls `model` on
/// tokio within `timeout`; `every` turns without eviction read the recent messages.
fn memory(model: &Arc<FactsModel>, timeout: Duration, every: u32) -> Memory {
    let extractor = FactExtractor::from_arc(Arc::clone(model) as Arc<dyn chatmem::ChatModel>, |f| {
        tokio::spawn(f);
    })
    .timeout(timeout);
    ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(4).evict_to(2).expect("a valid policy"))
        .facts(Facts::new().extract_every(every).expect("valid facts"))
        .fact_extractor(extractor)
        .build()
        .expect("a memory")
}

/// One turn of `who` in `c`: `said` and an answer, committed within 5 s (a turn never waits
/// for an extraction).
async fn turn(m: &Memory, c: &ConversationId, who: &UserId, said: &str) {
    let mut turn = m.begin_as(c, who).await.expect("begin");
    turn.push(Message::user(said));
    turn.push(Message::assistant(format!("noted: {said}")));
    tokio::time::timeout(Duration::from_secs(5), turn.commit())
        .await
        .expect("the commit never waits for the facts model")
        .expect("commit");
}

async fn settle(m: &Memory) {
    let extractor = m.fact_extractor().expect("an extractor");
    assert!(extractor.settle(Duration::from_secs(10)).await, "extractions finished");
}

/// The stored sequence numbers of `c`'s messages, oldest first.
async fn seqs(m: &Memory, c: &ConversationId) -> Vec<u64> {
    let stored = m.store().history(c, 0, 1_000).await.expect("history");
    stored.iter().map(|s| s.seq).collect()
}

fn texts(m: &chatmem::store::StoredFacts) -> Vec<&str> {
    m.set.facts().iter().map(|f| f.text.as_str()).collect()
}

fn answer(text: &str, key: Option<&str>, sources: &[u64]) -> Scripted {
    let key = key.map_or("null".to_owned(), |k| format!("\"{k}\""));
    let sources: Vec<String> = sources.iter().map(u64::to_string).collect();
    Scripted::Answer(format!(
        r#"{{"facts": [{{"text": "{text}", "key": {key}, "sources": [{}]}}]}}"#,
        sources.join(", ")
    ))
}

/// The first seq shown in a request (the scripts name it as a source).
fn first_shown(r: &FactsRequest) -> u64 {
    r.shown_seqs().first().copied().unwrap_or(0)
}

#[tokio::test]
async fn an_eviction_shows_exactly_the_evicted_messages_and_its_facts_land() {
    let model = Arc::new(FactsModel::new(|r| {
        let first = first_shown(r);
        if r.input.contains("I live in Berlin") {
            answer("Lives in Berlin", Some("home.city"), &[first])
        } else {
            answer("Lives in Hamburg", Some("home.city"), &[first])
        }
    }));
    let m = memory(&model, Duration::from_secs(5), 100);
    let (c, u) = (id("c1"), user("u1"));
    turn(&m, &c, &u, "I live in Berlin").await;
    turn(&m, &c, &u, "what is the weather?").await;
    settle(&m).await;
    assert_eq!(model.calls(), 0, "nothing left the window yet");
    let before = seqs(&m, &c).await;
    assert_eq!(before.len(), 4);

    turn(&m, &c, &u, "thanks").await; // 6 messages: the window moves down to 2
    settle(&m).await;
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "one call for the eviction block");
    let r = &requests[0];
    assert_eq!(r.system, FACTS_EXTRACTION_PROMPT);
    assert!(r.json_object, "the request asks for one JSON object");
    assert_eq!(r.shown_seqs(), before, "exactly the evicted messages");
    let expected = format!(
        "Known facts about the user:\n(none)\n\nMessages:\n#{} user: I live in Berlin\n#{} assistant: noted: I live in Berlin\n\
         #{} user: what is the weather?\n#{} assistant: noted: what is the weather?",
        before[0], before[1], before[2], before[3]
    );
    assert_eq!(r.input, expected);

    let facts = m.facts(&u).await.expect("facts");
    assert_eq!(texts(&facts), ["Lives in Berlin"]);
    let berlin = facts.set.facts()[0].clone();
    assert_eq!(berlin.sources.len(), 1);
    assert_eq!(
        (berlin.sources[0].conversation.as_str(), berlin.sources[0].seq),
        ("c1", before[0])
    );
    let stats = m.fact_extractor().expect("an extractor").stats();
    assert_eq!(
        (stats.calls, stats.added, stats.failures, stats.discarded_total()),
        (1, 1, 0, 0)
    );

    // The next block: a new value under the key supersedes the old, kept in its history; the
    // model was shown the known fact with its key.
    turn(&m, &c, &u, "I moved to Hamburg").await;
    settle(&m).await;
    assert_eq!(model.calls(), 1, "no eviction, no call");
    turn(&m, &c, &u, "ok").await;
    settle(&m).await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one call per eviction block");
    assert!(
        requests[1]
            .input
            .starts_with("Known facts about the user:\n- Lives in Berlin (key: home.city)\n\nMessages:\n"),
        "{}",
        requests[1].input
    );
    let shown = requests[1].shown_seqs();
    assert_eq!(shown.len(), 4);
    assert!(shown[0] > before[3], "only the messages that left since: {shown:?}");
    let facts = m.facts(&u).await.expect("facts");
    assert_eq!(texts(&facts), ["Lives in Hamburg"]);
    let history = m.fact_history(&u, berlin.id).await.expect("history");
    assert_eq!(
        history.iter().map(|c| c.kind.as_str()).collect::<Vec<_>>(),
        ["added", "superseded"]
    );
    let stats = m.fact_extractor().expect("an extractor").stats();
    assert_eq!((stats.calls, stats.added, stats.superseded), (2, 2, 1));
}

#[tokio::test]
async fn sources_outside_what_was_shown_discard_the_answer_whole() {
    // The first fact is fine; the second names message 999, never shown.
    let model = Arc::new(FactsModel::new(|r| {
        let first = first_shown(r);
        Scripted::Answer(format!(
            r#"{{"facts": [{{"text": "Allergic to nuts", "key": null, "sources": [{first}]}},
                {{"text": "Lives in Rome", "key": "home.city", "sources": [999]}}]}}"#
        ))
    }));
    let m = memory(&model, Duration::from_secs(5), 100);
    let (c, u) = (id("c1"), user("u1"));
    for said in ["a", "b", "c"] {
        turn(&m, &c, &u, said).await;
    }
    settle(&m).await;
    assert_eq!(model.calls(), 1);
    let facts = m.facts(&u).await.expect("facts");
    assert_eq!((facts.version, facts.set.facts().len()), (0, 0), "nothing applied");
    let stats = m.fact_extractor().expect("an extractor").stats();
    assert_eq!(stats.discarded.get("source_not_shown"), Some(&1));
    assert_eq!((stats.discarded_total(), stats.added), (1, 0));
}

#[tokio::test]
async fn malformed_answers_are_discarded_and_counted_by_code() {
    let model = Arc::new(FactsModel::answering("Sure! The user lives in Berlin."));
    let m = memory(&model, Duration::from_secs(5), 100);
    let (c, u) = (id("c1"), user("u1"));
    for said in ["a", "b", "c", "d", "e"] {
        turn(&m, &c, &u, said).await;
    }
    settle(&m).await;
    assert_eq!(model.calls(), 2, "two eviction blocks");
    let facts = m.facts(&u).await.expect("facts");
    assert_eq!(facts.version, 0, "nothing applied");
    let stats = m.fact_extractor().expect("an extractor").stats();
    assert_eq!(stats.discarded.get("shape"), Some(&2));
    assert_eq!((stats.calls, stats.failures, stats.added), (2, 0, 0));
}

#[tokio::test]
async fn every_message_is_read_once_when_read_before_it_leaves_the_window() {
    let model = Arc::new(FactsModel::new(|_| Scripted::Answer(r#"{"facts": []}"#.into())));
    let m = memory(&model, Duration::from_secs(5), 2);
    let (c, u) = (id("c1"), user("u1"));
    turn(&m, &c, &u, "one").await;
    turn(&m, &c, &u, "two").await; // the 2nd turn: the window's 4 messages are read
    settle(&m).await;
    assert_eq!(model.calls(), 1);
    turn(&m, &c, &u, "three").await; // evicts the 4 already read: no call
    settle(&m).await;
    assert_eq!(model.calls(), 1, "what left the window was read already");
    turn(&m, &c, &u, "four").await; // 2 turns since: the 4 messages not read yet
    turn(&m, &c, &u, "five").await; // evicts "three" and "four", read; no call
    settle(&m).await;
    let shown: Vec<u64> = model.requests().iter().flat_map(FactsRequest::shown_seqs).collect();
    let mut once = shown.clone();
    once.dedup();
    assert_eq!(shown, once, "no message shown twice: {shown:?}");
    assert_eq!(
        shown,
        (1..=8).collect::<Vec<u64>>(),
        "every message of the first four turns, once"
    );
    assert_eq!(model.calls(), 2);
}

#[tokio::test]
async fn a_hung_or_failing_model_holds_and_fails_no_turn() {
    let model = Arc::new(FactsModel::new(|r| {
        if r.input.contains("hang") {
            Scripted::Hang
        } else if r.input.contains("fail") {
            Scripted::Fail(ModelErrorKind::Server)
        } else {
            answer("Prefers email", None, &[first_shown(r)])
        }
    }));
    let m = memory(&model, Duration::from_millis(200), 100);
    let (c, u) = (id("c1"), user("u1"));
    // The first eviction's call never answers: every turn still commits within its bound
    // (`turn` times out at 5 s, far below the extractor's wait of forever).
    for said in ["hang", "b", "c"] {
        turn(&m, &c, &u, said).await;
    }
    let hung = m.fact_extractor().expect("an extractor").stats();
    assert_eq!(hung.running, 1, "the extraction of the first eviction is running");
    turn(&m, &c, &u, "fail").await;
    turn(&m, &c, &u, "e").await; // evicts "c" and "fail": the call fails
    settle(&m).await;
    let stats = m.fact_extractor().expect("an extractor").stats();
    assert_eq!(
        (stats.calls, stats.failures, stats.running),
        (2, 2, 0),
        "a timeout and an error, counted"
    );
    assert_eq!(m.facts(&u).await.expect("facts").version, 0);
    // The model is back: the next block lands.
    turn(&m, &c, &u, "f").await;
    turn(&m, &c, &u, "g").await;
    settle(&m).await;
    assert_eq!(texts(&m.facts(&u).await.expect("facts")), ["Prefers email"]);
    let window = m.get(&c).await.expect("the conversation");
    assert_eq!(window.last().and_then(|m| m.text()).as_deref(), Some("noted: g"));
}

/// A facts model whose calls wait for each other (`n` at a time) before `inner` answers.
#[derive(Debug)]
struct Together {
    barrier: tokio::sync::Barrier,
    inner: FactsModel,
}

#[async_trait::async_trait]
impl chatmem::ChatModel for Together {
    async fn complete(&self, request: chatmem::ChatRequest<'_>) -> Result<chatmem::ChatResponse, chatmem::ModelError> {
        self.barrier.wait().await;
        self.inner.complete(request).await
    }
}

#[tokio::test]
async fn two_conversations_of_one_user_extracting_at_once_lose_no_fact() {
    // Both calls wait for each other, so both extractions have loaded the facts (for their
    // prompts) before either commits: each must commit on the facts as they are then.
    let model = Arc::new(Together {
        barrier: tokio::sync::Barrier::new(2),
        inner: FactsModel::new(|r| {
            let first = first_shown(r);
            if r.input.contains("my dog") {
                answer("Has a dog named Rex", Some("pet.dog"), &[first])
            } else {
                answer("Allergic to nuts", None, &[first])
            }
        }),
    });
    let extractor = FactExtractor::from_arc(Arc::clone(&model) as Arc<dyn chatmem::ChatModel>, |f| {
        tokio::spawn(f);
    });
    let m = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(4).evict_to(2).expect("a valid policy"))
        .facts(Facts::new())
        .fact_extractor(extractor)
        .build()
        .expect("a memory");
    let (a, b, u) = (id("a"), id("b"), user("u1"));
    for said in ["my dog is Rex", "x", "z"] {
        turn(&m, &a, &u, said).await;
    }
    for said in ["I am allergic to nuts", "y", "w"] {
        turn(&m, &b, &u, said).await;
    }
    settle(&m).await;
    assert_eq!(model.inner.calls(), 2);
    let facts = m.facts(&u).await.expect("facts");
    let mut got = texts(&facts);
    got.sort_unstable();
    assert_eq!(got, ["Allergic to nuts", "Has a dog named Rex"], "both facts kept");
    let conversations: Vec<&str> = facts
        .set
        .facts()
        .iter()
        .map(|f| f.sources[0].conversation.as_str())
        .collect();
    assert!(
        conversations.contains(&"a") && conversations.contains(&"b"),
        "{conversations:?}"
    );
    let stats = m.fact_extractor().expect("an extractor").stats();
    assert_eq!((stats.added, stats.store_failures), (2, 0));
}

#[tokio::test]
async fn without_an_eviction_the_recent_messages_are_read_every_n_turns() {
    let model = Arc::new(FactsModel::answering(r#"{"facts": []}"#));
    let extractor = FactExtractor::from_arc(Arc::clone(&model) as Arc<dyn chatmem::ChatModel>, |f| {
        tokio::spawn(f);
    });
    let m = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(100))
        .facts(Facts::new().extract_every(2).expect("valid facts"))
        .fact_extractor(extractor)
        .build()
        .expect("a memory");
    let (c, u) = (id("c1"), user("u1"));
    turn(&m, &c, &u, "one").await;
    settle(&m).await;
    assert_eq!(model.calls(), 0);
    turn(&m, &c, &u, "two").await;
    settle(&m).await;
    let all = seqs(&m, &c).await;
    assert_eq!(model.requests()[0].shown_seqs(), all, "the window so far");
    // A turn without a user is not counted nor read.
    m.add(&c, [Message::user("anonymous")]).await.expect("add");
    turn(&m, &c, &u, "three").await;
    settle(&m).await;
    assert_eq!(model.calls(), 1);
    turn(&m, &c, &u, "four").await;
    settle(&m).await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let shown = requests[1].shown_seqs();
    let now = seqs(&m, &c).await;
    assert_eq!(shown, now[all.len()..], "only what was not read yet");
    assert!(requests[1].input.contains("user: anonymous"));
}

#[tokio::test]
async fn an_extractor_needs_facts() {
    let extractor = FactExtractor::new(FactsModel::answering("{}"), drop);
    let e = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .fact_extractor(extractor.clone())
        .build()
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidConfig(s) if s.contains("turn facts on")),
        "{e}"
    );
    let e = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .facts(Facts::new())
        .fact_extractor(extractor.timeout(Duration::ZERO))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("timeout"), "{e}");
}
