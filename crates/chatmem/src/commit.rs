//! [`Commit`]: one atomic, version-checked write, built only through [`Commit::on`] (or
//! [`Commit::restore`]) so that it is never invalid; the one place the commit rules live.

use std::sync::Arc;
use std::time::Duration;

use crate::counter::CounterName;
use crate::error::{StoreError, StoreErrorKind};
use crate::message::Message;
use crate::recall::{IndexEntry, IndexTerms};
use crate::snapshot::Snapshot;
use crate::stored_message::StoredMessage;
use crate::summary::Summary;

/// Whether messages that leave the window are deleted: what a [`Commit`]'s
/// [`delete_below`](Commit::delete_below) follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retention {
    /// Evicted messages are deleted (default): memory, not history.
    #[default]
    DropEvicted,
    /// Evicted messages are kept and [`ChatMemory::history`](crate::ChatMemory::history)
    /// returns them.
    KeepHistory,
}

/// One atomic write: what [`Store::commit`](crate::Store::commit) applies if the version still matches.
///
/// A `Commit` is built on the [`Snapshot`] it changes ([`Commit::on`]) and cannot be built
/// invalid: appended messages get consecutive sequences from the snapshot's `next_seq`, and
/// the window start never moves back nor past the last message. Since every commit bumps
/// the version, a store that finds the conversation still at
/// [`expected_version`](Commit::expected_version) knows the snapshot's sequences still
/// hold, so it applies the commit as it is: no store re-checks these rules.
///
/// ```
/// use chatmem::{Message, Retention};
/// use chatmem::store::{Commit, Snapshot};
/// let commit = Commit::on(&Snapshot::empty())
///     .system(Message::system("be brief"), 5)
///     .append(Message::user("u1"), 6)
///     .append(Message::assistant("a1"), 6)
///     .window_start(1)
///     .retention(Retention::KeepHistory)
///     .build()?;
/// assert_eq!(commit.expected_version(), 0);
/// let seqs: Vec<u64> = commit.appended().iter().map(|m| m.seq).collect();
/// assert_eq!(seqs, [1, 2]);
/// assert_eq!(commit.next_seq(), 3);
///
/// // The window start never moves back.
/// let mut later = Snapshot::empty();
/// (later.version, later.window_start, later.next_seq) = (4, 5, 9);
/// assert!(Commit::on(&later).window_start(3).build().is_err());
/// # Ok::<(), chatmem::store::StoreError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    token: u64,
    expected_version: u64,
    first_seq: u64,
    system: Option<StoredMessage>,
    append: Vec<StoredMessage>,
    window_start: u64,
    /// Kept for [`Commit::then`]; stores delete by `delete_below`, never by this.
    retention: Retention,
    delete_below: Option<u64>,
    summary: Option<Summary>,
    ttl: Option<Duration>,
    /// The appended messages' index entries, when the commit is made with recall on.
    index: Vec<IndexEntry>,
    /// Kept for [`Commit::then`]: whether the commit was made with recall on.
    indexes: bool,
}

/// A commit token: random, never 0 (0 reads as "no token" in stores). A facts commit's token
/// is made here too.
pub(crate) fn new_token() -> u64 {
    fastrand::u64(1..)
}

/// Builds a [`Commit`]; see [`Commit::on`].
#[derive(Debug, Clone)]
pub struct CommitBuilder {
    commit: Commit,
    loaded_window_start: u64,
    retention: Retention,
    /// The sequence the loaded summary covers up to (0: none).
    loaded_covered: u64,
    keep_unsummarized: bool,
    counted_by: Option<CounterName>,
    /// Whether the built commit carries index entries for recall.
    index: bool,
    /// Why [`build`](CommitBuilder::build) must fail, found while adding stored messages.
    misplaced: Option<String>,
}

