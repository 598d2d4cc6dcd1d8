//! Embeddings for recall through `ChatMemory` over the in-memory store: vectors land after
//! the commit, off the turn; a question that shares no word with what it needs finds it by
//! vector; a model that hangs, fails or answers garbage changes no turn and is tried again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chatmem::recall::RECALL_HEADING;
use chatmem::{
    ChatMemory, ConversationId, EmbeddingEvent, Embeddings, InMemoryStore, Message, ModelErrorKind, Recall, Store,
    WindowPolicy,
};
use chatmem_test::embedders::{Behaviour, EMBEDDING_DIM, ScriptedEmbedder};

type Events = Arc<Mutex<Vec<EmbeddingEvent>>>;

/// The similarity floor on the toy model's scale: the order's exchange scores 0.164 for
/// "那单能退吗？" (they share 单), the small talk at most 0.153.
const SIMILAR: f64 = 0.16;

fn memory(embedder: Arc<ScriptedEmbedder>, events: &Events) -> (ChatMemory<Arc<InMemoryStore>>, Arc<InMemoryStore>) {
    let store = Arc::new(InMemoryStore::new());
    let seen = Arc::clone(events);
    let embeddings = Embeddings::shared(embedder, |f| {
        tokio::spawn(f);
    })
    .query_wait(Duration::from_millis(100))
    .timeout(Duration::from_millis(300))
    .observe(move |e| seen.lock().unwrap().push(e));
    let memory = ChatMemory::builder(Arc::clone(&store))
        .policy(WindowPolicy::messages(2))
        .recall(Recall::new(3).unwrap().min_similarity(SIMILAR).unwrap())
        .embeddings(embeddings)
        .build()
        .expect("a memory");
    (memory, store)
}

/// The seed conversation (the order said first, then small talk that pushes it out of a
/// window of 2), a commit per exchange.
async fn seed(memory: &ChatMemory<Arc<InMemoryStore>>, id: &ConversationId) {
    let exchanges = [
        vec![
            Message::system("你是邻里仓售后。"),
            Message::user("我的订单是 LC202610060018，还没发货。"),
            Message::assistant("已为您催促仓库尽快发货。"),
        ],
        vec![Message::user("好的谢谢"), Message::assistant("不客气")],
        vec![Message::user("天气不错"), Message::assistant("是的")],
    ];
    for exchange in exchanges {
        let started = Instant::now();
        memory.add(id, exchange).await.expect("seeded");
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "a commit never waits for embeddings"
        );
    }
}

/// Waits until every indexed message of `id` has a vector (at most 5 s).
async fn embedded(store: &InMemoryStore, id: &ConversationId) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let missing = store.unembedded(id, "chars", EMBEDDING_DIM, 0, 100).await.unwrap();
        if missing.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "still unembedded: {:?}", missing.len());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_question_sharing_no_word_with_the_order_finds_it_by_vector() {
    let events = Events::default();
    let embedder = Arc::new(ScriptedEmbedder::new("chars"));
    let (memory, store) = memory(Arc::clone(&embedder), &events);
    memory.embeddings().unwrap().calibrate().await.expect("calibrated");
    let id = ConversationId::new("seed").unwrap();
    seed(&memory, &id).await;
    embedded(&store, &id).await;

    let mut turn = memory.begin(&id).await.unwrap();
    turn.push(Message::user("那单能退吗？"));
    let recalled = turn.recall().await.unwrap().clone();
    let order = recalled
        .considered
        .iter()
        .find(|c| c.seq == 1)
        .expect("the order message is considered");
    assert_eq!(order.lexical_rank, 0, "no word is shared");
    assert!(order.similarity.is_some() && order.vector_rank.is_some(), "{order:?}");
    assert!(recalled.injected().any(|c| c.seq == 1), "{:?}", recalled.considered);
    let prompt: Vec<String> = turn
        .prompt()
        .iter()
        .map(|m| m.text().unwrap_or_default().into_owned())
        .collect();
    let recall_message = prompt.iter().find(|t| t.starts_with(RECALL_HEADING)).expect("recalled");
    assert!(recall_message.contains("LC202610060018"), "{recall_message}");
    assert_eq!(prompt.last().map(String::as_str), Some("那单能退吗？"));
    assert!(events.lock().unwrap().contains(&EmbeddingEvent::Query));
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, EmbeddingEvent::Stored { kept } if *kept > 0))
    );

    // The question's own exchange is embedded once the turn commits.
    turn.push(Message::assistant("可以退。"));
    turn.commit().await.unwrap();
    embedded(&store, &id).await;
}

#[tokio::test]
async fn a_hung_embedding_model_changes_no_turn() {
    let events = Events::default();
    let embedder = Arc::new(ScriptedEmbedder::new("chars"));
    embedder.set(Behaviour::Hang);
    let (memory, store) = memory(Arc::clone(&embedder), &events);
    let id = ConversationId::new("seed").unwrap();
    seed(&memory, &id).await;
    for question in ["LC202610060018 能退吗？", "那单能退吗？"] {
        let started = Instant::now();
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user(question));
        let recalled = turn.recall().await.unwrap().clone();
        turn.push(Message::assistant("好的"));
        turn.commit().await.unwrap();
        // The question waited at most the query wait (100 ms) for its vector.
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "{:?}",
            started.elapsed()
        );
        // By words, as without embeddings.
        let lexical = recalled.considered.iter().all(|c| c.similarity.is_none());
        assert!(lexical, "{question}: {:?}", recalled.considered);
        if question.starts_with("LC") {
            assert_eq!(recalled.injected().map(|c| c.seq).collect::<Vec<_>>(), [1]);
        }
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let events = events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| matches!(e, EmbeddingEvent::QueryMissed(_))),
        "{events:?}"
    );
    assert!(
        events.contains(&EmbeddingEvent::Failed(ModelErrorKind::Timeout)),
        "background calls time out: {events:?}"
    );
    assert_eq!(memory.history(&id).await.unwrap().len(), 11, "every turn stored");
    assert!(
        !store
            .unembedded(&id, "chars", EMBEDDING_DIM, 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn failed_and_garbled_embeddings_are_tried_again_with_the_next_commit() {
    let events = Events::default();
    let embedder = Arc::new(ScriptedEmbedder::new("chars"));
    let (memory, store) = memory(Arc::clone(&embedder), &events);
    memory.embeddings().unwrap().calibrate().await.expect("calibrated");
    let id = ConversationId::new("retry").unwrap();
    for (behaviour, kind) in [
        (Behaviour::Garbage, ModelErrorKind::Protocol),
        (Behaviour::Fail, ModelErrorKind::Unavailable),
    ] {
        embedder.set(behaviour);
        memory
            .add(&id, [Message::user("第一句"), Message::assistant("好")])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            events.lock().unwrap().contains(&EmbeddingEvent::Failed(kind)),
            "{behaviour:?}"
        );
        assert!(memory.embeddings().unwrap().pending() > 0);
    }
    embedder.set(Behaviour::Characters);
    memory
        .add(&id, [Message::user("第三句"), Message::assistant("好")])
        .await
        .unwrap();
    embedded(&store, &id).await;
    assert_eq!(memory.embeddings().unwrap().pending(), 0);
}

#[test]
fn embeddings_need_recall_and_a_store_that_keeps_vectors() {
    let embeddings = Embeddings::new(ScriptedEmbedder::new("chars"), drop);
    let e = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .embeddings(embeddings)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("recall"), "{e}");
}
