//! Facts through `ChatMemory` over the in-memory store: where a turn's prompt carries them, in
//! which bytes, within which budget, what is never stored, and the changes by hand.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::facts::{FACTS_HEADING, FactEdit, FactError, FactKey, FactLimits, Facts, RenderedFacts};
use chatmem::recall::RECALL_HEADING;
use chatmem::store::{
    Commit, FactsCommit, RecentPage, RecentQuery, Snapshot, StoreError, StoreErrorKind, StoredFacts, StoredMessage,
};
use chatmem::{
    ChatMemory, ConversationId, Error, Heuristic, InMemoryStore, Message, Page, Recall, Store, TokenCounter, UserId,
    WindowPolicy,
};
use chatmem_test::FailingStore;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

fn id(s: &str) -> ConversationId {
    ConversationId::new(s).unwrap()
}

fn user(s: &str) -> UserId {
    UserId::new(s).unwrap()
}

fn with_facts(policy: WindowPolicy) -> ChatMemory {
    ChatMemory::builder(InMemoryStore::new())
        .policy(policy)
        .facts(Facts::new())
        .build()
        .expect("a memory")
}

fn texts(prompt: &[&Message]) -> Vec<String> {
    prompt
        .iter()
        .map(|m| m.text().unwrap_or_default().into_owned())
        .collect()
}

/// The prompt as it is sent: its JSON.
fn bytes(prompt: &[&Message]) -> String {
    serde_json::to_string(prompt).unwrap()
}

async fn seed(memory: &ChatMemory, c: &ConversationId) {
    memory
        .add(
            c,
            [
                Message::system("You are a shop's assistant."),
                Message::user("Hello"),
                Message::assistant("Hi, how can I help?"),
            ],
        )
        .await
        .unwrap();
}

#[test]
fn the_facts_go_right_after_the_system_message_and_are_never_stored() {
    rt().block_on(async {
        let memory = with_facts(WindowPolicy::messages(10));
        let plain = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(10))
            .build()
            .unwrap();
        let (c, ada) = (id("c1"), user("ada"));
        memory.add_fact(&ada, "Allergic to nuts", None).await.unwrap();
        memory
            .add_fact(&ada, "Lives in Berlin", Some(FactKey::new("home.city").unwrap()))
            .await
            .unwrap();
        for m in [&memory, &plain] {
            seed(m, &c).await;
        }

        let mut turn = memory.begin_as(&c, &ada).await.unwrap();
        assert_eq!(turn.user(), Some(&ada));
        assert_eq!(turn.loaded_facts().map(|f| (f.set.len(), f.version)), Some((2, 2)));
        turn.push(Message::user("Any dessert without nuts?"));
        let t = texts(&turn.prompt());
        assert_eq!(
            t,
            [
                "You are a shop's assistant.".to_owned(),
                format!("{FACTS_HEADING}\n- Lives in Berlin\n- Allergic to nuts"),
                "Hello".into(),
                "Hi, how can I help?".into(),
                "Any dessert without nuts?".into(),
            ]
        );
        let facts = turn.facts().expect("facts sent").clone();
        assert_eq!(facts.included, [2, 1]);
        assert_eq!(turn.prompt()[1].role(), chatmem::Role::User);
        // The system message stays the only system message, first.
        assert_eq!(turn.prompt().iter().filter(|m| m.is_system()).count(), 1);
        turn.push(Message::assistant("Try the lemon tart."));
        turn.commit().await.unwrap();

        // The same turn without facts, on another memory: the same history, message for message.
        let mut turn = plain.begin(&c).await.unwrap();
        turn.extend([
            Message::user("Any dessert without nuts?"),
            Message::assistant("Try the lemon tart."),
        ]);
        turn.commit().await.unwrap();
        let stored = memory.history(&c).await.unwrap();
        assert_eq!(stored, plain.history(&c).await.unwrap());
        assert!(
            stored
                .iter()
                .all(|m| !m.text().unwrap_or_default().contains(FACTS_HEADING)),
            "{stored:?}"
        );
        assert_eq!(memory.get(&c).await.unwrap(), plain.get(&c).await.unwrap());
    });
}

