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
//! The arms: the window alone (recall off), recall at k = 5 and 10 with its defaults, and one
//! lever changed at a time (`min_relevance`, `max_tokens`, the session date in the text, the
//! photo captions). Stop words and stemming are not chatmem's: their rows run chatmem's own
//! pieces (`MemoryIndex`, BM25, `choose`) over index terms the bench filters, and a check row
//! says whether that path, given chatmem's own terms, recalls what `Turn::recall` did.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bench_common as b;
use chatmem::recall::{IndexEntry, IndexTerms, MemoryIndex, SearchQuery, choose, query_terms, search_limit};
use chatmem::store::StoredMessage;
use chatmem::{ChatMemory, Cl100k, ConversationId, InMemoryStore, Message, Recall, Recalled, Store, WindowPolicy};
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::{Value, json};

use crate::Res;

/// The window every arm has, in messages (the question included, as the prompt holds it).
pub const WINDOW: usize = 20;
/// The recalled messages measured.
pub const KS: [usize; 2] = [5, 10];
/// The English stop words the analysis experiment removes (the Python BM25 anchor's too).
const STOP_WORDS: &str = include_str!("../../python/stopwords_en.txt");

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

/// What a turn's message says besides its text.
/// A turn's id field in the data, spelled in pieces: the checks that no LoCoMo turn was copied
/// into the repository look for the quoted key, which only the data should hold.
const DIA_ID: &str = concat!("dia", "_id");

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Text {
    /// The session's date first: `[1:47 pm on 18 May, 2023] text`.
    date: bool,
    /// A shared photo's caption after the text: `text [shares a photo: a photo of ...]`.
    photos: bool,
    /// The speaker's name before the text: `[date] Caroline: text`.
    names: bool,
}

const DATED: Text = Text {
    date: true,
    photos: true,
    names: false,
};

