//! Token counting: the [`TokenCounter`] trait, exact OpenAI tokenizers and a cheap heuristic,
//! by the formula [`tokens`](crate::tokens) gives; and the names of counters stored with
//! counts ([`CounterName`], [`UNCOUNTED`]).
//!
//! Counts are computed once, when a message is added to memory, and stored beside it, so a
//! turn tokenizes only its new messages.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use crate::message::{Body, Content, ContentPart, Message};
use crate::tokens::{PER_IMAGE, PER_LIST, PER_MESSAGE, PER_NAME};

mod memo;
mod pieces;

pub(crate) use memo::{Memo, TextCounts};

use pieces::Vocabulary;

/// `cl100k_base`'s vocabulary, made on first use.
static CL100K: LazyLock<Vocabulary> = LazyLock::new(|| Vocabulary::new(bpe_openai::cl100k_base()));
/// `o200k_base`'s vocabulary, made on first use.
static O200K: LazyLock<Vocabulary> = LazyLock::new(|| Vocabulary::new(bpe_openai::o200k_base()));

/// The counter name stored with a message that was not counted: a memory whose window counts
/// messages, not tokens, does not tokenize what it adds (its count is stored as 0). A memory
/// with a token window recounts such a message when it loads it, as it would a message
/// counted by another tokenizer.
///
/// ```
/// use chatmem::{ChatMemory, ConversationId, Message, WindowPolicy};
/// use chatmem::store::UNCOUNTED;
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = ChatMemory::builder(chatmem::InMemoryStore::new()).policy(WindowPolicy::messages(6)).build()?;
/// let id = ConversationId::new("c1")?;
/// memory.add(&id, [Message::user("hi")]).await?;
/// let loaded = memory.load(&id).await?;
/// let stored = &loaded.snapshot().messages[0];
/// assert_eq!((stored.tokens, stored.counted_by.as_deref()), (0, Some(UNCOUNTED)));
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
pub const UNCOUNTED: &str = "uncounted";
/// The name of the counter that made a stored token count ([`StoredMessage::counted_by`]):
/// a string that is free to copy.
///
/// Every stored message carries one, and a load hands a whole window of them out, so the
/// names chatmem's own counters use ([`Cl100k`], [`O200k`], [`Heuristic`], [`UNCOUNTED`])
/// are held as `&'static str` (copying one touches no reference count, unlike an `Arc`
/// shared by every message); any other name is shared behind an `Arc<str>`. Either way it
/// reads as a `str`.
///
/// ```
/// use chatmem::store::CounterName;
/// let name = CounterName::from("cl100k_base");
/// assert_eq!(&*name, "cl100k_base");
/// assert_eq!(name, CounterName::from(String::from("cl100k_base")));
/// let custom = CounterName::from("words");
/// assert_eq!(Some(custom).as_deref(), Some("words"));
/// ```
///
/// [`StoredMessage::counted_by`]: crate::store::StoredMessage::counted_by
#[derive(Clone)]
pub struct CounterName(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Known(&'static str),
    Other(Arc<str>),
}

const CL100K_BASE: &str = "cl100k_base";
const O200K_BASE: &str = "o200k_base";
const HEURISTIC: &str = "heuristic";
/// The names [`CounterName`] holds without a reference count: chatmem's own counters'.
const KNOWN_NAMES: [&str; 4] = [CL100K_BASE, O200K_BASE, HEURISTIC, UNCOUNTED];

impl CounterName {
    fn known(name: &str) -> Option<Self> {
        KNOWN_NAMES
            .iter()
            .find(|known| **known == name)
            .map(|known| Self(NameRepr::Known(known)))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            NameRepr::Known(s) => s,
            NameRepr::Other(s) => s,
        }
    }
}

impl std::ops::Deref for CounterName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for CounterName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for CounterName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for CounterName {
    fn from(name: &str) -> Self {
        Self::known(name).unwrap_or_else(|| Self(NameRepr::Other(Arc::from(name))))
    }
}

impl From<String> for CounterName {
    fn from(name: String) -> Self {
        Self::known(&name).unwrap_or_else(|| Self(NameRepr::Other(Arc::from(name))))
    }
}

impl From<std::borrow::Cow<'_, str>> for CounterName {
    fn from(name: std::borrow::Cow<'_, str>) -> Self {
        match name {
            std::borrow::Cow::Borrowed(name) => Self::from(name),
            std::borrow::Cow::Owned(name) => Self::from(name),
        }
    }
}

impl From<Arc<str>> for CounterName {
    fn from(name: Arc<str>) -> Self {
        Self::known(&name).unwrap_or(Self(NameRepr::Other(name)))
    }
}

impl PartialEq for CounterName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for CounterName {}

