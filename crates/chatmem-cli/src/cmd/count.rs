//! `chatmem count`: the token count of a JSON array of messages on stdin.

use chatmem::TokenCounter;

use crate::args::CountArgs;
use crate::stdio::{read_messages, write_line};

/// Runs `chatmem count`.
pub(crate) fn run(args: CountArgs) -> anyhow::Result<()> {
    let messages = read_messages()?;
    let counter = args.tokenizer.counter();
    write_line(counter.count_messages(&messages))
}
