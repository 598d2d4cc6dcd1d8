//! `chatmem clear`: deletes a conversation.

use crate::args::ConversationArgs;
use crate::stores::Access;

/// Runs `chatmem clear`.
pub(crate) async fn run(args: ConversationArgs) -> anyhow::Result<()> {
    let (memory, id) = args.memory(Access::Delete).await?;
    if !memory.clear(&id).await? {
        eprintln!("chatmem: no conversation {:?} (nothing to clear)", id.as_str());
    }
    Ok(())
}
