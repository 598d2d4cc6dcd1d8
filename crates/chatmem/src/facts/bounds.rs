//! The bounds of a user's facts ([`FactLimits`]) and how they are kept ([`enforce`]): past
//! them, unpinned facts leave, least recently confirmed first.

use crate::counter::TokenCounter;
use crate::error::{Error, Result};

use super::change::{Cause, ChangeKind, Changed, EvictionReason, FactChange};
use super::fact::{Fact, FactSet};
use super::render::line;

/// The most facts a user keeps by default.
pub const DEFAULT_MAX_FACTS: usize = 200;
/// The most tokens a user's facts take by default ([`fact_tokens`], summed).
pub const DEFAULT_MAX_FACT_TOKENS: usize = 4_000;
/// The longest fact text by default, in bytes.
pub const DEFAULT_MAX_FACT_TEXT_BYTES: usize = 500;
/// The most facts one extraction may propose by default.
pub const DEFAULT_MAX_PROPOSAL_FACTS: usize = 50;
/// The longest answer a facts model may give by default, in bytes.
pub const DEFAULT_MAX_PROPOSAL_BYTES: usize = 64 * 1024;

const MAX_FACTS_CAP: usize = 10_000;
const MAX_TOKENS_CAP: usize = 100_000;
const MAX_TEXT_BYTES_CAP: usize = 4_096;
const MAX_PROPOSAL_FACTS_CAP: usize = 1_000;
const MAX_PROPOSAL_BYTES_CAP: usize = 4 * 1024 * 1024;

/// How much is kept of a user's facts, and how much an extraction may propose.
///
/// | setting | default | range |
/// |---|---|---|
/// | `max_facts`: facts kept per user | 200 | 1 to 10,000 |
/// | `max_tokens`: tokens they take ([`fact_tokens`], summed) | 4,000 | 1 to 100,000 |
/// | `max_text_bytes`: one fact's text | 500 | 1 to 4,096 |
/// | `max_proposal_facts`: facts in one model answer | 50 | 1 to 1,000 |
/// | `max_proposal_bytes`: one model answer | 65,536 | 1 to 4 MiB |
///
/// ```
/// use chatmem::facts::FactLimits;
/// let limits = FactLimits::default().with_max_facts(50)?.with_max_tokens(1_000)?;
/// assert_eq!((limits.max_facts(), limits.max_tokens(), limits.max_text_bytes()), (50, 1_000, 500));
/// assert!(FactLimits::default().with_max_facts(0).unwrap_err().to_string().contains("max_facts"));
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactLimits {
    max_facts: usize,
    max_tokens: usize,
    max_text_bytes: usize,
    max_proposal_facts: usize,
    max_proposal_bytes: usize,
}

impl Default for FactLimits {
    fn default() -> Self {
        Self {
            max_facts: DEFAULT_MAX_FACTS,
            max_tokens: DEFAULT_MAX_FACT_TOKENS,
            max_text_bytes: DEFAULT_MAX_FACT_TEXT_BYTES,
            max_proposal_facts: DEFAULT_MAX_PROPOSAL_FACTS,
            max_proposal_bytes: DEFAULT_MAX_PROPOSAL_BYTES,
        }
    }
}

fn in_range(name: &str, value: usize, max: usize) -> Result<usize> {
    if value == 0 || value > max {
        return Err(Error::InvalidConfig(format!(
            "facts {name} must be 1 to {max}, got {value}"
        )));
    }
    Ok(value)
}

impl FactLimits {
    /// The same limits keeping at most `n` facts per user.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `n` is 0 or above 10,000.
    pub fn with_max_facts(self, n: usize) -> Result<Self> {
        Ok(Self {
            max_facts: in_range("max_facts", n, MAX_FACTS_CAP)?,
            ..self
        })
    }

    /// The same limits keeping facts of at most `tokens` tokens per user.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `tokens` is 0 or above 100,000.
    pub fn with_max_tokens(self, tokens: usize) -> Result<Self> {
        Ok(Self {
            max_tokens: in_range("max_tokens", tokens, MAX_TOKENS_CAP)?,
            ..self
        })
    }

