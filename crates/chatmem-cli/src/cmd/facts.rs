//! `chatmem facts`: a user's facts by hand — list, add, edit, pin, unpin, rm, history,
//! forget — on the store the other commands take, as JSON. Each change is
//! [`ChatMemory`]'s own (`add_fact` and its siblings), so the facts' rules and bounds are the
//! ones a server keeps.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use chatmem::facts::{Fact, FactEdit, FactKey};
use chatmem::{ChatMemory, Store, UserId};
use chatmem_server::{FactBody, FactsBody, HistoryBody, Tenant};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::args::StoreArgs;
use crate::stdio::print_json;
use crate::stores::Access;

/// `chatmem facts`: which change, then whose facts and where.
#[derive(Args, Debug)]
pub(crate) struct FactsCommand {
    #[command(subcommand)]
    action: FactsAction,
}

#[derive(Subcommand, Debug)]
enum FactsAction {
    /// Print the user's facts and their version as JSON.
    List(UserArgs),
    /// Add a fact (a key supersedes the current fact with it; the same text confirms the fact
    /// that says it) and print it.
    Add {
        #[command(flatten)]
        user: UserArgs,
        /// What it is about, dotted lowercase words (home.city).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// The fact, one line (several words are joined with spaces).
        #[arg(value_name = "TEXT", required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Change a fact's text or key and print it.
    Edit {
        #[command(flatten)]
        user: UserArgs,
        /// The fact's id.
        #[arg(value_name = "FACT")]
        fact: u64,
        /// Its new text.
        #[arg(long, value_name = "TEXT")]
        text: Option<String>,
        /// Its new key (an empty one removes it).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
    },
    /// Pin a fact (it never leaves by the bounds and is sent first) and print it.
    Pin(FactArgs),
    /// Unpin a fact and print it.
    Unpin(FactArgs),
    /// Delete a fact, with the facts it superseded and every one's history; print the ids
    /// deleted.
    Rm(FactArgs),
    /// Print what happened to a fact, oldest first, as JSON.
    History(FactArgs),
    /// Delete everything kept of the user's facts (their conversations stay).
    Forget(UserArgs),
}

/// Whose facts, in which store.
#[derive(Args, Debug)]
struct UserArgs {
    /// The user id.
    #[arg(long, value_name = "U")]
    user: String,
    #[command(flatten)]
    store: StoreArgs,
}

/// One fact of a user.
#[derive(Args, Debug)]
struct FactArgs {
    #[command(flatten)]
    user: UserArgs,
    /// The fact's id.
    #[arg(value_name = "FACT")]
    fact: u64,
}

impl UserArgs {
    /// The user and a memory over the store, opened for `access`, which must keep facts.
    async fn open(&self, access: Access) -> Result<(ChatMemory<Arc<dyn Store>>, UserId)> {
        let user = UserId::new(self.user.as_str()).context("--user")?;
        let store = self.store.open(access).await?;
        check_store(store.as_ref())?;
        Ok((ChatMemory::new(store), user))
    }
}

/// Refuses a store that keeps no facts, in one line.
pub(crate) fn check_store(store: &dyn Store) -> Result<()> {
    if !store.keeps_facts() {
        bail!("facts need a store that keeps them, and this store does not");
    }
    Ok(())
}

/// What `facts rm` prints.
#[derive(Debug, Serialize)]
struct Deleted {
    /// The fact and the facts it superseded, ascending.
    deleted: Vec<u64>,
}

/// `KEY` as a fact key, the flag named in its error.
fn key(key: &str) -> Result<FactKey> {
    FactKey::new(key).context("--key")
}

/// Runs `chatmem facts`.
pub(crate) async fn run(command: FactsCommand) -> Result<()> {
    match command.action {
        FactsAction::List(args) => {
            let (memory, user) = args.open(Access::Read).await?;
            let facts = memory.facts(&user).await?;
            print_json(&FactsBody::of(&facts, &Tenant::open()))
        }
        FactsAction::Add { user, key: k, text } => {
            let k = k.as_deref().map(key).transpose()?;
            let (memory, user) = user.open(Access::Write).await?;
            let fact = memory.add_fact(&user, &text.join(" "), k).await?;
            print_json(&fact_json(&fact))
        }
        FactsAction::Edit {
            user,
            fact,
            text,
            key: k,
        } => {
            if text.is_none() && k.is_none() {
                bail!("nothing to change: give --text, --key or both");
            }
            let k = match k.as_deref() {
                None => None,
                Some("") => Some(None),
                Some(k) => Some(Some(key(k)?)),
            };
            let (memory, user) = user.open(Access::Write).await?;
            let fact = memory.edit_fact(&user, fact, FactEdit { text, key: k }).await?;
            print_json(&fact_json(&fact))
        }
        FactsAction::Pin(args) => pin(args, true).await,
        FactsAction::Unpin(args) => pin(args, false).await,
        FactsAction::Rm(args) => {
            let (memory, user) = args.user.open(Access::Delete).await?;
            let deleted = memory.delete_fact(&user, args.fact).await?;
            print_json(&Deleted { deleted })
        }
        FactsAction::History(args) => {
            let (memory, user) = args.user.open(Access::Read).await?;
            let history = memory.fact_history(&user, args.fact).await?;
            if history.is_empty() && memory.facts(&user).await?.set.get(args.fact).is_none() {
                bail!(
                    "user {:?} has no fact {} (none kept, none in history)",
                    user.as_str(),
                    args.fact
                );
            }
            print_json(&HistoryBody::of(&history, &Tenant::open()))
        }
        FactsAction::Forget(args) => {
            let (memory, user) = args.open(Access::Delete).await?;
            if !memory.forget_user(&user).await? {
                eprintln!(
                    "chatmem: no facts kept for user {:?} (nothing to forget)",
                    user.as_str()
                );
            }
            Ok(())
        }
    }
}

/// A fact as the server's users routes answer it: one shape for both, the store's ids as
/// they are (no tenant).
fn fact_json(fact: &Fact) -> FactBody {
    FactBody::of(fact, &Tenant::open())
}

async fn pin(args: FactArgs, pinned: bool) -> Result<()> {
    let (memory, user) = args.user.open(Access::Write).await?;
    let fact = memory.pin_fact(&user, args.fact, pinned).await?;
    print_json(&fact_json(&fact))
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use chatmem::store::{Commit, RecentPage, RecentQuery, Snapshot, StoreError, StoredMessage};
    use chatmem::{ConversationId, InMemoryStore, Page};

    use super::*;

    /// A store that keeps conversations only: the facts calls are the trait's defaults.
    #[derive(Debug, Default)]
    struct NoFacts {
        inner: InMemoryStore,
    }

    #[async_trait]
    impl Store for NoFacts {
        async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
            self.inner.load(id).await
        }
        async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
            self.inner.commit(id, commit).await
        }
        async fn history(
            &self,
            id: &ConversationId,
            after: u64,
            limit: usize,
        ) -> Result<Vec<StoredMessage>, StoreError> {
            self.inner.history(id, after, limit).await
        }
        async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
            self.inner.clear(id).await
        }
        async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
            self.inner.list(after, limit).await
        }
        async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
            self.inner.recent(query).await
        }
    }

    #[test]
    fn a_store_without_facts_is_refused_in_one_line() {
        let e = check_store(&NoFacts::default()).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "facts need a store that keeps them, and this store does not"
        );
        assert!(check_store(&InMemoryStore::new()).is_ok());
    }
}