impl Commit {
    /// Starts a commit on top of `loaded`: it expects `loaded.version`, appends from
    /// `loaded.next_seq` and keeps `loaded.window_start` unless told otherwise. Retention
    /// defaults to [`Retention::DropEvicted`], the TTL to none.
    pub fn on(loaded: &Snapshot) -> CommitBuilder {
        CommitBuilder {
            commit: Commit {
                token: new_token(),
                expected_version: loaded.version,
                first_seq: loaded.next_seq,
                system: None,
                append: Vec::new(),
                window_start: loaded.window_start,
                retention: Retention::default(),
                delete_below: None,
                summary: None,
                ttl: None,
                index: Vec::new(),
                indexes: false,
            },
            loaded_window_start: loaded.window_start,
            retention: Retention::default(),
            loaded_covered: loaded.summary.as_ref().map_or(0, |s| s.upto),
            // A conversation with a summary keeps what waits for one, whoever writes to it.
            keep_unsummarized: loaded.summary.is_some(),
            counted_by: None,
            index: false,
            misplaced: None,
        }
    }

    /// Starts the first commit that restores a conversation kept elsewhere (an export) into
    /// one that does not exist: it expects version 0 and appends from `first_seq`, the seq of
    /// the first kept message, instead of 1, so every message keeps its sequence number. The
    /// window start may then be set anywhere from 1 to the end. Restore the messages with
    /// [`append_stored`](CommitBuilder::append_stored) and the system message with
    /// [`system_stored`](CommitBuilder::system_stored); a restore larger than one batch
    /// continues with [`then`](Commit::then).
    ///
    /// ```
    /// use chatmem::Message;
    /// use chatmem::store::{Commit, StoredMessage};
    /// let commit = Commit::restore(41)
    ///     .append_stored(StoredMessage::new(41, 3, Message::user("u41")))
    ///     .append_stored(StoredMessage::new(42, 3, Message::assistant("a42")))
    ///     .window_start(42)
    ///     .build()?;
    /// assert_eq!((commit.expected_version(), commit.first_seq(), commit.next_seq()), (0, 41, 43));
    /// # Ok::<(), chatmem::store::StoreError>(())
    /// ```
    pub fn restore(first_seq: u64) -> CommitBuilder {
        let mut builder = Commit::on(&Snapshot {
            next_seq: first_seq,
            ..Snapshot::empty()
        });
        builder.commit.window_start = first_seq;
        builder
    }

    /// Starts the commit that follows this one once a store applied it (at
    /// `expected_version() + 1`): it appends from this commit's `next_seq`, keeps its window
    /// start, retention and TTL. For writing more than one batch, in order, without loading
    /// between batches.
    ///
    /// ```
    /// use chatmem::{Message, Retention};
    /// use chatmem::store::{Commit, Snapshot};
    /// let first = Commit::on(&Snapshot::empty()).append(Message::user("u1"), 3)
    ///     .retention(Retention::KeepHistory).build()?;
    /// let second = first.then().append(Message::assistant("a1"), 3).build()?;
    /// assert_eq!((second.expected_version(), second.first_seq()), (1, 2));
    /// assert_eq!(second.delete_below(), None); // history kept
    /// # Ok::<(), chatmem::store::StoreError>(())
    /// ```
    pub fn then(&self) -> CommitBuilder {
        Commit::on(&Snapshot {
            version: self.expected_version + 1,
            window_start: self.window_start,
            next_seq: self.next_seq(),
            summary: self.summary.clone(),
            ..Snapshot::empty()
        })
        .retention(self.retention)
        .ttl(self.ttl)
        .index(self.indexes)
    }

    /// The version the writer loaded; the commit fails with a conflict if it changed.
    pub fn expected_version(&self) -> u64 {
        self.expected_version
    }

    /// A random token that tells this commit from every other (never 0). A store keeps the
    /// token of the last commit with the conversation, so that when a commit's reply was lost
    /// (a timeout, a dropped connection) sending the same commit again is answered with the
    /// version it made instead of applying it twice: see [`Store::commit`](crate::Store::commit).
    pub fn token(&self) -> u64 {
        self.token
    }

    /// A replacement system message, or `None` to keep the current one.
    pub fn system(&self) -> Option<&StoredMessage> {
        self.system.as_ref()
    }