    /// The same limits with fact texts of at most `bytes` bytes.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `bytes` is 0 or above 4,096.
    pub fn with_max_text_bytes(self, bytes: usize) -> Result<Self> {
        Ok(Self {
            max_text_bytes: in_range("max_text_bytes", bytes, MAX_TEXT_BYTES_CAP)?,
            ..self
        })
    }

    /// The same limits with at most `n` facts in one model answer.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `n` is 0 or above 1,000.
    pub fn with_max_proposal_facts(self, n: usize) -> Result<Self> {
        Ok(Self {
            max_proposal_facts: in_range("max_proposal_facts", n, MAX_PROPOSAL_FACTS_CAP)?,
            ..self
        })
    }

    /// The same limits with model answers of at most `bytes` bytes.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `bytes` is 0 or above 4 MiB.
    pub fn with_max_proposal_bytes(self, bytes: usize) -> Result<Self> {
        Ok(Self {
            max_proposal_bytes: in_range("max_proposal_bytes", bytes, MAX_PROPOSAL_BYTES_CAP)?,
            ..self
        })
    }

    /// The most facts kept per user.
    pub fn max_facts(&self) -> usize {
        self.max_facts
    }

    /// The most tokens a user's facts take.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The longest fact text, in bytes.
    pub fn max_text_bytes(&self) -> usize {
        self.max_text_bytes
    }

    /// The most facts in one model answer.
    pub fn max_proposal_facts(&self) -> usize {
        self.max_proposal_facts
    }

    /// The longest model answer, in bytes.
    pub fn max_proposal_bytes(&self) -> usize {
        self.max_proposal_bytes
    }
}

/// What a fact costs against [`FactLimits::max_tokens`]: its rendered line
/// ([`render`](super::render)'s) by `counter`, plus one for the line break.
///
/// ```
/// use chatmem::Heuristic;
/// use chatmem::facts::{FactSet, add, fact_tokens};
/// let (added, _) = add(&FactSet::default(), "Allergic to nuts", None, &Default::default(), 1)?;
/// // "- Allergic to nuts" is 18 ASCII bytes: 5 tokens by the heuristic, and the line break.
/// assert_eq!(fact_tokens(&added.set.facts()[0], &Heuristic), 6);
/// # Ok::<(), chatmem::facts::FactError>(())
/// ```
pub fn fact_tokens(fact: &Fact, counter: &dyn TokenCounter) -> usize {
    counter.count_text(&line(fact)) + 1
}

/// The tokens of all of `set`'s facts ([`fact_tokens`], summed).
pub fn set_tokens(set: &FactSet, counter: &dyn TokenCounter) -> usize {
    set.facts().iter().map(|f| fact_tokens(f, counter)).sum()
}

/// How many facts of `set` are pinned, and their tokens.
pub(crate) fn pinned_cost(set: &FactSet, counter: &dyn TokenCounter) -> (usize, usize) {
    set.facts()
        .iter()
        .filter(|f| f.pinned)
        .fold((0, 0), |(n, tokens), f| (n + 1, tokens + fact_tokens(f, counter)))
}

