//! What a facts model proposes ([`parse_proposal`]): its JSON answer read and checked whole
//! against what it was shown ([`Shown`]), so that a proposal is applied entirely or not at all.

use serde::Deserialize;

use crate::id::ConversationId;
use crate::json_error::{JsonFieldError, deserialize_json};

use super::bounds::FactLimits;
use super::fact::{FactSource, MAX_FACT_SOURCES};
use super::key::{FactKey, InvalidFactKey};
use super::text::{InvalidFactText, clean_text};

/// The messages a facts model was shown: of which conversation, and their sequence numbers.
/// A proposed fact may name only these as its sources.
///
/// ```
/// use chatmem::{ConversationId, facts::Shown};
/// let shown = Shown::new(ConversationId::new("c1")?, [13, 12, 12]);
/// assert_eq!(shown.seqs(), [12, 13]);
/// assert!(shown.contains(12) && !shown.contains(14));
/// # Ok::<(), chatmem::InvalidConversationId>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    conversation: ConversationId,
    seqs: Vec<u64>,
}

impl Shown {
    /// The messages `seqs` (in any order, repeats ignored) of `conversation`.
    pub fn new(conversation: ConversationId, seqs: impl IntoIterator<Item = u64>) -> Self {
        let mut seqs: Vec<u64> = seqs.into_iter().collect();
        seqs.sort_unstable();
        seqs.dedup();
        Self { conversation, seqs }
    }

    /// The conversation.
    pub fn conversation(&self) -> &ConversationId {
        &self.conversation
    }

    /// The sequence numbers shown, ascending.
    pub fn seqs(&self) -> &[u64] {
        &self.seqs
    }

    /// Whether message `seq` was shown.
    pub fn contains(&self, seq: u64) -> bool {
        self.seqs.binary_search(&seq).is_ok()
    }
}

/// One fact a facts model proposed, checked: its text [clean](super::clean_text) and within
/// the limit, its key valid, its sources (at least one, each shown, repeats dropped, in the
/// order given) of the shown conversation. Made only by [`parse_proposal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedFact {
    pub(crate) text: String,
    pub(crate) key: Option<FactKey>,
    pub(crate) sources: Vec<FactSource>,
}

impl ProposedFact {
    /// Its text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its key.
    pub fn key(&self) -> Option<&FactKey> {
        self.key.as_ref()
    }

    /// The messages it was read from.
    pub fn sources(&self) -> &[FactSource] {
        &self.sources
    }
}

/// Why a facts model's answer was discarded. Nothing of a discarded answer is applied.
/// `at` is a fact's place in the answer's `facts`, from 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidProposal {
    /// The answer was longer than [`FactLimits::max_proposal_bytes`].
    #[error("the facts answer is {bytes} bytes long; the limit is {max}")]
    TooLarge {
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The answer was not JSON of the shape `{"facts": [{"text", "key", "sources"}]}`.
    #[error("{}", match path {
        Some(path) => format!("field `{path}`: {reason}"),
        None => format!("the facts answer is not a proposal: {reason}"),
    })]
    Shape {
        /// The field that was wrong (`facts[2].sources[0]`), `None` when the answer as a
        /// whole was (not JSON, not an object, something after it).
        path: Option<String>,
        /// What was wrong (quoting the input only as [`printable`](crate::printable::printable)).
        reason: String,
    },
    /// More facts than [`FactLimits::max_proposal_facts`].
    #[error("the facts answer proposes {count} facts; the limit is {max}")]
    TooManyFacts {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A fact's text was empty, too long, or held a control or invisible character.
    #[error("field `facts[{at}].text`: {reason}")]
    Text {
        /// The fact.
        at: usize,
        /// What was wrong.
        reason: InvalidFactText,
    },
    /// A fact's key broke [`FactKey`]'s rule.
    #[error("field `facts[{at}].key`: {reason}")]
    Key {
        /// The fact.
        at: usize,
        /// What was wrong.
        reason: InvalidFactKey,
    },
    /// Two facts of the answer had the same key.
    #[error("field `facts[{at}].key`: key {key} is also facts[{first}]'s")]
    DuplicateKey {
        /// The later fact.
        at: usize,
        /// The earlier one.
        first: usize,
        /// The key.
        key: FactKey,
    },
    /// A fact named no source.
    #[error("field `facts[{at}].sources`: a fact names at least one source")]
    NoSources {
        /// The fact.
        at: usize,
    },
    /// A fact named more distinct sources than a fact keeps ([`MAX_FACT_SOURCES`]).
    #[error("field `facts[{at}].sources`: {count} sources; the limit is {MAX_FACT_SOURCES}")]
    TooManySources {
        /// The fact.
        at: usize,
        /// How many distinct sources.
        count: usize,
    },
    /// A fact named a message the model was not shown.
    #[error("field `facts[{at}].sources[{index}]`: message {seq} was not shown")]
    SourceNotShown {
        /// The fact.
        at: usize,
        /// The source's place in its `sources`.
        index: usize,
        /// The sequence number named.
        seq: u64,
    },
}

