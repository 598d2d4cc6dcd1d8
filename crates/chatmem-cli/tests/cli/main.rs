//! The `chatmem` binary run as a user would, in one test binary: the commands (stdin in, stdout
//! and exit code out), which store a command opens, export and import, `chatmem chat` against a
//! loopback upstream, `--recall` and `chatmem recall`, `chatmem facts` and `chat --user`, `chatmem serve` as a process (its logs,
//! the Python example), the three OpenAI clients through it, and the Python and TypeScript
//! packages' own suites against it.
//!
//! The tests that need a database server or a program are ignored without its variable (see
//! `chatmem_test::required_env`). The load smoke is `tests/load.rs`, a binary of its own.

mod chat;
mod clients;
mod commands;
mod embeddings;
mod facts;
mod opening;
mod python_package;
mod recall;
mod serve;
mod serve_logs;
mod support;
mod transfer;
mod typescript_package;
