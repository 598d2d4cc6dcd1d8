//! Text analysis for recall: the one way chatmem turns text into the terms it indexes and
//! searches, the same for every store, so the same query finds the same messages everywhere.
//!
//! Text is normalized (NFKC: a full-width `ＬＣ２０２６` is `lc2026`), cut at Unicode word
//! boundaries (UAX #29) and case folded. Han, Hiragana and Katakana, which are written without
//! spaces, become overlapping character pairs (`我的订单` → `我的`, `的订`, `订单`; a lone
//! character stays itself), so a query with `订单` finds `我的订单是 LC202610060018` without a
//! dictionary. English stop words (NLTK's list, `stop_words_en.txt`) are left out and other
//! English words are stemmed (Snowball: `refunded` and `refunds` are `refund`), which on the
//! LoCoMo benchmark finds about 8 points more of the evidence than the words as said
//! (BENCHMARKS.md). Terms longer than [`MAX_TERM_BYTES`] are cut to it (at a character boundary).

use std::hash::BuildHasher;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

use hashbrown::HashTable;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use crate::message::{Body, Content, ContentPart, Message};

/// The longest term kept, in bytes: longer words (hashes, base64) are cut to it.
pub const MAX_TERM_BYTES: usize = 64;

/// The most distinct terms one message is indexed under (the first ones it says); a message
/// past it is still found by those.
pub const MAX_TERMS_PER_MESSAGE: usize = 4096;

/// The terms of `text`, in order, repeated as often as they occur.
///
/// ```
/// use chatmem::recall::terms;
/// assert_eq!(terms("我的订单是 LC202610060018。"), ["我的", "的订", "订单", "单是", "lc202610060018"]);
/// assert_eq!(terms("Order #42 — can it be REFUNDED?"), ["order", "42", "refund"]);
/// assert_eq!(terms("好"), ["好"]);
/// ```
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_term(text, |t| out.push(t));
    out
}

/// Calls `emit` with each term of `text`, in order.
fn each_term(text: &str, mut emit: impl FnMut(String)) {
    // ASCII is its own NFKC form: most text skips the copy.
    let normalized: std::borrow::Cow<'_, str> = if text.is_ascii() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(text.nfkc().collect())
    };
    // The characters of the current run of CJK words (adjacent, nothing between them).
    let mut run: Vec<char> = Vec::new();
    let mut run_end = 0;
    let flush = |run: &mut Vec<char>, emit: &mut dyn FnMut(String)| {
        match run.len() {
            0 => {}
            1 => emit(run[0].to_string()),
            _ => {
                for pair in run.windows(2) {
                    emit(pair.iter().collect());
                }
            }
        }
        run.clear();
    };
    for (at, word) in normalized.split_word_bound_indices() {
        if !word.is_ascii() && word.chars().all(is_cjk) {
            if at != run_end {
                flush(&mut run, &mut emit);
            }
            run.extend(word.chars());
            run_end = at + word.len();
            continue;
        }
        flush(&mut run, &mut emit);
        if !word.chars().any(char::is_alphanumeric) {
            continue;
        }
        let mut folded = if word.is_ascii() {
            word.to_ascii_lowercase()
        } else {
            word.to_lowercase()
        };
        if is_stop_word(&folded) {
            continue;
        }
        if folded.bytes().all(|b| b.is_ascii_alphabetic()) {
            // Only plain English letters: the stemmer is English's, and other scripts (and
            // words with digits, such as order numbers) are kept as said.
            if let std::borrow::Cow::Owned(stem) = STEMMER.stem(&folded) {
                folded = stem;
            }
        }
        if folded.len() > MAX_TERM_BYTES {
            let mut cut = MAX_TERM_BYTES;
            while !folded.is_char_boundary(cut) {
                cut -= 1;
            }
            folded.truncate(cut);
        }
        emit(folded);
    }
    flush(&mut run, &mut emit);
}

/// The English stop words, one a line (`#` starts a comment).
const STOP_WORDS_EN: &str = include_str!("stop_words_en.txt");