impl InvalidProposal {
    /// A short name for what was wrong, for counting discarded answers (`too_large`, `shape`,
    /// `too_many_facts`, `text`, `key`, `duplicate_key`, `no_sources`, `too_many_sources`,
    /// `source_not_shown`).
    pub fn code(&self) -> &'static str {
        match self {
            InvalidProposal::TooLarge { .. } => "too_large",
            InvalidProposal::Shape { .. } => "shape",
            InvalidProposal::TooManyFacts { .. } => "too_many_facts",
            InvalidProposal::Text { .. } => "text",
            InvalidProposal::Key { .. } => "key",
            InvalidProposal::DuplicateKey { .. } => "duplicate_key",
            InvalidProposal::NoSources { .. } => "no_sources",
            InvalidProposal::TooManySources { .. } => "too_many_sources",
            InvalidProposal::SourceNotShown { .. } => "source_not_shown",
        }
    }
}

/// The answer as the model writes it; unknown fields are ignored.
#[derive(Deserialize)]
#[serde(expecting = r#"an object {"facts": [...]}"#)]
struct Answer {
    facts: Vec<AnswerFact>,
}

#[derive(Deserialize)]
#[serde(expecting = r#"a fact {"text": "...", "key": "..." or null, "sources": [seq, ...]}"#)]
struct AnswerFact {
    text: String,
    #[serde(default)]
    key: Option<String>,
    sources: Vec<u64>,
}

