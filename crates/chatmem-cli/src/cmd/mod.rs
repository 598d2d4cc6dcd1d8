//! One module per `chatmem` command, each with a `run` that takes the command's parsed
//! arguments (see [`crate::args`]) and does the whole command.

pub(crate) mod add;
pub(crate) mod chat;
pub(crate) mod clear;
pub(crate) mod count;
pub(crate) mod export;
pub(crate) mod facts;
pub(crate) mod get;
pub(crate) mod history;
pub(crate) mod import;
pub(crate) mod list;
pub(crate) mod purge;
pub(crate) mod recall;
pub(crate) mod reindex;
pub(crate) mod serve;
pub(crate) mod trim;