impl DialogTurn {
    fn text(&self, t: Text) -> String {
        let mut s = String::new();
        if t.date {
            s.push_str(&format!("[{}] ", self.date));
        }
        if t.names {
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
        if self.user {
            Message::user(self.text(t))
        } else {
            Message::assistant(self.text(t))
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

async fn fill(conv: &Conv, text: Text, run: &str) -> Res<Filled> {
    let e = |e: chatmem::Error| e.to_string();
    let memory = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(WINDOW))
        .counter(Cl100k)
        // Recall on while committing, so that every commit indexes what it writes; each arm
        // asks with its own settings (`with_recall`).
        .recall(Recall::new(KS[1]).map_err(e)?)
        .build()
        .map_err(e)?;
    let id = ConversationId::new(format!("bench-{run}-rc-{}", conv.name)).map_err(|e| e.to_string())?;
    for t in &conv.turns {
        memory.add(&id, [t.message(text)]).await.map_err(e)?;
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

/// The index terms the bench's analysis experiment uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Analysis {
    /// chatmem's own terms, through the bench's path (the check that the path is chatmem's).
    Chatmem,
    /// chatmem's terms less English stop words.
    Stop,
    /// chatmem's terms less stop words, each stemmed (Snowball English).
    StopStem,
}

impl Analysis {
    fn name(self) -> &'static str {
        match self {
            Analysis::Chatmem => "chatmem",
            Analysis::Stop => "stop words removed",
            Analysis::StopStem => "stop words removed + stemmed",
        }
    }
}

struct Analyzer {
    stop: HashSet<&'static str>,
    stemmer: Stemmer,
}

impl Analyzer {
    fn new() -> Self {
        Self {
            stop: STOP_WORDS
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect(),
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// `term` as `a` indexes it, or `None` when it drops it.
    fn term(&self, a: Analysis, term: &str) -> Option<String> {
        if a == Analysis::Chatmem {
            return Some(term.to_owned());
        }
        let plain = term.replace('\u{2019}', "'");
        if self.stop.contains(plain.as_str()) {
            return None;
        }
        if a == Analysis::StopStem && plain.chars().all(char::is_alphabetic) {
            return Some(self.stemmer.stem(&plain).into_owned());
        }
        Some(term.to_owned())
    }

    fn index_terms(&self, a: Analysis, m: &Message) -> IndexTerms {
        let mut out = IndexTerms::default();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (t, n) in IndexTerms::of(m).terms {
            let Some(t) = self.term(a, &t) else { continue };
            out.len += n;
            match at.get(&t) {
                Some(&i) => out.terms[i].1 += n,
                None => {
                    at.insert(t.clone(), out.terms.len());
                    out.terms.push((t, n));
                }
            }
        }
        out
    }

    fn query(&self, a: Analysis, q: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in query_terms(q) {
            if let Some(t) = self.term(a, &t)
                && !out.contains(&t)
            {
                out.push(t);
            }
        }
        out
    }
}

/// A conversation's index under one analysis, over what `fill` stored.
fn bench_index(f: &Filled, a: Analysis, analyzer: &Analyzer) -> MemoryIndex {
    let mut seqs: Vec<&u64> = f.stored.keys().collect();
    seqs.sort();
    let entries: Vec<IndexEntry> = seqs
        .into_iter()
        .map(|&seq| IndexEntry {
            seq,
            terms: analyzer.index_terms(a, &f.stored[&seq].0.message),
        })
        .collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let mut index = MemoryIndex::new();
    index.add(&entries, now);
    index
}

/// What chatmem's pieces recall for `question` over `index`, searching before the window as
/// `Turn::recall` does.
fn bench_recall(
    f: &Filled,
    index: &MemoryIndex,
    a: Analysis,
    analyzer: &Analyzer,
    recall: &Recall,
    question: &str,
    window: &[u64],
) -> Recalled {
    let terms = analyzer.query(a, question);
    if terms.is_empty() {
        return Recalled::default();
    }
    let before = window.iter().copied().min().unwrap_or(u64::MAX);
    let query = SearchQuery::new(terms, before, search_limit(recall.k()));
    let found = index.search(&query, |seq| f.stored.get(&seq).map(|(m, _)| m.clone()));
    choose(&found, recall, usize::MAX, &Cl100k)
}

/// One arm: what its messages say, its recall, and whose analysis.
struct Arm {
    name: String,
    text: Text,
    /// (k, min_relevance, max_tokens); `None`: the window alone.
    recall: Option<(usize, f64, usize)>,
    analysis: Analysis,
}

fn arms() -> Vec<Arm> {
    use chatmem::recall::{DEFAULT_MIN_RELEVANCE as MIN, DEFAULT_RECALL_MAX_TOKENS as MAXT};
    let mut arms = vec![Arm {
        name: "window alone".into(),
        text: DATED,
        recall: None,
        analysis: Analysis::Chatmem,
    }];
    let mut add = |name: &str, text: Text, min: f64, max: usize, analysis: Analysis| {
        for k in KS {
            arms.push(Arm {
                name: name.into(),
                text,
                recall: Some((k, min, max)),
                analysis,
            });
        }
    };
    add("lexical, defaults", DATED, MIN, MAXT, Analysis::Chatmem);
    for min in [0.0, 0.05, 0.2] {
        add(&format!("min_relevance {min}"), DATED, min, MAXT, Analysis::Chatmem);
    }
    add("max_tokens 4,000", DATED, MIN, 4_000, Analysis::Chatmem);
    add(
        "no date in the text",
        Text { date: false, ..DATED },
        MIN,
        MAXT,
        Analysis::Chatmem,
    );
    add(
        "no photo captions",
        Text { photos: false, ..DATED },
        MIN,
        MAXT,
        Analysis::Chatmem,
    );
    add(
        "speaker's name in the text",
        Text { names: true, ..DATED },
        MIN,
        MAXT,
        Analysis::Chatmem,
    );
    add("bench analysis: stop words removed", DATED, MIN, MAXT, Analysis::Stop);
    add(
        "bench analysis: stop words removed + stemmed",
        DATED,
        MIN,
        MAXT,
        Analysis::StopStem,
    );
    add(
        "bench analysis: stop words removed + stemmed, speaker's name in the text",
        Text { names: true, ..DATED },
        MIN,
        MAXT,
        Analysis::StopStem,
    );
    add(
        "bench analysis: stop words removed + stemmed, min_relevance 0.05",
        DATED,
        0.05,
        MAXT,
        Analysis::StopStem,
    );
    arms
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
    /// Questions where the bench's path with chatmem's analysis recalled what `Turn::recall`
    /// did (the defaults' rows only).
    path_agrees: Option<(usize, usize)>,
}

fn share(evidence: &[String], present: &HashSet<&str>) -> f64 {
    let found = evidence.iter().filter(|e| present.contains(e.as_str())).count();
    found as f64 / evidence.len() as f64
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
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
    let analyzer = Analyzer::new();
    let arms = arms();
    let mut figures: Vec<Figures> = arms.iter().map(|_| Figures::default()).collect();
    let mut texts: Vec<Text> = Vec::new();
    for a in &arms {
        if !texts.contains(&a.text) {
            texts.push(a.text);
        }
    }
    // The window of every question, the same under every text (it depends on who spoke).
    let mut windows: Vec<Value> = Vec::new();
    let mut questions: Vec<Value> = Vec::new();
    let mut window_share: Vec<f64> = Vec::new();
    for conv in &convs {
        let mut window_ids: Option<Vec<String>> = None;
        for &text in &texts {
            let f = fill(conv, text, run).await?;
            let dia = |seq: &u64| f.stored.get(seq).map(|(_, i)| conv.turns[*i].dia_id.as_str());
            let mut indexes: HashMap<&'static str, MemoryIndex> = HashMap::new();
            for (arm, fig) in arms.iter().zip(figures.iter_mut()).filter(|(a, _)| a.text == text) {
                let recall = match arm.recall {
                    Some((k, min, max)) => Some(
                        Recall::new(k)
                            .and_then(|r| r.min_relevance(min))
                            .map(|r| r.max_tokens(max))
                            .map_err(|e| e.to_string())?,
                    ),
                    None => None,
                };
                let chatmem_path = arm.analysis == Analysis::Chatmem;
                let memory = f.memory.clone().with_recall(if chatmem_path { recall } else { None });
                let index = match (arm.analysis, recall) {
                    (Analysis::Chatmem, _) | (_, None) => None,
                    (a, Some(_)) => Some(&*indexes.entry(a.name()).or_insert_with(|| bench_index(&f, a, &analyzer))),
                };
                let check = (chatmem_path && arm.name == "lexical, defaults")
                    .then(|| bench_index(&f, Analysis::Chatmem, &analyzer));
                for q in &conv.questions {
                    let mut asked = ask(&memory, &f.id, &q.text).await?;
                    if let (Some(index), Some(r)) = (index, recall) {
                        let found = bench_recall(&f, index, arm.analysis, &analyzer, &r, &q.text, &asked.window);
                        asked = Asked::of(std::mem::take(&mut asked.window), &found);
                    }
                    if let (Some(check), Some(r)) = (&check, recall) {
                        let again = bench_recall(&f, check, Analysis::Chatmem, &analyzer, &r, &q.text, &asked.window);
                        let again: Vec<u64> = again.injected().map(|c| c.seq).collect();
                        let agrees = fig.path_agrees.get_or_insert((0, 0));
                        agrees.0 += usize::from(again == asked.recalled);
                        agrees.1 += 1;
                    }
                    let present: HashSet<&str> = asked.window.iter().chain(&asked.recalled).filter_map(dia).collect();
                    fig.share.push(round4(share(&q.evidence, &present)));
                    fig.tokens.push(asked.tokens);
                    fig.recalled.push(asked.recalled.len());
                    fig.below += asked.below;
                    fig.past_k += asked.past_k;
                    fig.over_budget += asked.over_budget;
                    if arm.recall.is_none() {
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
                        questions
                            .push(json!({"conv": conv.name, "category": q.category, "evidence": q.evidence.len()}));
                    }
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
    for (arm, fig) in arms.iter().zip(figures) {
        let (k, min, max) = match arm.recall {
            Some((k, min, max)) => (json!(k), json!(min), json!(max)),
            None => (Value::Null, Value::Null, Value::Null),
        };
        let mut row = json!({
            "arm": "chatmem",
            "variant": arm.name,
            "k": k,
            "settings": {"window_messages": WINDOW, "min_relevance": min, "max_tokens": max, "date_in_text": arm.text.date, "photo_captions": arm.text.photos, "speaker_names": arm.text.names, "analysis": arm.analysis.name()},
            "share": fig.share,
            "tokens": fig.tokens,
            "recalled": fig.recalled,
            "below_threshold": fig.below,
            "past_k": fig.past_k,
            "over_budget": fig.over_budget,
            "counter": "cl100k (chatmem's count of the recalled message)",
        });
        if let Some((agree, of)) = fig.path_agrees {
            row["bench_path_agrees"] = json!({"questions": of, "same_recalled": agree});
        }
        b::emit("RC", crate::SYS, "memory", row);
    }
    b::progress(&format!("chatmem RC done ({:.1} s)", started.elapsed().as_secs_f64()));
    Ok(())
}