    /// New messages, with consecutive sequences from [`first_seq`](Commit::first_seq).
    pub fn appended(&self) -> &[StoredMessage] {
        &self.append
    }

    /// The sequence of the first appended message (the loaded `next_seq`).
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// The conversation's `next_seq` after this commit.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.append.len() as u64
    }

    /// The window start after this commit (never below the loaded one).
    pub fn window_start(&self) -> u64 {
        self.window_start
    }

    /// Delete every message with a sequence below this one, if any: under
    /// [`Retention::DropEvicted`] the window start, or, when evicted messages wait for a
    /// summary ([`CommitBuilder::keep_unsummarized`]), the first message no summary covers
    /// if that comes first. `None` under [`Retention::KeepHistory`].
    pub fn delete_below(&self) -> Option<u64> {
        self.delete_below
    }

    /// A new summary to store with the conversation, or `None` to keep the stored one.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    /// Expire the whole conversation this long after this commit; `None` never expires.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// The appended messages' index entries, in their order, when the commit was made with
    /// recall on ([`CommitBuilder::index`]); empty otherwise. A store that
    /// [searches](crate::Store::searches) writes them in the same atomic commit.
    pub fn index(&self) -> &[IndexEntry] {
        &self.index
    }

    /// Takes the commit apart: the replacement system message and the appended messages.
    pub fn into_messages(self) -> (Option<StoredMessage>, Vec<StoredMessage>) {
        (self.system, self.append)
    }
}

impl CommitBuilder {
    /// Records that the token counts of the messages given after this were made by the
    /// counter named `counter` (see [`StoredMessage::counted_by`]).
    pub fn counted_by(mut self, counter: impl Into<CounterName>) -> Self {
        self.counted_by = Some(counter.into());
        self
    }

    /// Makes the commit carry index entries for its appended messages ([`Commit::index`]),
    /// for recall: the terms are found when the commit is built.
    ///
    /// ```
    /// use chatmem::Message;
    /// use chatmem::store::{Commit, Snapshot};
    /// let commit = Commit::on(&Snapshot::empty()).index(true).append(Message::user("Order LC2026"), 3).build()?;
    /// let terms: Vec<&str> = commit.index()[0].terms.terms.iter().map(|(t, _)| t.as_str()).collect();
    /// assert_eq!((commit.index()[0].seq, terms), (1, vec!["order", "lc2026"]));
    /// # Ok::<(), chatmem::store::StoreError>(())
    /// ```
    pub fn index(mut self, on: bool) -> Self {
        self.index = on;
        self
    }

    /// Replaces the system message; it takes the sequence the next appended message would.
    pub fn system(mut self, message: impl Into<Arc<Message>>, tokens: u32) -> Self {
        self.set_system(message.into(), tokens);
        self
    }

    /// Appends a message with its token count; it gets the next sequence.
    pub fn append(mut self, message: impl Into<Arc<Message>>, tokens: u32) -> Self {
        self.push(message.into(), tokens);
        self
    }

    /// [`system`](CommitBuilder::system) in place: a planner adding a whole batch would
    /// otherwise move the builder through every call.
    pub(crate) fn set_system(&mut self, message: Arc<Message>, tokens: u32) {
        let stored = self.stored(message, tokens);
        self.commit.system = Some(stored);
    }

    /// [`append`](CommitBuilder::append) in place.
    pub(crate) fn push(&mut self, message: Arc<Message>, tokens: u32) {
        let stored = self.stored(message, tokens);
        self.commit.append.push(stored);
    }

    /// `message` at the next sequence, counted by this builder's counter.
    fn stored(&self, message: Arc<Message>, tokens: u32) -> StoredMessage {
        let mut stored = StoredMessage::new(self.commit.next_seq(), tokens, message);
        stored.counted_by.clone_from(&self.counted_by);
        stored
    }

