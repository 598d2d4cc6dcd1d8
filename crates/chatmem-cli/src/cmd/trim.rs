//! `chatmem trim`: a JSON array of messages on stdin, the window a policy keeps of it on
//! stdout. No store: an in-memory one, dropped at the end.

use chatmem::{ChatMemory, ConversationId, InMemoryStore};

use crate::args::TrimArgs;
use crate::stdio::{print_json, read_messages};

/// Runs `chatmem trim`.
pub(crate) async fn run(args: TrimArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let (policy, counter) = args.policy.build()?;
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(policy)
        .counter(counter)
        .build()?;
    let id = ConversationId::new("trim")?;
    memory.add(&id, messages).await?;
    print_json(&memory.get(&id).await?)
}