#[test]
fn without_facts_to_send_the_prompt_is_byte_for_byte_the_prompt_of_begin() {
    rt().block_on(async {
        let c = id("c1");
        // Facts on, a user with none.
        let memory = with_facts(WindowPolicy::tokens(200));
        seed(&memory, &c).await;
        let nobody = user("nobody");
        let mut as_user = memory.begin_as(&c, &nobody).await.unwrap();
        let mut plain = memory.begin(&c).await.unwrap();
        for turn in [&mut as_user, &mut plain] {
            turn.extend([Message::system("You are a shop's assistant, v2."), Message::user("Hi")]);
        }
        assert!(as_user.facts().is_none());
        assert_eq!(bytes(&as_user.prompt()), bytes(&plain.prompt()));

        // Facts off: begin_as loads no facts (the store need not keep any) and sends none.
        let off = ChatMemory::builder(FailingStore::without_facts())
            .policy(WindowPolicy::messages(10))
            .build()
            .unwrap();
        off.add(&c, [Message::user("Hello"), Message::assistant("Hi")])
            .await
            .unwrap();
        let ada = user("ada");
        let mut as_user = off.begin_as(&c, &ada).await.unwrap();
        assert_eq!(
            (as_user.user(), as_user.facts(), as_user.loaded_facts()),
            (Some(&ada), None, None)
        );
        let mut plain = off.begin(&c).await.unwrap();
        as_user.push(Message::user("Again"));
        plain.push(Message::user("Again"));
        assert_eq!(bytes(&as_user.prompt()), bytes(&plain.prompt()));
        // Facts are kept by the memory's store whatever the turn: a store without them says so.
        let e = off.add_fact(&ada, "Allergic to nuts", None).await.unwrap_err();
        assert!(matches!(&e, Error::Facts { user, .. } if user == &ada), "{e}");
        assert_eq!(
            e.store_error().map(StoreError::kind),
            Some(StoreErrorKind::InvalidInput)
        );
    });
}

#[test]
fn an_unchanged_set_is_the_same_bytes_every_turn_and_only_a_change_changes_them() {
    rt().block_on(async {
        let memory = with_facts(WindowPolicy::messages(6));
        let (c, ada) = (id("c1"), user("ada"));
        let nuts = memory.add_fact(&ada, "Allergic to nuts", None).await.unwrap();
        memory.add_fact(&ada, "Prefers email", None).await.unwrap();
        seed(&memory, &c).await;

        async fn turn_prompt(memory: &ChatMemory, c: &ConversationId, u: &UserId, said: &str) -> Vec<Message> {
            let mut turn = memory.begin_as(c, u).await.unwrap();
            turn.push(Message::user(said));
            let prompt: Vec<Message> = turn.prompt().into_iter().cloned().collect();
            turn.push(Message::assistant(format!("answer to {said}")));
            turn.commit().await.unwrap();
            prompt
        }
        let first = turn_prompt(&memory, &c, &ada, "u1").await;
        let second = turn_prompt(&memory, &c, &ada, "u2").await;
        // The conversation moved on; the prefix (system, facts) did not.
        assert_ne!(first, second);
        assert_eq!(
            serde_json::to_string(&first[..2]).unwrap(),
            serde_json::to_string(&second[..2]).unwrap()
        );
        // The same text said again confirms the fact: nothing the prompt shows changes.
        memory.add_fact(&ada, "allergic to nuts.", None).await.unwrap();
        let confirmed = turn_prompt(&memory, &c, &ada, "u3").await;
        assert_eq!(confirmed[..2], first[..2]);
        // An edit changes the facts message, and only it.
        memory
            .edit_fact(
                &ada,
                nuts.id,
                FactEdit {
                    text: Some("Allergic to peanuts".into()),
                    ..FactEdit::default()
                },
            )
            .await
            .unwrap();
        let edited = turn_prompt(&memory, &c, &ada, "u4").await;
        assert_eq!(edited[0], first[0]);
        assert_eq!(
            edited[1].text().unwrap(),
            format!("{FACTS_HEADING}\n- Allergic to peanuts\n- Prefers email")
        );
    });
}

