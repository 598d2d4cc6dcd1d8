//! `chatmem recall`: what recall finds for a question among the messages that left a
//! conversation's window, best first, each with what a turn would do with it, as JSON. Reads
//! an existing store; creates nothing and writes nothing.

use std::sync::Arc;

use anyhow::{Context, Result};
use chatmem::recall::{Considered, DEFAULT_MIN_RELEVANCE, DEFAULT_RECALL_MAX_TOKENS, rounded};
use chatmem::{ChatMemory, ConversationId, Message, Store};
use serde::Serialize;

use crate::args::{ConversationArgs, positive};
use crate::recall::{self, min_relevance, recall_k};
use crate::stdio::print_json;
use crate::stores::Access;

/// `chatmem recall`: the conversation, the question and the recall settings to judge it by.
#[derive(clap::Args, Debug)]
pub(crate) struct RecallCommand {
    #[command(flatten)]
    target: ConversationArgs,
    /// At most K messages are recalled (1 to 100), as with `chat --recall K`; every message
    /// the search finds is printed, those past K as `past_k`.
    #[arg(long, value_name = "K", value_parser = recall_k, allow_negative_numbers = true)]
    k: usize,
    /// The least relevance (0 to 1) a message must have to be recalled.
    #[arg(long, value_name = "X", value_parser = min_relevance, allow_negative_numbers = true, default_value_t = DEFAULT_MIN_RELEVANCE)]
    recall_min_relevance: f64,
    /// The most tokens recalled messages take.
    #[arg(long, value_name = "N", value_parser = positive, default_value_t = DEFAULT_RECALL_MAX_TOKENS)]
    recall_max_tokens: usize,
    /// With embeddings, the least cosine similarity (-1 to 1) a message found by its vector
    /// must have to be recalled.
    #[arg(long, value_name = "X", requires = "embedding_base_url", value_parser = crate::recall::min_similarity, allow_negative_numbers = true, default_value_t = chatmem::recall::DEFAULT_MIN_SIMILARITY)]
    recall_min_similarity: f64,
    #[command(flatten)]
    embedding: crate::recall::EmbeddingArgs,
    /// The question, as a user would ask it (several words are joined with spaces).
    #[arg(value_name = "QUERY", required = true, num_args = 1..)]
    query: Vec<String>,
}

/// What `chatmem recall` prints.
#[derive(Debug, Serialize)]
struct Hits {
    /// Every message the search found, best first.
    hits: Vec<Hit>,
}

/// One message the search found, as the REST API's `GET …/recall` writes it.
#[derive(Debug, Serialize)]
struct Hit {
    seq: u64,
    role: &'static str,
    /// Its text; null when it has none (an assistant's tool calls alone).
    content: Option<String>,
    /// The whole message, as `history` prints it.
    message: Arc<Message>,
    /// BM25, rounded as stores order by it.
    score: f64,
    relevance: f64,
    /// Its place by words, from 1; null when only its vector found it.
    lexical_rank: Option<usize>,
    /// Its place by vector, from 1; null without embeddings or when its vector was not found.
    vector_rank: Option<usize>,
    /// Its vector's cosine similarity with the question's (null as `vector_rank`).
    similarity: Option<f64>,
    /// Its reciprocal-rank-fusion score, what orders the hits.
    fused: f64,
    /// When its commit landed, RFC 3339; null when the store did not record it.
    at: Option<String>,
    outcome: &'static str,
}

/// Runs `chatmem recall`.
pub(crate) async fn run(command: RecallCommand) -> Result<()> {
    let settings = recall::settings(command.k, command.recall_min_relevance, command.recall_max_tokens)?;
    let settings = settings.min_similarity(command.recall_min_similarity)?;
    let (memory, id) = command.target.memory(Access::Read).await?;
    let memory = memory.with_recall(Some(settings));
    let memory = match command.embedding.embeddings()? {
        Some(embeddings) => {
            recall::check_vectors(memory.store().as_ref())?;
            embeddings.calibrate().await.context("the embedding model")?;
            memory.with_embeddings(Some(embeddings))
        }
        None => memory,
    };
    print_json(&hits(&memory, &id, &command.query.join(" "), command.k).await?)
}

/// What recall finds for `query` in conversation `id`: nothing for a conversation that does
/// not exist (as `history` prints nothing for it).
async fn hits(memory: &ChatMemory<Arc<dyn Store>>, id: &ConversationId, query: &str, k: usize) -> Result<Hits> {
    recall::check_store(memory.store().as_ref(), "recall")?;
    let found = memory.recall(id, query, k).await?.unwrap_or_default();
    Ok(Hits {
        hits: found.considered.iter().map(hit).collect(),
    })
}

