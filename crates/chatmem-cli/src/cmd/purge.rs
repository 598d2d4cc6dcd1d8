//! `chatmem purge`: deletes the expired conversations now and prints how many.

use chatmem::ChatMemory;

use crate::args::StoreArgs;
use crate::stdio::write_line;
use crate::stores::Access;

/// Runs `chatmem purge`.
pub(crate) async fn run(args: StoreArgs) -> anyhow::Result<()> {
    let memory = ChatMemory::new(args.open(Access::Delete).await?);
    let purged = memory.purge_expired().await?;
    write_line(purged)
}