    /// Appends a message exactly as another store kept it: its token count and counter name
    /// (or none) stay as they are. Its `seq` must be the next sequence, or
    /// [`build`](CommitBuilder::build) fails.
    pub fn append_stored(mut self, message: StoredMessage) -> Self {
        let next = self.commit.next_seq();
        if message.seq != next && self.misplaced.is_none() {
            self.misplaced = Some(format!("message seq {} is not the next sequence {next}", message.seq));
        }
        self.commit.append.push(StoredMessage { seq: next, ..message });
        self
    }

    /// Replaces the system message with one as another store kept it: its seq (the sequence
    /// at which it was set), token count and counter name stay as they are. A seq past the
    /// commit's `next_seq` makes [`build`](CommitBuilder::build) fail.
    ///
    /// ```
    /// use chatmem::Message;
    /// use chatmem::store::{Commit, StoredMessage};
    /// let system = StoredMessage::new(2, 5, Message::system("be brief")).counted_by("o200k_base");
    /// let commit = Commit::restore(1)
    ///     .append_stored(StoredMessage::new(1, 3, Message::user("u1")))
    ///     .system_stored(system.clone())
    ///     .build()?;
    /// assert_eq!(commit.system(), Some(&system));
    /// let early = Commit::restore(1).system_stored(StoredMessage::new(9, 5, Message::system("s")));
    /// assert!(early.build().is_err());
    /// # Ok::<(), chatmem::store::StoreError>(())
    /// ```
    pub fn system_stored(mut self, message: StoredMessage) -> Self {
        self.commit.system = Some(message);
        self
    }

    /// Moves the window start to `seq` (messages below it leave the window).
    pub fn window_start(mut self, seq: u64) -> Self {
        self.commit.window_start = seq;
        self
    }

    /// What happens to messages below the window start.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Expire the conversation this long after the commit; `None` never expires.
    pub fn ttl(mut self, ttl: Option<Duration>) -> Self {
        self.commit.ttl = ttl;
        self
    }

    /// Stores `summary`, made by extending the summary that covered up to `extends` (0: made
    /// from no summary), if the loaded conversation's summary is still that one; otherwise it
    /// is dropped. So a summary never moves backwards, and one made while another writer
    /// moved the summary (and deleted what the new one covers) never replaces it: the
    /// messages stay pending for the next turn.
    ///
    /// ```
    /// use chatmem::{Heuristic, Message, Summary};
    /// use chatmem::store::{Commit, Snapshot};
    /// let mut loaded = Snapshot::empty();
    /// (loaded.version, loaded.next_seq) = (3, 10);
    /// loaded.summary = Some(Summary::new("up to 4", 4, &Heuristic));
    /// let on = |s: Summary, extends| Commit::on(&loaded).summary(s, extends).append(Message::user("u"), 1).build();
    /// // Extends the loaded summary: stored.
    /// assert!(on(Summary::new("up to 8", 8, &Heuristic), 4)?.summary().is_some());
    /// // Made from an older summary (another writer moved it meanwhile): dropped.
    /// assert!(on(Summary::new("up to 8", 8, &Heuristic), 2)?.summary().is_none());
    /// // Covers no more than the loaded one: dropped.
    /// assert!(on(Summary::new("up to 3", 3, &Heuristic), 4)?.summary().is_none());
    /// # Ok::<(), chatmem::store::StoreError>(())
    /// ```
    pub fn summary(mut self, summary: Summary, extends: u64) -> Self {
        if extends == self.loaded_covered && summary.upto > self.loaded_covered {
            self.commit.summary = Some(summary);
        }
        self
    }

    /// Keeps evicted messages no summary covers yet, even under [`Retention::DropEvicted`]:
    /// for a memory that summarizes, so that a message is deleted only once summarized. On by
    /// itself when the loaded conversation has a summary (a writer without a summarizer must
    /// not delete what waits for one).
    pub fn keep_unsummarized(mut self) -> Self {
        self.keep_unsummarized = true;
        self
    }

    /// The commit as built so far, unchecked (for planning).
    pub(crate) fn draft(&self) -> &Commit {
        &self.commit
    }

