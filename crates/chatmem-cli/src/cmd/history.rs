//! `chatmem history`: everything stored for a conversation as a JSON array. Reads an existing
//! store; creates nothing.

use crate::args::ConversationArgs;
use crate::stdio::print_json;
use crate::stores::Access;

/// Runs `chatmem history`.
pub(crate) async fn run(args: ConversationArgs) -> anyhow::Result<()> {
    let (memory, id) = args.memory(Access::Read).await?;
    print_json(&memory.history(&id).await?)
}