static STOP_WORDS: LazyLock<hashbrown::HashSet<&'static str>> = LazyLock::new(|| {
    STOP_WORDS_EN
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Whether a case-folded word is an English stop word (a typographic apostrophe counts as
/// the plain one: `it’s` is `it's`).
fn is_stop_word(word: &str) -> bool {
    if word.contains('\u{2019}') {
        STOP_WORDS.contains(word.replace('\u{2019}', "'").as_str())
    } else {
        STOP_WORDS.contains(word)
    }
}

/// Whether `c` belongs to a script written without spaces between words, indexed as
/// character pairs: Han (CJK ideographs), Hiragana and Katakana.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x3134F  // CJK extensions B–H
    )
}

/// What one message is indexed under: its distinct terms with how often each occurs, and
/// its length in terms (for BM25's length normalization).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexTerms {
    /// Distinct terms, in the order they first occur, each with its count.
    pub terms: Vec<(String, u32)>,
    /// How many terms the message has (repeats included).
    pub len: u32,
}

impl IndexTerms {
    /// The index terms of `message`: its participant's `name` when it has one (so "what did
    /// Caroline say about…" finds what Caroline said), its text (every text part), and an
    /// assistant message's tool calls' names and arguments. Reasoning text and metadata, which
    /// are never sent to a model, are not indexed.
    pub fn of(message: &Message) -> Self {
        // Positions in `terms` by the term's hash: each term is kept once, never copied.
        let hasher = hashbrown::DefaultHashBuilder::default();
        let mut seen: HashTable<usize> = HashTable::new();
        let mut terms: Vec<(String, u32)> = Vec::new();
        let mut len: u32 = 0;
        let mut add = |t: String| {
            len = len.saturating_add(1);
            let hash = hasher.hash_one(&t);
            if let Some(&i) = seen.find(hash, |&i| terms[i].0 == t) {
                terms[i].1 = terms[i].1.saturating_add(1);
            } else if terms.len() < MAX_TERMS_PER_MESSAGE {
                seen.insert_unique(hash, terms.len(), |&i| hasher.hash_one(&terms[i].0));
                terms.push((t, 1));
            }
        };
        let content = |c: &Content, add: &mut dyn FnMut(String)| match c {
            Content::Text(t) => each_term(t, add),
            Content::Parts(parts) => {
                for part in parts {
                    if let ContentPart::Text(t) | ContentPart::Refusal(t) = part {
                        each_term(t, &mut *add);
                    }
                }
            }
        };
        if let Some(name) = &message.name {
            each_term(name, &mut add);
        }
        match &message.body {
            Body::System { content: c }
            | Body::Developer { content: c }
            | Body::User { content: c }
            | Body::Tool { content: c, .. } => content(c, &mut add),
            Body::Assistant {
                content: c, tool_calls, ..
            } => {
                if let Some(c) = c {
                    content(c, &mut add);
                }
                for call in tool_calls {
                    each_term(&call.name, &mut add);
                    each_term(&call.arguments, &mut add);
                }
            }
        }
        IndexTerms { terms, len }
    }
}

/// The most distinct terms a query searches for (its first ones): a search reads each term's
/// postings, so a pasted page would otherwise hold a store for as long as it has words.
pub const MAX_QUERY_TERMS: usize = 64;