impl PartialEq<str> for CounterName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CounterName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::hash::Hash for CounterName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for CounterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for CounterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counts tokens of text, and of messages by one formula: a message costs [`PER_MESSAGE`]
/// plus the tokens of its role, its content text (each image part [`PER_IMAGE`]), its name
/// plus [`PER_NAME`], its `tool_call_id`, and each tool call's name and arguments; reasoning
/// text and metadata are never sent and cost nothing. A list costs [`PER_LIST`] more.
///
/// Only [`count_text`](TokenCounter::count_text) and [`name`](TokenCounter::name) are
/// required.
///
/// ```
/// use chatmem::{Message, TokenCounter};
///
/// #[derive(Debug)]
/// struct Words;
/// impl TokenCounter for Words {
///     fn name(&self) -> &str { "words" }
///     fn count_text(&self, text: &str) -> usize { text.split_whitespace().count() }
/// }
/// // 3 per message + "user" (1) + "hello there" (2)
/// assert_eq!(Words.count_message(&Message::user("hello there")), 6);
/// ```
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// A short name (`cl100k_base`, `heuristic`, ...).
    fn name(&self) -> &str;

    /// Tokens of one string.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens of one message, by the formula in the trait docs.
    fn count_message(&self, message: &Message) -> usize {
        let mut n = PER_MESSAGE + self.count_text(message.role().as_str());
        if let Some(name) = &message.name {
            n += self.count_text(name) + PER_NAME;
        }
        let count_content = |content: &Content| match content {
            Content::Text(t) => self.count_text(t),
            Content::Parts(parts) => parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text(t) | ContentPart::Refusal(t) => self.count_text(t),
                    ContentPart::ImageUrl(_) => PER_IMAGE,
                    ContentPart::Other(_) => 0,
                })
                .sum(),
        };
        match &message.body {
            Body::System { content } | Body::Developer { content } | Body::User { content } => {
                n += count_content(content)
            }
            Body::Assistant {
                content, tool_calls, ..
            } => {
                if let Some(c) = content {
                    n += count_content(c);
                }
                for call in tool_calls {
                    n += self.count_text(&call.name) + self.count_text(&call.arguments);
                }
            }
            Body::Tool {
                tool_call_id, content, ..
            } => {
                n += self.count_text(tool_call_id) + count_content(content);
            }
        }
        n
    }

    /// Tokens of a whole list (owned messages or shared ones, as a prompt holds them): the
    /// messages plus [`PER_LIST`].
    fn count_messages<M: Borrow<Message>>(&self, messages: &[M]) -> usize
    where
        Self: Sized,
    {
        PER_LIST + messages.iter().map(|m| self.count_message(m.borrow())).sum::<usize>()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn count_text(&self, text: &str) -> usize {
        (**self).count_text(text)
    }
    fn count_message(&self, message: &Message) -> usize {
        (**self).count_message(message)
    }
}

/// A fast estimate that needs no tables: one token per 4 ASCII bytes (rounded up) plus one
/// token per non-ASCII character (CJK text runs close to one token per character).
///
/// ```
/// use chatmem::{Heuristic, TokenCounter};
/// assert_eq!(Heuristic.count_text("abcdefgh"), 2);
/// assert_eq!(Heuristic.count_text("那单能退吗"), 5);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Heuristic;

impl TokenCounter for Heuristic {
    fn name(&self) -> &str {
        HEURISTIC
    }
    fn count_text(&self, text: &str) -> usize {
        let ascii = text.bytes().filter(u8::is_ascii).count();
        let other = text.chars().filter(|c| !c.is_ascii()).count();
        ascii.div_ceil(4) + other
    }
}

/// OpenAI's `cl100k_base` encoding (GPT-4, GPT-3.5, DeepSeek-compatible estimates), exact.
///
/// The tables load once per process, on first use (about 20 ms, plus about 2 ms for the set of
/// its tokens that counting reads).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cl100k;

impl TokenCounter for Cl100k {
    fn name(&self) -> &str {
        CL100K_BASE
    }
    fn count_text(&self, text: &str) -> usize {
        // bpe-openai's encoder on our own split (see `pieces`): the same count, faster.
        pieces::pieces(text).map(|p| CL100K.count_piece(p)).sum()
    }
}

/// OpenAI's `o200k_base` encoding (GPT-4o and later), exact.
#[derive(Debug, Clone, Copy, Default)]
pub struct O200k;

impl TokenCounter for O200k {
    fn name(&self) -> &str {
        O200K_BASE
    }
    fn count_text(&self, text: &str) -> usize {
        O200K.count_split(text)
    }
}

/// The built-in counters by name, for configuration: each is named by its short name
/// (`cl100k`, `o200k`, `heuristic`, what [`Display`](fmt::Display) and serde write) or by its
/// counter's name (`cl100k_base`, `o200k_base`), and nothing else.
///
/// ```
/// use chatmem::Tokenizer;
/// let t: Tokenizer = "o200k".parse()?;
/// assert_eq!(t.counter().name(), "o200k_base");
/// assert_eq!("o200k_base".parse::<Tokenizer>()?, t);
/// assert_eq!(t.to_string(), "o200k");
/// assert!("gpt2".parse::<Tokenizer>().unwrap_err().to_string().contains("expected cl100k"));
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Tokenizer {
    /// [`Cl100k`].
    #[default]
    Cl100k,
    /// [`O200k`].
    O200k,
    /// [`Heuristic`].
    Heuristic,
}

