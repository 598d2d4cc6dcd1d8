//! `--summarize`: what leaves the window lives on as a summary (for `chat` and `serve`).

use std::time::Duration;

use anyhow::{Result, bail};
use chatmem::{DEFAULT_SUMMARY_MAX_TOKENS, Summarizer};
use chatmem_openai::OpenAiModel;

/// Summary flags shared by the commands that call a model.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SummaryArgs {
    /// Summarize messages that leave the window: the model sees the summary after the system
    /// message, and an evicted message is deleted only once summarized. One extra model call
    /// on a turn that evicts (with --evict-to, once per eviction).
    #[arg(long)]
    summarize: bool,
    /// The model that writes summaries, on the same endpoint (default: the chat model; `serve`
    /// needs it, since its requests name their own model).
    #[arg(long, value_name = "M", requires = "summarize")]
    summary_model: Option<String>,
    /// The longest summary, in tokens.
    #[arg(long, value_name = "N", requires = "summarize", value_parser = positive_u32)]
    summary_max_tokens: Option<u32>,
    /// How long a turn waits for its summary (`0s`: never). A slower summary goes on and
    /// lands in a later turn's commit, so a slow summary model delays a turn by at most this.
    #[arg(long, value_name = "DURATION", requires = "summarize", default_value = "2s", value_parser = parse_wait)]
    summary_wait: Duration,
}

/// A duration, zero allowed (`0s`: a turn never waits for its summary).
pub(crate) fn parse_wait(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 0s, 500ms, 2s)"))
}

fn positive_u32(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number from 1 to {}", u32::MAX)),
    }
}

impl SummaryArgs {
    /// The summarizer the flags ask for, its model made by `model` from the summary model's
    /// name (`None`: the caller's default model); `None` without `--summarize`.
    pub(crate) fn summarizer(
        &self,
        model: impl FnOnce(Option<&str>) -> Result<OpenAiModel>,
    ) -> Result<Option<Summarizer>> {
        if !self.summarize {
            return Ok(None);
        }
        let model = model(self.summary_model.as_deref())?;
        let max = self.summary_max_tokens.unwrap_or(DEFAULT_SUMMARY_MAX_TOKENS);
        let summarizer = Summarizer::new(model).max_tokens(max).wait(self.summary_wait);
        // Late summaries finish on the runtime every command runs in.
        Ok(Some(summarizer.spawn_with(|call| {
            tokio::spawn(call);
        })))
    }

    /// The summary model's name, required (for `serve`).
    pub(crate) fn required_model(&self) -> Result<Option<&str>> {
        match (self.summarize, self.summary_model.as_deref()) {
            (false, _) => Ok(None),
            (true, Some(m)) => Ok(Some(m)),
            (true, None) => {
                bail!("--summary-model is required with --summarize for serve (requests name their own model)")
            }
        }
    }
}