#[test]
fn under_a_token_window_the_prompt_with_facts_never_passes_the_budget() {
    rt().block_on(async {
        let counter = Heuristic;
        let ada = user("ada");
        let texts: Vec<String> = (0..12)
            .map(|i| format!("Fact number {i}: {}", "likes tea ".repeat(i % 4 + 1).trim_end()))
            .collect();
        let mut sent_some = 0;
        let mut shrank = 0;
        for budget in (20..=400).step_by(7) {
            for facts_max in [30, 1_000] {
                let memory = ChatMemory::builder(InMemoryStore::new())
                    .policy(WindowPolicy::tokens(budget))
                    .counter(counter)
                    .facts(Facts::new().max_tokens(facts_max).unwrap())
                    .build()
                    .unwrap();
                let plain = ChatMemory::builder(InMemoryStore::new())
                    .policy(WindowPolicy::tokens(budget))
                    .counter(counter)
                    .build()
                    .unwrap();
                for t in &texts {
                    memory.add_fact(&ada, t, None).await.unwrap();
                }
                let c = id("c");
                for m in [&memory, &plain] {
                    m.add(
                        &c,
                        [
                            Message::system("Rules."),
                            Message::user("first"),
                            Message::assistant("ok"),
                        ],
                    )
                    .await
                    .unwrap();
                    for i in 0..6 {
                        m.add(
                            &c,
                            [
                                Message::user(format!("question {i}")),
                                Message::assistant(format!("answer {i}")),
                            ],
                        )
                        .await
                        .unwrap();
                    }
                }
                // A turn that also replaces the system message with a longer one: the facts fit
                // in what the new one leaves.
                for system in [
                    None,
                    Some("Rules, much longer than before: be brief, be kind, be exact."),
                ] {
                    let mut turn = memory.begin_as(&c, &ada).await.unwrap();
                    let mut without = plain.begin(&c).await.unwrap();
                    for t in [&mut turn, &mut without] {
                        t.extend(system.map(Message::system));
                        t.push(Message::user("what now?"));
                    }
                    let prompt = turn.prompt();
                    let tokens = counter.count_messages(&prompt);
                    let plain_tokens = counter.count_messages(&without.prompt());
                    if plain_tokens > budget {
                        // The system message alone passes the budget (it is never evicted):
                        // no room is left for facts.
                        assert!(turn.facts().is_none(), "budget {budget}");
                        assert_eq!(bytes(&prompt), bytes(&without.prompt()));
                    } else {
                        assert!(
                            tokens <= budget,
                            "budget {budget}, facts {facts_max}, {system:?}: {tokens}"
                        );
                    }
                    if let Some(f) = turn.facts() {
                        sent_some += 1;
                        assert!(f.tokens <= facts_max, "{} > {facts_max}", f.tokens);
                        assert_eq!(f.tokens, counter.count_message(&f.message));
                        let at = usize::from(prompt[0].is_system());
                        assert!(std::ptr::eq(prompt[at], &f.message));
                        // The window left room for it: it holds no more than without facts.
                        let window = prompt.len() - at - 1;
                        let plain_prompt = without.prompt();
                        let plain_window = plain_prompt.len() - usize::from(plain_prompt[0].is_system());
                        assert!(window <= plain_window);
                        shrank += usize::from(window < plain_window);
                    } else if system.is_none() {
                        // No facts fit (nor did they before): the prompt is facts off's.
                        assert_eq!(bytes(&prompt), bytes(&without.prompt()));
                    }
                    // Both conversations go on alike (the one with facts keeping a shorter window).
                    for t in [turn, without] {
                        let mut t = t;
                        t.push(Message::assistant("ok"));
                        t.commit().await.unwrap();
                    }
                }
            }
        }
        assert!(sent_some > 20 && shrank > 5, "sent {sent_some}, shrank {shrank}");
    });
}

#[test]
fn recall_and_facts_together_each_in_its_place() {
    rt().block_on(async {
        let memory = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(2))
            .recall(Recall::new(3).unwrap())
            .facts(Facts::new())
            .build()
            .unwrap();
        let (c, ada) = (id("seed"), user("ada"));
        // A fact whose words the question shares: the search is the question's, not the facts'.
        memory
            .add_fact(&ada, "Usually orders LC202610060018 style parcels", None)
            .await
            .unwrap();
        memory
            .add(
                &c,
                [
                    Message::system("你是邻里仓售后。"),
                    Message::user("我的订单是 LC202610060018，还没发货。"),
                    Message::assistant("已为您催促仓库尽快发货。"),
                ],
            )
            .await
            .unwrap();
        for (u, a) in [("好的谢谢", "不客气"), ("天气不错", "是的")] {
            memory.add(&c, [Message::user(u), Message::assistant(a)]).await.unwrap();
        }
        let before = memory.history(&c).await.unwrap();
        let mut turn = memory.begin_as(&c, &ada).await.unwrap();
        turn.push(Message::user("LC202610060018 能退吗？"));
        let injected: Vec<u64> = turn.recall().await.unwrap().injected().map(|x| x.seq).collect();
        assert_eq!(injected, [1]);
        let t = texts(&turn.prompt());
        assert_eq!(t.len(), 4, "{t:?}");
        assert_eq!(t[0], "你是邻里仓售后。");
        assert!(t[1].starts_with(FACTS_HEADING), "{}", t[1]);
        assert!(
            t[2].starts_with(RECALL_HEADING) && t[2].contains("[#1 user, "),
            "{}",
            t[2]
        );
        assert_eq!(t[3], "LC202610060018 能退吗？");
        turn.push(Message::assistant("可以退。"));
        turn.commit().await.unwrap();
        let after = memory.history(&c).await.unwrap();
        assert_eq!(after[..before.len()], before[..]);
        assert_eq!(
            texts(&after[before.len()..].iter().collect::<Vec<_>>()),
            ["LC202610060018 能退吗？", "可以退。"]
        );
    });
}

