//! Which of a search's hits are recalled into a prompt, and how they are written: a pure
//! function of the hits, the [`Recall`] settings, the token budget and the counter.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::counter::TokenCounter;
use crate::message::{Message, Role};

use super::search::{SearchResult, bm25, relevance, rounded};
use super::spec::Recall;

/// Reciprocal rank fusion's constant: a message's fused score is Σ 1 / (`RRF_K` + rank) over
/// the rankings that found it (by words, by vector). 60 is the value of the method's paper
/// (Cormack et al., 2009) and what Elasticsearch and others use.
pub const RRF_K: f64 = 60.0;

/// The first line of the message recalled messages are sent in: fixed, so a model (and a
/// reader of the prompt) can tell recalled text from what is being said now.
pub const RECALL_HEADING: &str = "Recalled from earlier in this conversation (oldest first):";

/// What became of a message a search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Recalled into the prompt.
    Injected,
    /// Less relevant than the [floor](Recall::relevance_floor).
    BelowThreshold,
    /// Relevant, but `k` more relevant messages were recalled.
    PastK,
    /// Relevant, but it did not fit in the token budget.
    OverBudget,
    /// A tool result whose call was not found with it: a result comes with its call or not
    /// at all.
    WithoutItsCall,
}

impl Outcome {
    /// The outcome as the REST API and the inspector name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Injected => "injected",
            Outcome::BelowThreshold => "below_threshold",
            Outcome::PastK => "past_k",
            Outcome::OverBudget => "over_budget",
            Outcome::WithoutItsCall => "without_its_call",
        }
    }
}

/// A message a search found, ranked, with what became of it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Considered {
    /// Its sequence number.
    pub seq: u64,
    /// The message.
    pub message: Arc<Message>,
    /// When the commit that wrote it landed, in Unix microseconds.
    pub at_micros: i64,
    /// Its place among the hits by lexical score, from 1; 0 when the words did not find it
    /// (only its vector did).
    pub lexical_rank: usize,
    /// Its BM25 score (0 when the words did not find it).
    pub score: f64,
    /// Its [relevance](super::relevance), what the relevance floor applies to.
    pub relevance: f64,
    /// Its place among the hits by vector, from 1, when its vector was found.
    pub vector_rank: Option<usize>,
    /// Its vector's cosine similarity with the question's, when found by vector: what the
    /// [similarity floor](Recall::similarity_floor) applies to.
    pub similarity: Option<f64>,
    /// Its reciprocal-rank-fusion score over both rankings ([`RRF_K`]): what orders the hits.
    pub fused: f64,
    /// What became of it.
    pub outcome: Outcome,
}

/// What recall adds to one model call: the messages it considered, best first, and the one
/// message the recalled ones are sent in (`None`: nothing recalled, the prompt is as without
/// recall).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recalled {
    /// Every hit, best first, with its outcome.
    pub considered: Vec<Considered>,
    /// The recalled messages under [`RECALL_HEADING`], oldest first, as one user message.
    pub message: Option<Message>,
    /// The tokens of [`message`](Recalled::message) by the memory's counter (0 without one).
    pub tokens: usize,
    /// Whether the store was searched (recall is on and the user message has words to
    /// search for).
    pub searched: bool,
}

impl Recalled {
    /// The recalled messages, oldest first.
    pub fn injected(&self) -> impl Iterator<Item = &Considered> + '_ {
        let mut injected: Vec<&Considered> = self
            .considered
            .iter()
            .filter(|c| c.outcome == Outcome::Injected)
            .collect();
        injected.sort_by_key(|c| c.seq);
        injected.into_iter()
    }
}