impl Tokenizer {
    /// Every tokenizer, in the order error messages list them.
    pub(crate) const ALL: [Tokenizer; 3] = [Tokenizer::Cl100k, Tokenizer::O200k, Tokenizer::Heuristic];

    /// A shared counter of this kind.
    pub fn counter(self) -> Arc<dyn TokenCounter> {
        match self {
            Tokenizer::Cl100k => Arc::new(Cl100k),
            Tokenizer::O200k => Arc::new(O200k),
            Tokenizer::Heuristic => Arc::new(Heuristic),
        }
    }

    /// The short name, the one written.
    pub const fn name(self) -> &'static str {
        match self {
            Tokenizer::Cl100k => "cl100k",
            Tokenizer::O200k => "o200k",
            Tokenizer::Heuristic => HEURISTIC,
        }
    }

    /// The counter's name ([`TokenCounter::name`]), also accepted when parsing.
    const fn counter_name(self) -> &'static str {
        match self {
            Tokenizer::Cl100k => CL100K_BASE,
            Tokenizer::O200k => O200K_BASE,
            Tokenizer::Heuristic => HEURISTIC,
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tokenizer {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| s == t.name() || s == t.counter_name())
            .ok_or_else(|| {
                let names = Self::ALL.map(|t| match (t.name(), t.counter_name()) {
                    (name, counter) if name == counter => name.to_owned(),
                    (name, counter) => format!("{name} (or {counter})"),
                });
                crate::policy::unknown_name("tokenizer", s, &names)
            })
    }
}

crate::policy::serde_by_name!(Tokenizer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_counters_names_are_held_without_a_reference_count() {
        for counter in [Tokenizer::Cl100k, Tokenizer::O200k, Tokenizer::Heuristic].map(Tokenizer::counter) {
            let name = CounterName::from(counter.name());
            assert!(matches!(name.0, NameRepr::Known(_)), "{name:?}");
            assert_eq!(name, *counter.name());
        }
        assert!(matches!(CounterName::from(UNCOUNTED).0, NameRepr::Known(_)));
        let custom = CounterName::from(String::from("words"));
        assert!(matches!(custom.0, NameRepr::Other(_)));
        assert_eq!(custom, CounterName::from(Arc::<str>::from("words")));
        assert_ne!(custom, CounterName::from("cl100k_base"));
        assert_eq!(format!("{custom} {custom:?}"), "words \"words\"");
    }
    use crate::message::{ImageUrl, ToolCall};

    #[test]
    fn exact_tokenizers_match_known_counts() {
        // Reference counts from OpenAI's tiktoken.
        assert_eq!(Cl100k.count_text("hello world"), 2);
        assert_eq!(Cl100k.count_text("tiktoken is great!"), 6);
        assert_eq!(O200k.count_text("hello world"), 2);
        assert_eq!(Cl100k.count_text(""), 0);
    }

    #[test]
    fn formula_counts_every_string() {
        let h = Heuristic;
        // 3 + role "user"(1) + "abcd"(1) + name "bob"(1) + 1
        assert_eq!(h.count_message(&Message::user("abcd").with_name("bob")), 7);
        // 3 + "assistant"(3) + name "f"(1) + args "{}"(1)
        let call = Message::assistant_tool_calls(vec![ToolCall::new("id", "f", "{}")]);
        assert_eq!(h.count_message(&call), 8);
        // 3 + "tool"(1) + id "call"(1) + "ok"(1)
        assert_eq!(h.count_message(&Message::tool_result("call", "ok")), 6);
        // 3 + "user"(1) + "hi"(1) + image 85 + other part 0
        let parts = Message::user_parts(vec![
            ContentPart::Text("hi".into()),
            ContentPart::ImageUrl(ImageUrl {
                url: "https://example.com/a-long-url.png".into(),
                detail: None,
            }),
            ContentPart::Other(serde_json::Map::new()),
        ]);
        assert_eq!(h.count_message(&parts), 90);
        // reasoning text is free
        let mut m = Message::assistant("ok");
        if let Body::Assistant { reasoning_content, .. } = &mut m.body {
            *reasoning_content = Some("a very long chain of thought".repeat(10));
        }
        assert_eq!(h.count_message(&m), 3 + 3 + 1);
        assert_eq!(h.count_messages(&[m.clone(), m]), 3 + 7 + 7);
    }

    #[test]
    fn tokenizer_names_parse() {
        assert_eq!("cl100k_base".parse::<Tokenizer>().unwrap(), Tokenizer::Cl100k);
        assert_eq!("heuristic".parse::<Tokenizer>().unwrap(), Tokenizer::Heuristic);
        assert!("gpt2".parse::<Tokenizer>().unwrap_err().to_string().contains("gpt2"));
    }
}