/// The distinct terms of a query, in the order they first occur, at most [`MAX_QUERY_TERMS`].
///
/// ```
/// use chatmem::recall::query_terms;
/// assert_eq!(query_terms("LC202610060018 能退吗？能退"), ["lc202610060018", "能退", "退吗"]);
/// ```
pub fn query_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    each_term(text, |t| {
        if out.len() < MAX_QUERY_TERMS && !out.contains(&t) {
            out.push(t);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn cjk_runs_become_overlapping_pairs_and_other_words_stay_whole() {
        assert_eq!(terms("那单能退吗？"), ["那单", "单能", "能退", "退吗"]);
        // Punctuation and spaces end a run: no pair spans them.
        assert_eq!(terms("订单。退款"), ["订单", "退款"]);
        assert_eq!(terms("订 单"), ["订", "单"]);
        // Katakana and Hiragana pair up too; Hangul is written with spaces and stays whole.
        assert_eq!(terms("カタカナ"), ["カタ", "タカ", "カナ"]);
        assert_eq!(terms("주문 번호"), ["주문", "번호"]);
        assert_eq!(terms("订单LC2026"), ["订单", "lc2026"]);
    }

    #[test]
    fn text_is_normalized_and_case_folded() {
        assert_eq!(terms("ＬＣ２０２６ Straße ÉTÉ"), ["lc2026", "straße", "été"]);
        assert_eq!(terms("can't ain't"), ["can't", "ain't"]);
        assert_eq!(terms("e-mail 3.14 a_b"), ["e", "mail", "3.14", "a_b"]);
        assert!(terms("  —… !!! ").is_empty());
    }

    #[test]
    fn english_stop_words_are_left_out_and_english_words_stemmed() {
        assert_eq!(terms("What did I say about the shipping?"), ["say", "ship"]);
        assert_eq!(terms("It’s shipped; it's SHIPPING"), ["ship", "ship"]);
        // Only plain letters are stemmed: numbers, ids and other scripts stay as said.
        assert_eq!(terms("orders2026 café running"), ["orders2026", "café", "run"]);
        // A query of stop words alone searches nothing.
        assert!(query_terms("what is it?").is_empty());
        // The same word, however inflected, is one term for the index and the query.
        assert_eq!(query_terms("refunds"), terms("refunded"));
    }

    #[test]
    fn long_terms_are_cut_at_a_character_boundary() {
        let long = "é".repeat(100);
        let t = terms(&long);
        assert_eq!(t.len(), 1);
        assert!(t[0].len() <= MAX_TERM_BYTES && t[0].len() >= MAX_TERM_BYTES - 1);
        assert!(t[0].chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_message_is_indexed_under_its_name_text_and_tool_calls_but_not_its_reasoning() {
        let mut m = Message::assistant_tool_calls(vec![ToolCall {
            id: "call_1".into(),
            name: "get_order".into(),
            arguments: r#"{"order":"LC202610060018"}"#.into(),
        }]);
        if let Body::Assistant { reasoning_content, .. } = &mut m.body {
            *reasoning_content = Some("secret thoughts".into());
        }
        let index = IndexTerms::of(&m);
        let names: Vec<&str> = index.terms.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["get_order", "order", "lc202610060018"]);
        assert_eq!(index.len, 3);

        let repeated = IndexTerms::of(&Message::user("refund refunded REFUNDS today"));
        assert_eq!(repeated.terms, [("refund".to_string(), 3), ("today".to_string(), 1)]);
        assert_eq!(repeated.len, 4);

        let named = IndexTerms::of(&Message::user("I adopted a dog").with_name("Caroline"));
        let names: Vec<&str> = named.terms.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["carolin", "adopt", "dog"]);
    }

    #[test]
    fn a_query_searches_its_first_distinct_terms() {
        let text: String = (0..200).map(|i| format!("w{} ", i % 100)).collect();
        let q = query_terms(&text);
        assert_eq!(q.len(), MAX_QUERY_TERMS);
        assert_eq!((q[0].as_str(), q[MAX_QUERY_TERMS - 1].as_str()), ("w0", "w63"));
    }

    #[test]
    fn a_huge_message_keeps_its_first_distinct_terms_and_its_full_length() {
        let text: String = (0..MAX_TERMS_PER_MESSAGE + 10).map(|i| format!("w{i} ")).collect();
        let index = IndexTerms::of(&Message::user(text));
        assert_eq!(index.terms.len(), MAX_TERMS_PER_MESSAGE);
        assert_eq!(index.len as usize, MAX_TERMS_PER_MESSAGE + 10);
        assert_eq!(index.terms[0].0, "w0");
    }
}