/// Reads a facts model's answer: exactly `{"facts": [{"text": "…", "key": "address.default"
/// | null, "sources": [12, 13]}]}` (a `key` may be left out; unknown fields are ignored;
/// whitespace around the object is allowed, anything else after it is not).
///
/// Checked whole, in this order, the first violation discarding all of it: the answer's length
/// ([`FactLimits::max_proposal_bytes`]), its shape, the number of facts
/// ([`FactLimits::max_proposal_facts`]), then each fact in turn: its text
/// ([`clean_text`](super::clean_text), at most [`FactLimits::max_text_bytes`]), its key
/// ([`FactKey`]; no two facts with the same one), its sources (at least one, at most
/// [`MAX_FACT_SOURCES`] distinct, each among the `shown` messages).
///
/// ```
/// use chatmem::{ConversationId, facts::{FactLimits, InvalidProposal, Shown, parse_proposal}};
/// let shown = Shown::new(ConversationId::new("c1")?, 10..=13);
/// let answer = r#"{"facts": [{"text": "Default delivery address: 12 Main St.", "key": "address.default", "sources": [12, 13]}]}"#;
/// let facts = parse_proposal(answer, &shown, &FactLimits::default())?;
/// assert_eq!(facts[0].key().unwrap().as_str(), "address.default");
/// assert_eq!(facts[0].sources()[1].seq, 13);
///
/// let outside = r#"{"facts": [{"text": "Likes tea", "sources": [14]}]}"#;
/// let e = parse_proposal(outside, &shown, &FactLimits::default()).unwrap_err();
/// assert_eq!(e.to_string(), "field `facts[0].sources[0]`: message 14 was not shown");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`InvalidProposal`] naming what was wrong and where.
pub fn parse_proposal(json: &str, shown: &Shown, limits: &FactLimits) -> Result<Vec<ProposedFact>, InvalidProposal> {
    if json.len() > limits.max_proposal_bytes() {
        return Err(InvalidProposal::TooLarge {
            bytes: json.len(),
            max: limits.max_proposal_bytes(),
        });
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let answer: Answer = deserialize_json(&mut de).map_err(|e: JsonFieldError| InvalidProposal::Shape {
        path: e.path().map(str::to_owned),
        reason: e.reason().to_owned(),
    })?;
    // Anything but whitespace after the object discards the answer too.
    de.end().map_err(|e| InvalidProposal::Shape {
        path: None,
        reason: e.to_string(),
    })?;
    if answer.facts.len() > limits.max_proposal_facts() {
        return Err(InvalidProposal::TooManyFacts {
            count: answer.facts.len(),
            max: limits.max_proposal_facts(),
        });
    }
    let mut out: Vec<ProposedFact> = Vec::with_capacity(answer.facts.len());
    for (at, fact) in answer.facts.into_iter().enumerate() {
        let text =
            clean_text(&fact.text, limits.max_text_bytes()).map_err(|reason| InvalidProposal::Text { at, reason })?;
        let key = fact
            .key
            .map(FactKey::new)
            .transpose()
            .map_err(|reason| InvalidProposal::Key { at, reason })?;
        if let Some(key) = &key
            && let Some(first) = out.iter().position(|f| f.key.as_ref() == Some(key))
        {
            return Err(InvalidProposal::DuplicateKey {
                at,
                first,
                key: key.clone(),
            });
        }
        if fact.sources.is_empty() {
            return Err(InvalidProposal::NoSources { at });
        }
        let mut seqs: Vec<u64> = Vec::with_capacity(fact.sources.len());
        for (index, &seq) in fact.sources.iter().enumerate() {
            if !shown.contains(seq) {
                return Err(InvalidProposal::SourceNotShown { at, index, seq });
            }
            if !seqs.contains(&seq) {
                seqs.push(seq);
            }
        }
        if seqs.len() > MAX_FACT_SOURCES {
            return Err(InvalidProposal::TooManySources { at, count: seqs.len() });
        }
        let sources = seqs
            .into_iter()
            .map(|seq| FactSource {
                conversation: shown.conversation().clone(),
                seq,
            })
            .collect();
        out.push(ProposedFact { text, key, sources });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::fact::tests::source;

    fn shown() -> Shown {
        Shown::new(ConversationId::new("c1").unwrap(), [10, 11, 12, 13])
    }

    fn parse(json: &str) -> Result<Vec<ProposedFact>, InvalidProposal> {
        parse_proposal(json, &shown(), &FactLimits::default())
    }

    fn answer(facts: &[&str]) -> String {
        format!(r#"{{"facts": [{}]}}"#, facts.join(", "))
    }

    #[test]
    fn reads_the_shape_ignoring_unknown_fields() {
        let json = r#"
            {"facts": [
                {"text": " Default delivery address:\n 12 Main St. ", "key": "address.default", "sources": [12, 13, 12], "confidence": 0.9},
                {"text": "Allergic to nuts", "key": null, "sources": [10]},
                {"text": "Likes tea", "sources": [11], "extra": {"nested": [1, 2]}}
            ], "reasoning": "ignored"}
        "#;
        let facts = parse(json).unwrap();
        assert_eq!(facts.len(), 3);
        assert_eq!(facts[0].text(), "Default delivery address: 12 Main St.");
        assert_eq!(facts[0].key().map(FactKey::as_str), Some("address.default"));
        assert_eq!(facts[0].sources(), [source("c1", 12), source("c1", 13)]);
        assert_eq!((facts[1].key(), facts[2].key()), (None, None));
        assert_eq!(facts[2].sources(), [source("c1", 11)]);
        assert_eq!(parse(r#"{"facts": []}"#).unwrap(), []);
    }

    #[test]
    fn what_is_not_the_shape_is_discarded_naming_the_field() {
        for (json, path, reason) in [
            ("not json", None, "expected ident"),
            ("[]", None, r#"expected an object {"facts": [...]}"#),
            ("{}", None, "missing field `facts`"),
            (r#"{"facts": {}}"#, Some("facts"), "invalid type: map"),
            (
                r#"{"facts": [{"sources": [10]}]}"#,
                Some("facts[0]"),
                "missing field `text`",
            ),
            (
                r#"{"facts": [{"text": "a"}]}"#,
                Some("facts[0]"),
                "missing field `sources`",
            ),
            (
                r#"{"facts": [{"text": 1, "sources": [10]}]}"#,
                Some("facts[0].text"),
                "invalid type: integer",
            ),
            (
                r#"{"facts": [{"text": "a", "key": 3, "sources": [10]}]}"#,
                Some("facts[0].key"),
                "invalid type",
            ),
            (
                r#"{"facts": [{"text": "a", "sources": [10, -1]}]}"#,
                Some("facts[0].sources[1]"),
                "invalid value",
            ),
            (
                r#"{"facts": [{"text": "a", "sources": [1.5]}]}"#,
                Some("facts[0].sources[0]"),
                "invalid type",
            ),
            (
                r#"{"facts": [{"text": "a", "sources": "10"}]}"#,
                Some("facts[0].sources"),
                "invalid type",
            ),
            (r#"{"facts": []} {"facts": []}"#, None, "trailing characters"),
            (r#"{"facts": [{"text": "a", "sources": [10]"#, Some("facts[0]"), "EOF"),
        ] {
            match parse(json) {
                Err(InvalidProposal::Shape { path: p, reason: r }) => {
                    assert_eq!(p.as_deref(), path, "{json}: {r}");
                    assert!(r.contains(reason), "{json}: {r}");
                }
                other => panic!("{json}: {other:?}"),
            }
        }
        let e = parse(r#"{"facts": [{"text": 1, "sources": [10]}]}"#).unwrap_err();
        assert!(e.to_string().starts_with("field `facts[0].text`: invalid type"), "{e}");
        assert!(
            parse("[]")
                .unwrap_err()
                .to_string()
                .starts_with("the facts answer is not a proposal: ")
        );
        // Whitespace around the object is fine.
        assert!(parse(" \n{\"facts\": []}\n ").is_ok());
    }

    #[test]
    fn lengths_are_capped() {
        let limits = FactLimits::default().with_max_proposal_bytes(40).unwrap();
        let json = answer(&[r#"{"text": "Likes tea", "sources": [10]}"#]);
        assert_eq!(
            parse_proposal(&json, &shown(), &limits),
            Err(InvalidProposal::TooLarge {
                bytes: json.len(),
                max: 40
            })
        );
        let limits = FactLimits::default().with_max_proposal_facts(2).unwrap();
        let one = r#"{"text": "Likes tea", "sources": [10]}"#;
        assert!(parse_proposal(&answer(&[one, one]), &shown(), &limits).is_ok());
        assert_eq!(
            parse_proposal(&answer(&[one, one, one]), &shown(), &limits),
            Err(InvalidProposal::TooManyFacts { count: 3, max: 2 })
        );
        let limits = FactLimits::default().with_max_text_bytes(5).unwrap();
        assert_eq!(
            parse_proposal(
                &answer(&[r#"{"text": "  ab   cd ", "sources": [10]}"#]),
                &shown(),
                &limits
            )
            .unwrap()[0]
                .text(),
            "ab cd"
        );
        assert_eq!(
            parse_proposal(&answer(&[one]), &shown(), &limits),
            Err(InvalidProposal::Text {
                at: 0,
                reason: InvalidFactText::TooLong { bytes: 9, max: 5 }
            })
        );
    }

    #[test]
    fn every_fact_is_checked_and_one_bad_fact_discards_them_all() {
        let good = r#"{"text": "Likes tea", "sources": [10]}"#;
        let cases: [(&str, InvalidProposal); 8] = [
            (
                r#"{"text": " \n ", "sources": [10]}"#,
                InvalidProposal::Text {
                    at: 1,
                    reason: InvalidFactText::Empty,
                },
            ),
            (
                r#"{"text": "a\u001bb", "sources": [10]}"#,
                InvalidProposal::Text {
                    at: 1,
                    reason: InvalidFactText::ControlCharacter(1),
                },
            ),
            (
                r#"{"text": "a", "key": "Address", "sources": [10]}"#,
                InvalidProposal::Key {
                    at: 1,
                    reason: InvalidFactKey::Character { at: 0, found: 'A' },
                },
            ),
            (
                r#"{"text": "a", "key": "", "sources": [10]}"#,
                InvalidProposal::Key {
                    at: 1,
                    reason: InvalidFactKey::Empty,
                },
            ),
            (r#"{"text": "a", "sources": []}"#, InvalidProposal::NoSources { at: 1 }),
            (
                r#"{"text": "a", "sources": [10, 14]}"#,
                InvalidProposal::SourceNotShown {
                    at: 1,
                    index: 1,
                    seq: 14,
                },
            ),
            (
                r#"{"text": "a", "sources": [9]}"#,
                InvalidProposal::SourceNotShown {
                    at: 1,
                    index: 0,
                    seq: 9,
                },
            ),
            (
                r#"{"text": "b", "key": "k", "sources": [10]}"#,
                InvalidProposal::DuplicateKey {
                    at: 1,
                    first: 0,
                    key: FactKey::new("k").unwrap(),
                },
            ),
        ];
        for (bad, expected) in cases {
            let first = if matches!(expected, InvalidProposal::DuplicateKey { .. }) {
                r#"{"text": "a", "key": "k", "sources": [10]}"#
            } else {
                good
            };
            assert_eq!(parse(&answer(&[first, bad, good])), Err(expected), "{bad}");
        }
    }

    #[test]
    fn a_fact_names_at_most_so_many_distinct_sources() {
        let many: Vec<u64> = (0..=MAX_FACT_SOURCES as u64).collect();
        let shown = Shown::new(ConversationId::new("c1").unwrap(), many.clone());
        let list = |seqs: &[u64]| seqs.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let json = answer(&[&format!(r#"{{"text": "a", "sources": [{}]}}"#, list(&many))]);
        assert_eq!(
            parse_proposal(&json, &shown, &FactLimits::default()),
            Err(InvalidProposal::TooManySources {
                at: 0,
                count: MAX_FACT_SOURCES + 1
            })
        );
        // Repeats are one source.
        let mut repeated = many[..MAX_FACT_SOURCES].to_vec();
        repeated.extend_from_slice(&many[..10]);
        let json = answer(&[&format!(r#"{{"text": "a", "sources": [{}]}}"#, list(&repeated))]);
        let facts = parse_proposal(&json, &shown, &FactLimits::default()).unwrap();
        assert_eq!(facts[0].sources().len(), MAX_FACT_SOURCES);
    }

    #[test]
    fn errors_say_what_and_where_and_have_a_code() {
        let cases = [
            (
                InvalidProposal::TooLarge { bytes: 9, max: 8 },
                "too_large",
                "the facts answer is 9 bytes long; the limit is 8",
            ),
            (
                InvalidProposal::Shape {
                    path: None,
                    reason: "x".into(),
                },
                "shape",
                "the facts answer is not a proposal: x",
            ),
            (
                InvalidProposal::TooManyFacts { count: 3, max: 2 },
                "too_many_facts",
                "the facts answer proposes 3 facts; the limit is 2",
            ),
            (
                InvalidProposal::Text {
                    at: 2,
                    reason: InvalidFactText::Empty,
                },
                "text",
                "field `facts[2].text`: fact text is empty",
            ),
            (
                InvalidProposal::Key {
                    at: 1,
                    reason: InvalidFactKey::EmptySegment(0),
                },
                "key",
                "field `facts[1].key`: fact key has an empty segment at byte 0; segments are joined by single dots",
            ),
            (
                InvalidProposal::DuplicateKey {
                    at: 3,
                    first: 1,
                    key: FactKey::new("home.city").unwrap(),
                },
                "duplicate_key",
                "field `facts[3].key`: key home.city is also facts[1]'s",
            ),
            (
                InvalidProposal::NoSources { at: 0 },
                "no_sources",
                "field `facts[0].sources`: a fact names at least one source",
            ),
            (
                InvalidProposal::TooManySources { at: 0, count: 65 },
                "too_many_sources",
                "field `facts[0].sources`: 65 sources; the limit is 64",
            ),
            (
                InvalidProposal::SourceNotShown {
                    at: 0,
                    index: 2,
                    seq: 99,
                },
                "source_not_shown",
                "field `facts[0].sources[2]`: message 99 was not shown",
            ),
        ];
        for (e, code, text) in cases {
            assert_eq!((e.code(), e.to_string().as_str()), (code, text));
        }
    }

    #[test]
    fn quoted_input_in_an_error_is_printable() {
        let e = parse("{\"facts\": [{\"text\": \"a\", \"sources\": [\"\u{1b}]2;x\u{7}\"]}]}").unwrap_err();
        assert!(!e.to_string().chars().any(char::is_control), "{e:?}");
    }
}
