//! `chatmem get`: a conversation's window, system message first, as a JSON array. Reads an
//! existing store; creates nothing.

use crate::args::MemoryArgs;
use crate::stdio::print_json;
use crate::stores::Access;

/// Runs `chatmem get`.
pub(crate) async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let (memory, id) = args.memory(Access::Read).await?;
    print_json(&memory.get(&id).await?)
}
