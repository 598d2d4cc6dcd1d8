//! Facts: what is known about a user, kept across that user's conversations — true (a newer
//! fact replaces an older one about the same thing), visible (every change is in the fact's
//! history, with when and why) and bounded (at most so many facts and tokens per user).
//!
//! This module is the pure part — the types, and the rules as functions of values, with no
//! store, clock or model in them — and [`apply_facts`], the one way a change made by those
//! rules reaches a [`Store`](crate::Store) (which keeps the facts:
//! [`Store::keeps_facts`](crate::Store::keeps_facts)).
//!
//! - **Whose**: facts belong to a [`UserId`] (a conversation names its user) within a tenant,
//!   and never cross either: a store keys a user's [`FactSet`] by both.
//! - **Proposed**: off the turn's path, a facts model ([`FactExtractor`]) reads the messages
//!   that left a window (or, every [`Facts::extract_every`] turns, the recent ones), with their
//!   sequence numbers ([`Shown`]), and the user's current facts, and answers
//!   `{"facts": [{"text": …, "key": … | null, "sources": [12, 13]}]}`. [`parse_proposal`]
//!   checks the whole answer (shape, lengths, [`FactKey`]s, sources among those shown) and
//!   discards it whole on the first violation ([`InvalidProposal`], with a
//!   [`code`](InvalidProposal::code) to count it by).
//! - **Merged**: [`merge`] applies a proposal by chatmem's rules. A fact with a key supersedes
//!   the current fact with that key (kept in its history as
//!   [`Superseded`](ChangeKind::Superseded)), or confirms it when it says the same; a fact
//!   without one is added unless one that says the same ([`same_text`]: case, spacing and
//!   punctuation aside) exists, which is then confirmed. The model never deletes.
//! - **By hand**: [`add`], [`edit`], [`pin`], [`unpin`], [`delete`], each refusing what would
//!   break a rule ([`FactError`]).
//! - **Bounded**: [`enforce`] keeps a set within [`FactLimits`] (200 facts and 4,000 tokens
//!   by default): past them, unpinned facts leave, least recently confirmed first, each
//!   recorded as [`Evicted`](ChangeKind::Evicted). Pinned facts never leave, and [`pin`]
//!   refuses to pin past the bounds.
//! - **Injected**: [`render`] writes the facts in one fixed order under [`FACTS_HEADING`],
//!   within a token budget, the same bytes for the same facts, so a provider's cached prompt
//!   prefix survives until a fact changes.
//! - **In a turn**: with [`Facts`] configured
//!   ([`ChatMemoryBuilder::facts`](crate::ChatMemoryBuilder::facts)), a turn begun for a user
//!   ([`ChatMemory::begin_as`](crate::ChatMemory::begin_as)) loads the user's facts with the
//!   conversation, at once, and its prompt sends them right after the system message; they
//!   are never stored with the conversation. [`ChatMemory::add_fact`](crate::ChatMemory::add_fact)
//!   and its siblings are the changes by hand, each through [`apply_facts`].
//!
//! Every change returns a new set and its [`FactChange`]s together ([`Changed`]): what a
//! store commits at once, as a [`FactsCommit`](crate::store::FactsCommit) checked against the
//! facts it was made on, version-checked; [`apply_facts`] makes the change again on newer facts
//! when another writer committed first. An extraction's commit is `merge`, then `enforce` on
//! its result:
//!
//! ```
//! use chatmem::{Cl100k, ConversationId};
//! use chatmem::facts::{Cause, FactLimits, FactSet, Shown, enforce, merge, parse_proposal, render};
//! let conversation = ConversationId::new("c1")?;
//! let shown = Shown::new(conversation.clone(), [12, 13]);
//! let limits = FactLimits::default();
//! let answer = r#"{"facts": [{"text": "Default delivery address: 12 Main St.", "key": "address.default", "sources": [12, 13]}]}"#;
//! let proposal = parse_proposal(answer, &shown, &limits)?;
//! let cause = Cause::Extraction { conversation };
//! let merged = merge(&FactSet::default(), &proposal, &cause, 1_000);
//! let bounded = enforce(&merged.set, &limits, &Cl100k, &cause, 1_000);
//! let committed = merged.then(bounded);
//! assert_eq!(committed.changes.len(), 1);
//! let rendered = render(&committed.set, limits.max_tokens(), &Cl100k).unwrap();
//! assert!(rendered.message.text().unwrap().ends_with("\n- Default delivery address: 12 Main St."));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod apply;
mod bounds;
mod change;
mod edit;
mod extract;
mod fact;
mod key;
mod merge;
mod proposal;
mod render;
mod settings;
mod text;
mod user_id;

#[cfg(test)]
mod properties;

pub use apply::{Applied, FACTS_ATTEMPTS, apply_facts};
pub use bounds::{
    DEFAULT_MAX_FACT_TEXT_BYTES, DEFAULT_MAX_FACT_TOKENS, DEFAULT_MAX_FACTS, DEFAULT_MAX_PROPOSAL_BYTES,
    DEFAULT_MAX_PROPOSAL_FACTS, FactLimits, enforce, fact_tokens, set_tokens,
};
pub use change::{Cause, ChangeKind, Changed, EvictionReason, FactChange};
pub use edit::{FactEdit, FactError, add, delete, edit, pin, unpin};
pub(crate) use extract::Job;
pub use extract::{
    DEFAULT_EXTRACTION_MAX_TOKENS, DEFAULT_EXTRACTION_TIMEOUT, ExtractionStats, FACTS_EXTRACTION_PROMPT, FactExtractor,
    MAX_SHOWN_BYTES, MAX_SHOWN_MESSAGES,
};
pub use fact::{Fact, FactSet, FactSource, InvalidFactSet, MAX_FACT_ID, MAX_FACT_SOURCES};
pub use key::{FactKey, InvalidFactKey, MAX_KEY_BYTES};
pub use merge::merge;
pub use proposal::{InvalidProposal, ProposedFact, Shown, parse_proposal};
pub use render::{FACTS_HEADING, RenderedFacts, line, render, render_order};
pub use settings::{DEFAULT_EXTRACT_EVERY, DEFAULT_FACTS_MAX_TOKENS, Facts};
pub use text::{InvalidFactText, clean_text, comparable_text, same_text};
pub use user_id::{InvalidUserId, UserId};
