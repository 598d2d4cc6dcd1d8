//! The progress line of `export` and `import`: drawn on stderr when it is a terminal, hidden
//! otherwise (a pipe or a log gets nothing).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Counts conversations and messages done, on one line of stderr.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
    verb: &'static str,
    conversations: u64,
    messages: u64,
}

impl Progress {
    /// A progress line for `verb` ("exported", "imported").
    pub(crate) fn new(verb: &'static str) -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(120));
        let progress = Self {
            bar,
            verb,
            conversations: 0,
            messages: 0,
        };
        progress.draw();
        progress
    }

    /// `messages` more messages done.
    pub(crate) fn messages(&mut self, messages: u64) {
        self.messages += messages;
        self.draw();
    }

    /// One more conversation done.
    pub(crate) fn conversation(&mut self) {
        self.conversations += 1;
        self.draw();
    }

    fn draw(&self) {
        self.bar.set_message(format!(
            "{} {} conversation(s), {} message(s)",
            self.verb, self.conversations, self.messages
        ));
    }

    /// Leaves the final count on the terminal.
    pub(crate) fn finish(self) {
        self.bar.finish();
    }
}
