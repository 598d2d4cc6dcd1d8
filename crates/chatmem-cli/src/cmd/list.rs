//! `chatmem list`: the conversation ids, one per line, read a page at a time. Reads an
//! existing store; creates nothing.

use std::io::Write;

use anyhow::Context;
use chatmem::ChatMemory;

use crate::args::StoreArgs;
use crate::stores::Access;

/// Ids per `list` page.
const PAGE: usize = 1000;

/// Runs `chatmem list`.
pub(crate) async fn run(args: StoreArgs) -> anyhow::Result<()> {
    let memory = ChatMemory::new(args.open(Access::Read).await?);
    let mut out = std::io::stdout().lock();
    let mut after = None;
    loop {
        let page = memory.list(after.as_ref(), PAGE).await?;
        for id in &page.ids {
            writeln!(out, "{id}").context("writing to stdout")?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}
