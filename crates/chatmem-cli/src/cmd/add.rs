//! `chatmem add`: a JSON array of messages on stdin added to a conversation as one atomic
//! batch (the store is created if missing).

use crate::args::MemoryArgs;
use crate::stdio::read_messages;
use crate::stores::Access;

/// Runs `chatmem add`.
pub(crate) async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let (memory, id) = args.memory(Access::Write).await?;
    memory.add(&id, messages).await?;
    crate::recall::settle(&memory).await;
    Ok(())
}
