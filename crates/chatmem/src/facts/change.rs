//! [`FactChange`]: one entry of a fact's history — what happened to it, when, and why; and
//! [`Changed`], a new set of facts with the changes that made it.

use serde::{Deserialize, Serialize};

use crate::id::ConversationId;

use super::fact::{FactSet, FactSource};
use super::key::FactKey;

/// What caused a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Cause {
    /// The facts model's reading of messages that left this conversation's window.
    Extraction {
        /// The conversation the messages were in.
        conversation: ConversationId,
    },
    /// A person, through the API.
    #[serde(rename = "hand")]
    ByHand,
}

/// Which bound a fact was evicted to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EvictionReason {
    /// There were more facts than [`FactLimits::max_facts`](super::FactLimits::max_facts).
    TooManyFacts,
    /// The facts took more than [`FactLimits::max_tokens`](super::FactLimits::max_tokens).
    TooManyTokens,
}

/// What happened to a fact. A text in a change is the fact's text right after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChangeKind {
    /// The fact was made.
    Added {
        /// Its text.
        text: String,
        /// Its key.
        key: Option<FactKey>,
        /// The fact it replaced (same key), which was [`Superseded`](ChangeKind::Superseded).
        supersedes: Option<u64>,
    },
    /// The fact was said again: an equal text (case, spacing and punctuation aside), or the
    /// same text under the same key.
    Confirmed {
        /// The sources that said it this time.
        sources: Vec<FactSource>,
        /// The key it took, when it had none and was said again with one.
        key: Option<FactKey>,
    },
    /// A newer fact with the same key replaced it; it is no longer current.
    Superseded {
        /// The fact that replaced it.
        by: u64,
        /// Its text when it was replaced.
        text: String,
    },
    /// A person changed its text or key.
    Edited {
        /// Its text after the edit.
        text: String,
        /// Its key after the edit.
        key: Option<FactKey>,
    },
    /// A person pinned it.
    Pinned,
    /// A person unpinned it.
    Unpinned,
    /// It left to keep the user's facts within their bounds; it is no longer current.
    Evicted {
        /// Which bound.
        reason: EvictionReason,
        /// Its text when it left.
        text: String,
    },
}

impl ChangeKind {
    /// The change's name, as its JSON `kind` and metrics name it (`added`, `confirmed`,
    /// `superseded`, `edited`, `pinned`, `unpinned`, `evicted`).
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeKind::Added { .. } => "added",
            ChangeKind::Confirmed { .. } => "confirmed",
            ChangeKind::Superseded { .. } => "superseded",
            ChangeKind::Edited { .. } => "edited",
            ChangeKind::Pinned => "pinned",
            ChangeKind::Unpinned => "unpinned",
            ChangeKind::Evicted { .. } => "evicted",
        }
    }
}

/// One entry of a fact's history: what happened to fact `fact`, when (Unix microseconds, the
/// caller's clock) and what caused it. A store keeps these beside the facts, written in the
/// same commit as the set they describe; a fact that left the set (superseded or evicted)
/// keeps its history, a fact deleted by hand takes its history with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactChange {
    /// The fact it happened to.
    pub fact: u64,
    /// When.
    pub at_micros: i64,
    /// What caused it.
    pub cause: Cause,
    /// What happened.
    pub kind: ChangeKind,
}

/// A user's facts after a change, and the history entries of what changed, in the order it
/// happened: what a store writes in one commit. No change, no entries (and the same set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The facts after.
    pub set: FactSet,
    /// What changed.
    pub changes: Vec<FactChange>,
}

impl Changed {
    /// `set` unchanged.
    pub(crate) fn unchanged(set: &FactSet) -> Self {
        Self {
            set: set.clone(),
            changes: Vec::new(),
        }
    }

    /// These changes followed by `then`'s, on `then`'s set.
    pub fn then(mut self, then: Changed) -> Self {
        self.changes.extend(then.changes);
        self.set = then.set;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_serialize_with_named_kinds_and_causes() {
        let change = FactChange {
            fact: 3,
            at_micros: 1_000,
            cause: Cause::Extraction {
                conversation: ConversationId::new("c1").unwrap(),
            },
            kind: ChangeKind::Superseded {
                by: 4,
                text: "Lives in Berlin".into(),
            },
        };
        let json = serde_json::to_string(&change).unwrap();
        assert_eq!(
            json,
            r#"{"fact":3,"at_micros":1000,"cause":{"by":"extraction","conversation":"c1"},"kind":{"kind":"superseded","by":4,"text":"Lives in Berlin"}}"#
        );
        assert_eq!(serde_json::from_str::<FactChange>(&json).unwrap(), change);
        let by_hand = FactChange {
            cause: Cause::ByHand,
            kind: ChangeKind::Evicted {
                reason: EvictionReason::TooManyTokens,
                text: "x".into(),
            },
            ..change
        };
        let json = serde_json::to_string(&by_hand).unwrap();
        assert!(json.contains(r#""cause":{"by":"hand"}"#), "{json}");
        assert!(json.contains(r#""reason":"too_many_tokens""#), "{json}");
        assert_eq!(serde_json::from_str::<FactChange>(&json).unwrap(), by_hand);
    }

    #[test]
    fn every_kind_has_its_name() {
        let kinds = [
            ChangeKind::Added {
                text: "a".into(),
                key: None,
                supersedes: None,
            },
            ChangeKind::Confirmed {
                sources: vec![],
                key: None,
            },
            ChangeKind::Superseded {
                by: 1,
                text: "a".into(),
            },
            ChangeKind::Edited {
                text: "a".into(),
                key: None,
            },
            ChangeKind::Pinned,
            ChangeKind::Unpinned,
            ChangeKind::Evicted {
                reason: EvictionReason::TooManyFacts,
                text: "a".into(),
            },
        ];
        for kind in kinds {
            let json = serde_json::to_value(&kind).unwrap();
            assert_eq!(json["kind"], kind.as_str());
        }
    }
}
