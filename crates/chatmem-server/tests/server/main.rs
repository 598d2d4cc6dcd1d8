//! The server's tests, one binary: the REST API, the OpenAI door, the inspector (in a page and
//! in headless Chromium), recall, metrics and OpenAPI, the web-page rules, bounded reads, summaries and
//! the fuzz target's check.
//!
//! Two suites stay binaries of their own, for process isolation: `logs.rs` sets a tracing
//! subscriber and reads what it captured (tracing's callsite interest cache is process-wide, so
//! other tests' spans would change what it sees), and `slow_clients.rs` holds the production
//! listener to timing bounds that a busy binary running other tests beside it could break.

mod inspector;

mod bounded_reads;
mod clearing;
mod completions;
mod facts;
mod fuzz_smoke;
mod http;
mod observability;
mod openapi;
mod prompt;
mod recall;
mod summaries;
mod ui;
mod ui_browser;
mod ui_facts;
mod web_pages;