/// Chooses what to recall from `found`: the hits by words and by vector, ranked by their
/// fused score (a vector counts only at or above the similarity floor; ties: the newer first;
/// with no vector hits that is the lexical order); those
/// at least as relevant as the relevance floor or as similar as the similarity floor, up to
/// `k`, each tool result with its call (found among the eligible hits) or not at all; each
/// while it fits in `budget` tokens (counted by `counter` as it is written, the heading
/// included); written oldest first.
pub fn choose(found: &SearchResult, recall: &Recall, budget: usize, counter: &dyn TokenCounter) -> Recalled {
    let terms = found.df.len();
    let mut considered: Vec<Considered> = found
        .hits
        .iter()
        .map(|hit| {
            let score = bm25(found.docs, found.total_len, &found.df, hit.len, &hit.tf);
            Considered {
                seq: hit.message.seq,
                message: Arc::clone(&hit.message.message),
                at_micros: hit.at_micros,
                lexical_rank: 0,
                score,
                relevance: relevance(found.docs, terms, score),
                vector_rank: None,
                similarity: None,
                fused: 0.0,
                outcome: Outcome::BelowThreshold,
            }
        })
        .collect();
    considered.sort_by(|a, b| rounded(b.score).total_cmp(&rounded(a.score)).then(b.seq.cmp(&a.seq)));
    for (i, c) in considered.iter_mut().enumerate() {
        c.lexical_rank = i + 1;
        c.fused = 1.0 / (RRF_K + (i + 1) as f64);
    }
    for (i, hit) in found.vector_hits.iter().enumerate() {
        let rank = i + 1;
        let at = match considered.iter().position(|c| c.seq == hit.message.seq) {
            Some(at) => at,
            None => {
                considered.push(Considered {
                    seq: hit.message.seq,
                    message: Arc::clone(&hit.message.message),
                    at_micros: hit.at_micros,
                    lexical_rank: 0,
                    score: 0.0,
                    relevance: 0.0,
                    vector_rank: None,
                    similarity: None,
                    fused: 0.0,
                    outcome: Outcome::BelowThreshold,
                });
                considered.len() - 1
            }
        };
        let c = &mut considered[at];
        c.vector_rank = Some(rank);
        c.similarity = Some(hit.similarity);
        // Below the similarity floor a vector is no evidence: it neither admits the message
        // nor moves it among those the words found (on LoCoMo, weak vector ranks pushed good
        // lexical hits out).
        if hit.similarity >= recall.similarity_floor() {
            c.fused += 1.0 / (RRF_K + rank as f64);
        }
    }
    if !found.vector_hits.is_empty() {
        considered.sort_by(|a, b| b.fused.total_cmp(&a.fused).then(b.seq.cmp(&a.seq)));
    }
    let (floor, similar) = (recall.relevance_floor(), recall.similarity_floor());
    let eligible =
        |c: &Considered| (c.relevance >= floor && c.relevance > 0.0) || c.similarity.is_some_and(|s| s >= similar);
    let budget = budget.min(recall.token_budget());
    // What each line costs is estimated as it is added (its own count and a newline); the
    // message as written is counted once at the end and trimmed if the estimate fell short.
    let mut spent = counter.count_text(RECALL_HEADING);
    let mut count = 0;
    let mut units: Vec<Vec<usize>> = Vec::new();
    for i in 0..considered.len() {
        if !eligible(&considered[i]) || considered[i].outcome == Outcome::Injected {
            continue;
        }
        // The unit that goes in or stays out whole: a tool result and its call.
        let mut unit = vec![i];
        if let Some(call_id) = considered[i].message.tool_call_id() {
            let call = considered
                .iter()
                .position(|c| eligible(c) && c.message.tool_calls().iter().any(|t| t.id == call_id));
            match call {
                Some(j) if considered[j].outcome == Outcome::Injected => {}
                Some(j) => unit.insert(0, j),
                None => {
                    considered[i].outcome = Outcome::WithoutItsCall;
                    continue;
                }
            }
        }
        if count + unit.len() > recall.k() {
            considered[i].outcome = Outcome::PastK;
            continue;
        }
        let cost: usize = unit
            .iter()
            .map(|&u| counter.count_text(&line(&considered[u])) + 1)
            .sum();
        if spent + cost > budget {
            considered[i].outcome = Outcome::OverBudget;
            continue;
        }
        spent += cost;
        count += unit.len();
        for &u in &unit {
            considered[u].outcome = Outcome::Injected;
        }
        units.push(unit);
    }
    let mut recalled = Recalled {
        considered,
        message: None,
        tokens: 0,
        searched: true,
    };
    loop {
        let lines: Vec<String> = recalled.injected().map(line).collect();
        if lines.is_empty() {
            return recalled;
        }
        let message = Message::user(format!("{RECALL_HEADING}\n{}", lines.join("\n")));
        let tokens = counter.count_message(&message);
        match units.pop() {
            // The least relevant unit leaves until the message as written fits.
            Some(unit) if tokens > budget => {
                for u in unit {
                    recalled.considered[u].outcome = Outcome::OverBudget;
                }
            }
            _ => {
                recalled.tokens = tokens;
                recalled.message = Some(message);
                return recalled;
            }
        }
    }
}

/// One recalled message as it is written: `[#12 user, 2026-10-06T10:00:00Z] text` (`[#12 user
/// Ada, …]` when the message names its participant); an assistant's tool calls follow its text
/// as `→ name(arguments)`, a tool result names its call.
fn line(c: &Considered) -> String {
    let m = &c.message;
    let mut role = match m.role() {
        Role::Tool => format!("tool result for {}", m.tool_call_id().unwrap_or_default()),
        role => role.as_str().to_string(),
    };
    if let Some(name) = &m.name {
        role.push(' ');
        role.push_str(name);
    }
    let mut out = match u64::try_from(c.at_micros) {
        Ok(micros) if micros > 0 => {
            let at = UNIX_EPOCH + Duration::from_micros(micros);
            format!("[#{} {role}, {}] ", c.seq, humantime::format_rfc3339_seconds(at))
        }
        _ => format!("[#{} {role}] ", c.seq),
    };
    if let Some(text) = m.text() {
        out.push_str(&text);
    }
    for call in m.tool_calls() {
        if !out.ends_with(' ') {
            out.push(' ');
        }
        out.push_str(&format!("→ {}({}) [{}]", call.name, call.arguments, call.id));
    }
    out.trim_end().to_string()
}
