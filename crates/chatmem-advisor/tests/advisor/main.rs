//! The advisor's tests, one binary: its turns with the real `chatmem-openai` client against a
//! loopback upstream, what a turn tokenizes, and the after-sale scenario against the real
//! DeepSeek API and the real facts extraction prompt (only with `DEEPSEEK_API_KEY`).

mod counting;
mod live_deepseek;
mod live_deepseek_facts;
mod turns;