fn hit(c: &Considered) -> Hit {
    Hit {
        seq: c.seq,
        role: c.message.role().as_str(),
        content: c.message.text().map(|t| t.into_owned()),
        message: Arc::clone(&c.message),
        score: rounded(c.score),
        relevance: c.relevance,
        lexical_rank: (c.lexical_rank > 0).then_some(c.lexical_rank),
        vector_rank: c.vector_rank,
        similarity: c.similarity,
        fused: rounded(c.fused),
        at: u64::try_from(c.at_micros).ok().filter(|&m| m > 0).map(|micros| {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros);
            humantime::format_rfc3339_micros(at).to_string()
        }),
        outcome: c.outcome.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use chatmem::{InMemoryStore, Recall, WindowPolicy};
    use serde_json::Value;

    use super::*;

    const ORDER: &str = "我的订单是 LC202610060018，还没发货。";

    /// A 2-message window over the order turn and a filler turn: the order turn has left it.
    async fn memory() -> (ChatMemory<Arc<dyn Store>>, ConversationId) {
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        let memory = ChatMemory::builder(store)
            .policy(WindowPolicy::messages(2))
            .recall(Recall::new(3).expect("k"))
            .build()
            .expect("memory");
        let id = ConversationId::new("c1").expect("id");
        for (user, answer) in [(ORDER, "已为您催促发货。"), ("谢谢", "不客气")] {
            memory
                .add(&id, [Message::user(user), Message::assistant(answer)])
                .await
                .expect("add");
        }
        (memory, id)
    }

    fn json(hits: &Hits) -> Value {
        serde_json::to_value(hits).expect("JSON")
    }

    #[tokio::test]
    async fn the_order_message_is_the_hit_with_its_rank_outcome_and_time() {
        let (memory, id) = memory().await;
        let found = json(&hits(&memory, &id, "LC202610060018 能退吗？", 3).await.expect("hits"));
        let hits = found["hits"].as_array().expect("hits");
        assert_eq!(hits.len(), 1, "{found}");
        let hit = &hits[0];
        assert_eq!((hit["seq"].as_u64(), hit["role"].as_str()), (Some(1), Some("user")));
        assert_eq!(hit["content"], ORDER);
        assert_eq!(hit["message"], serde_json::json!({"role": "user", "content": ORDER}));
        assert_eq!(
            (hit["lexical_rank"].as_u64(), hit["outcome"].as_str()),
            (Some(1), Some("injected"))
        );
        assert!(hit["score"].as_f64().is_some_and(|s| s > 0.0), "{hit}");
        assert!(
            hit["relevance"]
                .as_f64()
                .is_some_and(|r| (DEFAULT_MIN_RELEVANCE..=1.0).contains(&r)),
            "{hit}"
        );
        let at = hit["at"].as_str().expect("a time");
        assert!(humantime::parse_rfc3339(at).is_ok(), "{at}");
        let mut keys: Vec<&str> = hit.as_object().expect("object").keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "at",
                "content",
                "fused",
                "lexical_rank",
                "message",
                "outcome",
                "relevance",
                "role",
                "score",
                "seq",
                "similarity",
                "vector_rank"
            ]
        );
    }

    #[tokio::test]
    async fn the_floor_and_k_decide_the_outcome_and_nothing_is_found_in_the_window_or_nowhere() {
        let (memory, id) = memory().await;
        let strict = memory
            .clone()
            .with_recall(Some(recall::settings(3, 1.0, 1000).expect("valid")));
        let found = json(&hits(&strict, &id, "LC202610060018 能退吗？", 3).await.expect("hits"));
        assert_eq!(found["hits"][0]["outcome"], "below_threshold", "{found}");
        // The window's messages are not searched: they are in the prompt already.
        let found = json(&hits(&memory, &id, "谢谢", 3).await.expect("hits"));
        assert_eq!(found, serde_json::json!({"hits": []}));
        let nobody = ConversationId::new("nobody").expect("id");
        let found = json(&hits(&memory, &nobody, "LC202610060018", 3).await.expect("hits"));
        assert_eq!(found, serde_json::json!({"hits": []}));
    }

    #[tokio::test]
    async fn a_store_that_does_not_search_is_refused_in_one_line() {
        let memory = ChatMemory::new(Arc::new(chatmem_test::failing::FailingStore::blind()) as Arc<dyn Store>);
        let id = ConversationId::new("c1").expect("id");
        let e = hits(&memory, &id, "LC202610060018", 3).await.expect_err("refused");
        assert_eq!(
            e.to_string(),
            "recall needs a store that indexes and searches its messages, and this store does not"
        );
    }
}