#[test]
fn build_refuses_facts_on_a_store_that_keeps_none() {
    let e = ChatMemory::builder(FailingStore::without_facts())
        .facts(Facts::new())
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid configuration: facts need a store that keeps them; this store does not"
    );
    assert!(
        ChatMemory::builder(InMemoryStore::new())
            .facts(Facts::new())
            .build()
            .is_ok()
    );
    assert_eq!(
        ChatMemory::in_memory().facts_settings(),
        None,
        "facts are off unless configured"
    );
    let memory = with_facts(WindowPolicy::messages(4));
    assert_eq!(memory.facts_settings(), Some(&Facts::new()));
    let e = Facts::new().max_tokens(0).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidConfig(why) if why.contains("max_tokens")),
        "{e}"
    );
}

#[test]
fn facts_by_hand_end_to_end_and_a_deleted_fact_is_never_sent_again() {
    rt().block_on(async {
        let limits = FactLimits::default().with_max_facts(3).unwrap();
        let store = Arc::new(InMemoryStore::new());
        let memory = ChatMemory::builder(Arc::clone(&store))
            .facts(Facts::new().limits(limits))
            .build()
            .unwrap();
        assert_eq!(memory.fact_limits(), limits);
        let (c, ada) = (id("c1"), user("ada"));
        let sent =
            |turn: &chatmem::Turn<'_, Arc<InMemoryStore>>| turn.facts().map(|f: &RenderedFacts| f.included.clone());

        let key = FactKey::new("home.city").unwrap();
        let berlin = memory
            .add_fact(&ada, "Lives in Berlin", Some(key.clone()))
            .await
            .unwrap();
        let hamburg = memory
            .add_fact(&ada, "Lives in  Hamburg ", Some(key.clone()))
            .await
            .unwrap();
        assert_eq!(hamburg.text, "Lives in Hamburg");
        let tea = memory.add_fact(&ada, "Likes tea", None).await.unwrap();
        let loaded = memory.facts(&ada).await.unwrap();
        assert_eq!(loaded.version, 3);
        assert_eq!(
            loaded.set.facts().iter().map(|f| f.id).collect::<Vec<_>>(),
            [hamburg.id, tea.id]
        );
        let kinds = |h: Vec<chatmem::facts::FactChange>| h.iter().map(|c| c.kind.as_str()).collect::<Vec<_>>();
        assert_eq!(
            kinds(memory.fact_history(&ada, berlin.id).await.unwrap()),
            ["added", "superseded"]
        );

        // Edit, pin, unpin: each a commit, each in the fact's history.
        let tea = memory
            .edit_fact(
                &ada,
                tea.id,
                FactEdit {
                    text: Some("Likes green tea".into()),
                    ..FactEdit::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(tea.text, "Likes green tea");
        assert!(memory.pin_fact(&ada, tea.id, true).await.unwrap().pinned);
        let mut turn = memory.begin_as(&c, &ada).await.unwrap();
        turn.push(Message::user("hi"));
        assert_eq!(sent(&turn), Some(vec![tea.id, hamburg.id]), "pinned first");
        assert!(!memory.pin_fact(&ada, tea.id, false).await.unwrap().pinned);
        assert_eq!(
            kinds(memory.fact_history(&ada, tea.id).await.unwrap()),
            ["added", "edited", "pinned", "unpinned"]
        );

        // The rules refuse, naming the user, and nothing is written.
        let version = memory.facts(&ada).await.unwrap().version;
        let refused = |e: Error| match e {
            Error::FactRefused { user, source } => {
                assert_eq!(user, ada);
                source
            }
            other => panic!("not a refusal: {other}"),
        };
        assert_eq!(
            refused(memory.pin_fact(&ada, 99, true).await.unwrap_err()),
            FactError::UnknownFact(99)
        );
        assert!(matches!(
            refused(memory.add_fact(&ada, "  ", None).await.unwrap_err()),
            FactError::Text(_)
        ));
        let other = memory.add_fact(&ada, "Has a cat", None).await.unwrap();
        let taken = FactEdit {
            key: Some(Some(key.clone())),
            ..FactEdit::default()
        };
        assert!(matches!(
            refused(memory.edit_fact(&ada, other.id, taken).await.unwrap_err()),
            FactError::KeyTaken { .. }
        ));
        // Pinning past the cap: three facts kept at most, three pinned, a fourth refused.
        for f in [hamburg.id, tea.id, other.id] {
            memory.pin_fact(&ada, f, true).await.unwrap();
        }
        let version_pinned = memory.facts(&ada).await.unwrap().version;
        assert_eq!(version_pinned, version + 4);
        let e = memory.add_fact(&ada, "Speaks Dutch", None).await.unwrap_err();
        let message = e.to_string();
        let source = refused(e);
        assert!(matches!(source, FactError::NoRoom { .. }), "{source}");
        assert!(message.contains("\"ada\""), "{message}");
        assert!(source.to_string().contains("pinned facts"), "{source}");
        memory.pin_fact(&ada, other.id, false).await.unwrap();
        // Pinning past the cap, under bounds lowered since (the same store, fewer facts kept).
        let fewer = ChatMemory::builder(Arc::clone(&store))
            .facts(Facts::new().limits(limits.with_max_facts(2).unwrap()))
            .build()
            .unwrap();
        let e = refused(fewer.pin_fact(&ada, other.id, true).await.unwrap_err());
        assert_eq!(e, FactError::TooManyPinned { fact: other.id, max: 2 });
        assert!(e.to_string().contains("unpin or delete one first"), "{e}");
        // An edit with a refused pin writes nothing, the edit included: one commit.
        let both = FactEdit {
            text: Some("Has two cats".into()),
            key: None,
        };
        let e = refused(
            fewer
                .change_fact(&ada, other.id, both.clone(), Some(true))
                .await
                .unwrap_err(),
        );
        assert!(matches!(e, FactError::NoRoom { .. }), "{e}");
        assert_eq!(memory.facts(&ada).await.unwrap().version, version_pinned + 1);
        let unchanged = memory.facts(&ada).await.unwrap();
        assert_eq!(
            unchanged.set.get(other.id).map(|f| f.text.as_str()),
            Some(other.text.as_str())
        );
        // Under the bounds that allow it, both land in one commit.
        let changed = memory.change_fact(&ada, other.id, both, Some(true)).await.unwrap();
        assert_eq!((changed.text.as_str(), changed.pinned), ("Has two cats", true));
        assert_eq!(memory.facts(&ada).await.unwrap().version, version_pinned + 2);
        memory.pin_fact(&ada, other.id, false).await.unwrap();
        let other = memory.facts(&ada).await.unwrap().set.get(other.id).cloned().unwrap();
        let dutch = memory.add_fact(&ada, "Speaks Dutch", None).await.unwrap();
        // The cat left to make room for Dutch, recorded as evicted.
        assert_eq!(
            kinds(memory.fact_history(&ada, other.id).await.unwrap()).last(),
            Some(&"evicted")
        );

        // Delete: the fact and the one it superseded, history included; never sent again.
        assert_eq!(
            memory.delete_fact(&ada, hamburg.id).await.unwrap(),
            [berlin.id, hamburg.id]
        );
        for gone in [berlin.id, hamburg.id] {
            assert!(memory.fact_history(&ada, gone).await.unwrap().is_empty());
        }
        assert_eq!(
            refused(memory.delete_fact(&ada, hamburg.id).await.unwrap_err()),
            FactError::UnknownFact(hamburg.id)
        );
        assert_eq!(
            refused(memory.delete_fact(&ada, 0).await.unwrap_err()),
            FactError::UnknownFact(0)
        );
        let mut turn = memory.begin_as(&c, &ada).await.unwrap();
        turn.push(Message::user("hi"));
        assert_eq!(sent(&turn), Some(vec![tea.id, dutch.id]));
        assert!(
            texts(&turn.prompt())
                .iter()
                .all(|t| !t.contains("Hamburg") && !t.contains("Berlin"))
        );
        // A fact added again gets a new id: a deleted one is never given again.
        let again = memory.add_fact(&ada, "Lives in Hamburg", Some(key)).await.unwrap();
        assert!(again.id > dutch.id);

        // Forgotten: nothing is kept, nothing is sent.
        assert!(memory.forget_user(&ada).await.unwrap());
        assert!(!memory.forget_user(&ada).await.unwrap());
        assert_eq!(memory.facts(&ada).await.unwrap(), StoredFacts::default());
        let mut turn = memory.begin_as(&c, &ada).await.unwrap();
        turn.push(Message::user("hi"));
        assert_eq!(sent(&turn), None);
    });
}

#[test]
fn two_users_never_see_each_others_facts() {
    rt().block_on(async {
        let memory = with_facts(WindowPolicy::messages(10));
        let c = id("shared");
        seed(&memory, &c).await;
        let (u, u1) = (user("u"), user("u1"));
        memory.add_fact(&u, "Fact of u", None).await.unwrap();
        memory.add_fact(&u1, "Fact of u1", None).await.unwrap();
        for (who, text) in [(&u, "Fact of u"), (&u1, "Fact of u1")] {
            let mut turn = memory.begin_as(&c, who).await.unwrap();
            turn.push(Message::user("hi"));
            assert_eq!(turn.prompt()[1].text().unwrap(), format!("{FACTS_HEADING}\n- {text}"));
        }
        // Ids are per user: each user's first fact is 1, and deleting one leaves the other's.
        memory.delete_fact(&u, 1).await.unwrap();
        assert_eq!(memory.facts(&u1).await.unwrap().set.len(), 1);
        assert!(memory.facts(&u).await.unwrap().set.is_empty());
    });
}

#[test]
fn the_conversation_and_the_facts_load_at_once() {
    rt().block_on(async {
        // Each load waits for the other to have started: loaded one after the other, the
        // first would wait forever.
        let store = Meeting::default();
        let memory = ChatMemory::builder(store).facts(Facts::new()).build().unwrap();
        let ada = user("ada");
        memory.add_fact(&ada, "Allergic to nuts", None).await.unwrap();
        memory.store().meet.store(true, SeqCst);
        let begun = tokio::time::timeout(Duration::from_secs(10), memory.begin_as(&id("c"), &ada)).await;
        let turn = begun.expect("both loads awaited together").unwrap();
        assert_eq!(turn.facts().map(|f| f.included.clone()), Some(vec![1]));

        // A failing facts load names the user.
        memory.store().meet.store(false, SeqCst);
        memory.store().fail_facts.store(true, SeqCst);
        let e = memory.begin_as(&id("c"), &ada).await.unwrap_err();
        assert!(matches!(&e, Error::Facts { user, .. } if user == &ada), "{e}");
        assert_eq!(e.to_string(), "store failed for the facts of user \"ada\"");
        assert!(e.is_transient());
    });
}

/// An in-memory store whose conversation load and facts load, once told to
/// [`meet`](Meeting::meet), each wait for the other to have begun, and whose facts loads fail
/// on the test's word.
#[derive(Debug)]
struct Meeting {
    inner: InMemoryStore,
    meet: AtomicBool,
    met: tokio::sync::Barrier,
    fail_facts: AtomicBool,
}

impl Default for Meeting {
    fn default() -> Self {
        Self {
            inner: InMemoryStore::new(),
            meet: AtomicBool::new(false),
            met: tokio::sync::Barrier::new(2),
            fail_facts: AtomicBool::new(false),
        }
    }
}

impl Meeting {
    async fn meet(&self) {
        if self.meet.load(SeqCst) {
            self.met.wait().await;
        }
    }
}

#[async_trait]
impl Store for Meeting {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        self.meet().await;
        self.inner.load(id).await
    }
    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        self.inner.commit(id, commit).await
    }
    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.history(id, after, limit).await
    }
    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        self.inner.clear(id).await
    }
    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        self.inner.list(after, limit).await
    }
    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        self.inner.recent(query).await
    }
    fn keeps_facts(&self) -> bool {
        true
    }
    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        if self.fail_facts.load(SeqCst) {
            return Err(StoreError::new(StoreErrorKind::Unavailable, "facts down"));
        }
        self.meet().await;
        self.inner.load_facts(user).await
    }
    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        self.inner.commit_facts(user, commit).await
    }
}