    /// The commit.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] when the window start would move back or past the
    /// end of the conversation, or a stored message or system message given by
    /// [`append_stored`](CommitBuilder::append_stored) / [`system_stored`](CommitBuilder::system_stored)
    /// does not fit its sequence.
    pub fn build(self) -> Result<Commit, StoreError> {
        if let Some(reason) = self.misplaced {
            return Err(StoreError::new(StoreErrorKind::InvalidInput, reason));
        }
        let c = self.commit;
        if let Some(system) = c.system.as_ref().filter(|s| s.seq > c.next_seq()) {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "system message seq {} is past the next sequence {}",
                    system.seq,
                    c.next_seq()
                ),
            ));
        }
        if c.window_start < self.loaded_window_start {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "window start {} is before the loaded window start {}: it never moves back",
                    c.window_start, self.loaded_window_start
                ),
            ));
        }
        if c.window_start > c.next_seq() {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "window start {} is past the next sequence {}",
                    c.window_start,
                    c.next_seq()
                ),
            ));
        }
        if let Some(s) = &c.summary
            && s.upto >= c.next_seq()
        {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("a summary up to {} covers messages past the last one", s.upto),
            ));
        }
        let mut c = c;
        c.indexes = self.index;
        if self.index {
            c.index = c
                .append
                .iter()
                .map(|m| IndexEntry {
                    seq: m.seq,
                    terms: IndexTerms::of(&m.message),
                })
                .collect();
        }
        c.retention = self.retention;
        c.delete_below = match self.retention {
            Retention::KeepHistory => None,
            Retention::DropEvicted if self.keep_unsummarized => {
                let covered = c.summary.as_ref().map_or(self.loaded_covered, |s| s.upto);
                Some(c.window_start.min(covered.saturating_add(1)))
            }
            Retention::DropEvicted => Some(c.window_start),
        };
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConversationId, InMemoryStore, Store};

    fn stored(seq: u64, text: &str) -> StoredMessage {
        StoredMessage::new(seq, 4, Message::user(text)).counted_by("heuristic")
    }

    /// A restore in two commits rebuilds the state exactly: seqs, counts, counters (none
    /// included), the system message's seq, the window start; nothing is deleted on the way.
    #[tokio::test]
    async fn a_restore_in_two_commits_rebuilds_the_state() {
        let store = InMemoryStore::new();
        let id = ConversationId::new("restored").unwrap();
        let legacy = StoredMessage::new(12, 9, Message::assistant("no counter recorded"));
        let system = StoredMessage::new(5, 7, Message::system("rules")).counted_by("cl100k_base");
        let first = Commit::restore(10)
            .append_stored(stored(10, "u10"))
            .append_stored(stored(11, "u11"))
            .retention(Retention::KeepHistory)
            .build()
            .unwrap();
        let second = first
            .then()
            .append_stored(legacy.clone())
            .system_stored(system.clone())
            .window_start(11)
            .build()
            .unwrap();
        assert_eq!(store.commit(&id, first).await.unwrap(), 1);
        assert_eq!(store.commit(&id, second).await.unwrap(), 2);

        let loaded = store.load(&id).await.unwrap();
        assert_eq!((loaded.version, loaded.window_start, loaded.next_seq), (2, 11, 13));
        assert_eq!(loaded.system, Some(system));
        assert_eq!(loaded.messages, [stored(11, "u11"), legacy.clone()]);
        let all = store.history(&id, 0, 10).await.unwrap();
        assert_eq!(all, [stored(10, "u10"), stored(11, "u11"), legacy]);
    }

    #[test]
    fn a_stored_message_out_of_sequence_fails_the_build() {
        let gap = Commit::restore(1)
            .append_stored(stored(1, "u1"))
            .append_stored(stored(3, "u3"))
            .build()
            .unwrap_err();
        assert_eq!(gap.kind(), StoreErrorKind::InvalidInput);
        assert!(
            gap.to_string().contains("message seq 3 is not the next sequence 2"),
            "{gap}"
        );
        // The window start of a restore may lie below its first message, never past the end.
        assert!(Commit::restore(5).window_start(1).build().is_ok());
        assert!(Commit::restore(5).window_start(6).build().is_err());
    }
}