/// `set` within `limits`: while it holds more than `max_facts` facts or more than
/// `max_tokens` tokens ([`fact_tokens`], summed), the unpinned fact confirmed least recently
/// (ties: the smallest id) leaves, recorded as [`Evicted`](ChangeKind::Evicted) with the bound
/// it was evicted for (the count when both are passed), at `now_micros`, caused by `cause`
/// (what brought the set past its bounds). Pinned facts never leave: when they alone pass a
/// bound, every unpinned fact leaves and the set stays past it (pinning refuses to get
/// there; a lowered limit can).
///
/// ```
/// use chatmem::Heuristic;
/// use chatmem::facts::{Cause, FactLimits, FactSet, add, enforce};
/// let limits = FactLimits::default().with_max_facts(1)?;
/// let (one, _) = add(&FactSet::default(), "Lives in Berlin", None, &limits, 10)?;
/// let (two, _) = add(&one.set, "Allergic to nuts", None, &limits, 20)?;
/// let kept = enforce(&two.set, &limits, &Heuristic, &Cause::ByHand, 30);
/// assert_eq!(kept.set.facts()[0].text, "Allergic to nuts");
/// assert_eq!(kept.changes[0].kind.as_str(), "evicted");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn enforce(
    set: &FactSet,
    limits: &FactLimits,
    counter: &dyn TokenCounter,
    cause: &Cause,
    now_micros: i64,
) -> Changed {
    let costs: Vec<usize> = set.facts().iter().map(|f| fact_tokens(f, counter)).collect();
    let mut count = set.len();
    let mut tokens: usize = costs.iter().sum();
    if count <= limits.max_facts && tokens <= limits.max_tokens {
        return Changed::unchanged(set);
    }
    // Who leaves first: the least recently confirmed, then the oldest id.
    let mut order: Vec<usize> = (0..set.len()).filter(|&i| !set.facts()[i].pinned).collect();
    order.sort_by_key(|&i| (set.facts()[i].confirmed_micros, set.facts()[i].id));
    let mut out = set.clone();
    let mut changes = Vec::new();
    for i in order {
        let reason = if count > limits.max_facts {
            EvictionReason::TooManyFacts
        } else if tokens > limits.max_tokens {
            EvictionReason::TooManyTokens
        } else {
            break;
        };
        let fact = &set.facts()[i];
        out.remove(fact.id);
        count -= 1;
        tokens -= costs[i];
        changes.push(FactChange {
            fact: fact.id,
            at_micros: now_micros,
            cause: cause.clone(),
            kind: ChangeKind::Evicted {
                reason,
                text: fact.text.clone(),
            },
        });
    }
    Changed { set: out, changes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::{Cl100k, Heuristic};
    use crate::facts::fact::tests::fact;

    fn set(facts: Vec<Fact>) -> FactSet {
        let next = facts.iter().map(|f| f.id).max().unwrap_or(0) + 1;
        FactSet::new(facts, next).unwrap()
    }

    fn ids(set: &FactSet) -> Vec<u64> {
        set.facts().iter().map(|f| f.id).collect()
    }

    #[test]
    fn limits_have_defaults_and_refuse_what_is_out_of_range() {
        let d = FactLimits::default();
        assert_eq!(
            (
                d.max_facts(),
                d.max_tokens(),
                d.max_text_bytes(),
                d.max_proposal_facts(),
                d.max_proposal_bytes()
            ),
            (200, 4_000, 500, 50, 65_536)
        );
        let l = d
            .with_max_facts(10_000)
            .unwrap()
            .with_max_tokens(100_000)
            .unwrap()
            .with_max_text_bytes(4_096)
            .unwrap()
            .with_max_proposal_facts(1_000)
            .unwrap()
            .with_max_proposal_bytes(4 * 1024 * 1024)
            .unwrap();
        assert_eq!(
            (l.max_facts(), l.max_tokens(), l.max_text_bytes()),
            (10_000, 100_000, 4_096)
        );
        assert_eq!(
            (l.max_proposal_facts(), l.max_proposal_bytes()),
            (1_000, 4 * 1024 * 1024)
        );
        for (name, e) in [
            ("max_facts", d.with_max_facts(0)),
            ("max_facts", d.with_max_facts(10_001)),
            ("max_tokens", d.with_max_tokens(0)),
            ("max_tokens", d.with_max_tokens(100_001)),
            ("max_text_bytes", d.with_max_text_bytes(4_097)),
            ("max_proposal_facts", d.with_max_proposal_facts(0)),
            ("max_proposal_bytes", d.with_max_proposal_bytes(4 * 1024 * 1024 + 1)),
        ] {
            let e = e.unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("must be 1 to"), "{e}");
        }
    }

    #[test]
    fn a_fact_costs_its_rendered_line_and_a_line_break() {
        let f = fact(1, "Allergic to nuts", Some("diet.allergies"));
        assert_eq!(
            fact_tokens(&f, &Heuristic),
            Heuristic.count_text("- Allergic to nuts") + 1
        );
        assert_eq!(fact_tokens(&f, &Cl100k), Cl100k.count_text("- Allergic to nuts") + 1);
        let s = set(vec![f.clone(), fact(2, "Lives in Berlin", None)]);
        assert_eq!(set_tokens(&s, &Heuristic), fact_tokens(&f, &Heuristic) + 6); // "- Lives in Berlin": 17 bytes
    }

    #[test]
    fn within_bounds_nothing_leaves() {
        let s = set(vec![fact(1, "a", None), fact(2, "b", None)]);
        let limits = FactLimits::default().with_max_facts(2).unwrap();
        let kept = enforce(&s, &limits, &Heuristic, &Cause::ByHand, 99);
        assert_eq!(kept, Changed::unchanged(&s));
    }

    #[test]
    fn past_the_count_the_least_recently_confirmed_unpinned_leave_first() {
        let mut facts: Vec<Fact> = (1..=5).map(|i| fact(i, &format!("fact {i}"), None)).collect();
        facts[0].confirmed_micros = 50; // confirmed late: stays
        facts[1].pinned = true; // pinned: stays
        facts[2].confirmed_micros = 3;
        facts[3].confirmed_micros = 3; // tie with 3: the smaller id leaves first
        let s = set(facts);
        let limits = FactLimits::default().with_max_facts(2).unwrap();
        let kept = enforce(&s, &limits, &Heuristic, &Cause::ByHand, 99);
        assert_eq!(ids(&kept.set), [1, 2]);
        let evicted: Vec<u64> = kept.changes.iter().map(|c| c.fact).collect();
        assert_eq!(evicted, [3, 4, 5]);
        for c in &kept.changes {
            assert_eq!(c.at_micros, 99);
            assert_eq!(c.cause, Cause::ByHand);
            assert_eq!(
                c.kind,
                ChangeKind::Evicted {
                    reason: EvictionReason::TooManyFacts,
                    text: s.get(c.fact).unwrap().text.clone()
                }
            );
        }
        assert_eq!(kept.set.next_id(), s.next_id());
    }

    #[test]
    fn past_the_tokens_facts_leave_until_the_rest_fits() {
        // Each "- xxxx…" line of 4k ASCII bytes costs k + 1 heuristic tokens (with the break).
        let facts = vec![
            fact(1, &"a".repeat(38), None), // "- " + 38 = 40 bytes: 10 + 1
            fact(2, &"b".repeat(38), None),
            fact(3, &"c".repeat(38), None),
        ];
        let s = set(facts);
        assert_eq!(set_tokens(&s, &Heuristic), 33);
        let limits = FactLimits::default().with_max_tokens(22).unwrap();
        let kept = enforce(&s, &limits, &Heuristic, &Cause::ByHand, 7);
        assert_eq!(ids(&kept.set), [2, 3]);
        assert!(matches!(
            kept.changes[..],
            [FactChange {
                fact: 1,
                kind: ChangeKind::Evicted {
                    reason: EvictionReason::TooManyTokens,
                    ..
                },
                ..
            }]
        ));
        assert!(set_tokens(&kept.set, &Heuristic) <= 22);
    }

    #[test]
    fn pinned_facts_never_leave_even_when_they_alone_pass_a_bound() {
        let mut facts: Vec<Fact> = (1..=4).map(|i| fact(i, &format!("fact {i}"), None)).collect();
        facts[0].pinned = true;
        facts[2].pinned = true;
        let s = set(facts);
        let limits = FactLimits::default().with_max_facts(1).unwrap();
        let kept = enforce(&s, &limits, &Heuristic, &Cause::ByHand, 1);
        assert_eq!(ids(&kept.set), [1, 3]);
        assert_eq!(kept.changes.len(), 2);
        assert_eq!(pinned_cost(&kept.set, &Heuristic).0, 2);
    }
}
