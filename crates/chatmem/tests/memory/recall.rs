//! Recall through `ChatMemory` over the in-memory store: what a turn's prompt carries, where,
//! and what it never changes.

use chatmem::recall::{Outcome, RECALL_HEADING};
use chatmem::{
    ChatMemory, ConversationId, InMemoryStore, Message, Recall, Retention, TokenCounter, ToolCall, WindowPolicy,
};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

fn memory(window: usize, recall: Recall) -> ChatMemory {
    ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(window))
        .recall(recall)
        .build()
        .expect("a memory")
}

/// The seed conversation: the order number said first, then small talk that pushes it out of
/// a window of 2.
async fn seed(memory: &ChatMemory, id: &ConversationId) {
    memory
        .add(
            id,
            [
                Message::system("你是邻里仓售后。"),
                Message::user("我的订单是 LC202610060018，还没发货。"),
                Message::assistant("已为您催促仓库尽快发货。"),
            ],
        )
        .await
        .expect("seeded");
    memory
        .add(id, [Message::user("好的谢谢"), Message::assistant("不客气")])
        .await
        .expect("seeded");
    memory
        .add(id, [Message::user("天气不错"), Message::assistant("是的")])
        .await
        .expect("seeded");
}

fn texts(prompt: &[&Message]) -> Vec<String> {
    prompt
        .iter()
        .map(|m| m.text().unwrap_or_default().into_owned())
        .collect()
}

#[test]
fn an_evicted_order_number_is_recalled_just_before_the_question_and_nothing_is_stored() {
    rt().block_on(async {
        let memory = memory(2, Recall::new(3).unwrap());
        let id = ConversationId::new("seed").unwrap();
        seed(&memory, &id).await;
        let before = memory.history(&id).await.unwrap();
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("LC202610060018 能退吗？"));
        let recalled = turn.recall().await.unwrap().clone();
        let injected: Vec<u64> = recalled.injected().map(|c| c.seq).collect();
        assert_eq!(injected, [1]);
        let prompt = turn.prompt();
        let t = texts(&prompt);
        // System, the window (which starts on a user message: the question alone), recalled
        // just before the question.
        assert_eq!(t.len(), 3, "{t:?}");
        assert_eq!(t[0], "你是邻里仓售后。");
        assert!(t[1].starts_with(RECALL_HEADING), "{}", t[1]);
        assert!(
            t[1].contains("[#1 user, ") && t[1].contains("我的订单是 LC202610060018"),
            "{}",
            t[1]
        );
        assert_eq!(t[2], "LC202610060018 能退吗？");
        turn.push(Message::assistant("可以退。"));
        turn.commit().await.unwrap();
        let after = memory.history(&id).await.unwrap();
        assert_eq!(&after[..before.len()], &before[..]);
        assert_eq!(after.len(), before.len() + 2, "recall wrote nothing of its own");
        assert!(
            after
                .iter()
                .all(|m| !m.text().unwrap_or_default().contains(RECALL_HEADING))
        );
    });
}

#[test]
fn nothing_relevant_leaves_the_prompt_exactly_as_without_recall() {
    rt().block_on(async {
        let with = memory(2, Recall::new(3).unwrap());
        let without = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(2))
            .retention(Retention::KeepHistory)
            .build()
            .unwrap();
        let id = ConversationId::new("seed").unwrap();
        seed(&with, &id).await;
        seed(&without, &id).await;
        for question in ["hello there", "？？", "退货政策是什么"] {
            let mut a = with.begin(&id).await.unwrap();
            a.push(Message::user(question));
            let recalled = a.recall().await.unwrap();
            assert!(recalled.message.is_none(), "{question}: {recalled:?}");
            let mut b = without.begin(&id).await.unwrap();
            b.push(Message::user(question));
            assert_eq!(a.prompt(), b.prompt(), "{question}");
        }
    });
}

#[test]
fn a_memory_without_recall_recalls_nothing_and_indexes_nothing() {
    rt().block_on(async {
        let memory = ChatMemory::builder(std::sync::Arc::new(InMemoryStore::new()))
            .policy(WindowPolicy::messages(2))
            .retention(Retention::KeepHistory)
            .build()
            .unwrap();
        let id = ConversationId::new("seed").unwrap();
        for (user, answer) in [
            ("我的订单是 LC202610060018", "收到"),
            ("好的谢谢", "不客气"),
            ("天气不错", "是的"),
        ] {
            memory
                .add(&id, [Message::user(user), Message::assistant(answer)])
                .await
                .unwrap();
        }
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("LC202610060018 能退吗？"));
        assert!(turn.recall().await.unwrap().considered.is_empty());
        // Turned on later, recall finds only what was committed with it on.
        let later = memory.clone().with_recall(Some(Recall::new(3).unwrap()));
        let mut turn = later.begin(&id).await.unwrap();
        turn.push(Message::user("LC202610060018 能退吗？"));
        assert!(turn.recall().await.unwrap().considered.is_empty());
    });
}

#[test]
fn recall_refuses_a_configuration_that_cannot_work() {
    let e = ChatMemory::builder(InMemoryStore::new())
        .recall(Recall::new(3).unwrap())
        .retention(Retention::DropEvicted)
        .build()
        .unwrap_err();
    assert!(
        e.to_string().contains("recall") && e.to_string().contains("dropping evicted"),
        "{e}"
    );

    let e = ChatMemory::builder(chatmem_test::failing::FailingStore::blind())
        .recall(Recall::new(3).unwrap())
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("store that indexes and searches"), "{e}");
}

#[test]
fn a_message_is_recallable_as_soon_as_its_commit_returns() {
    rt().block_on(async {
        let memory = memory(2, Recall::new(5).unwrap());
        let id = ConversationId::new("fresh").unwrap();
        for i in 0..6 {
            memory
                .add(
                    &id,
                    [
                        Message::user(format!("note {i} code-word zebra{i}")),
                        Message::assistant("ok"),
                    ],
                )
                .await
                .unwrap();
            // Right after the commit, from the next turn: the message just pushed out is found.
            let mut turn = memory.begin(&id).await.unwrap();
            turn.push(Message::user(format!("what was zebra{i}?")));
            // The window (of 2, starting on a user message) is the question alone: the pair
            // committed just before is already out of it, and found.
            let found: Vec<u64> = turn.recall().await.unwrap().injected().map(|c| c.seq).collect();
            assert_eq!(found, [2 * i as u64 + 1], "turn {i}");
        }
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("zebra5"));
        assert_eq!(
            turn.recall()
                .await
                .unwrap()
                .injected()
                .map(|c| c.seq)
                .collect::<Vec<_>>(),
            [11]
        );
    });
}

#[test]
fn recall_keeps_k_orders_oldest_first_and_explains_what_it_cut() {
    rt().block_on(async {
        let memory = memory(2, Recall::new(2).unwrap());
        let id = ConversationId::new("many").unwrap();
        for i in 0..5 {
            memory
                .add(
                    &id,
                    [
                        Message::user(format!("refund for order {i}")),
                        Message::assistant(format!("filler {i}")),
                    ],
                )
                .await
                .unwrap();
        }
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("refund order"));
        let recalled = turn.recall().await.unwrap();
        let injected: Vec<u64> = recalled.injected().map(|c| c.seq).collect();
        // Equally relevant: the newer win, written oldest first.
        assert_eq!(injected, [7, 9]);
        let past_k: Vec<u64> = recalled
            .considered
            .iter()
            .filter(|c| c.outcome == Outcome::PastK)
            .map(|c| c.seq)
            .collect();
        assert_eq!(past_k, [5, 3, 1]);
        let ranks: Vec<usize> = recalled.considered.iter().map(|c| c.lexical_rank).collect();
        assert_eq!(ranks, [1, 2, 3, 4, 5]);
        let text = recalled.message.as_ref().unwrap().text().unwrap().into_owned();
        assert!(text.find("#7 user").unwrap() < text.find("#9 user").unwrap(), "{text}");
    });
}

#[test]
fn a_recalled_tool_result_comes_with_its_call_or_not_at_all() {
    rt().block_on(async {
        let memory = memory(2, Recall::new(4).unwrap());
        let id = ConversationId::new("tools").unwrap();
        let call = |id: &str, args: &str| {
            Message::assistant_tool_calls(vec![ToolCall {
                id: id.into(),
                name: "get_order".into(),
                arguments: args.into(),
            }])
        };
        memory
            .add(
                &id,
                [
                    Message::user("check my parcel"),
                    call("c1", r#"{"order":"LC1"}"#),
                    Message::tool_result("c1", "status: parcel held at customs in Rotterdam"),
                    Message::assistant("It is held."),
                    Message::user("and the other one"),
                    call("c2", r#"{"order":"LC2"}"#),
                    Message::tool_result("c2", "status: parcel delivered to locker Rotterdam"),
                    Message::assistant("Delivered."),
                    Message::user("thanks"),
                    Message::assistant("welcome"),
                ],
            )
            .await
            .unwrap();
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("Rotterdam customs?"));
        let recalled = turn.recall().await.unwrap();
        let outcome = |seq: u64| recalled.considered.iter().find(|c| c.seq == seq).map(|c| c.outcome);
        // The results name Rotterdam, their calls do not: a result found alone stays out.
        assert_eq!(outcome(3), Some(Outcome::WithoutItsCall));
        assert_eq!(outcome(7), Some(Outcome::WithoutItsCall));
        assert!(recalled.message.is_none());

        // Asked by the order, the call is found with its result: both come back, call first.
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("get_order LC1 customs status"));
        let recalled = turn.recall().await.unwrap();
        let injected: Vec<u64> = recalled.injected().map(|c| c.seq).collect();
        assert!(injected.windows(2).any(|w| w == [2, 3]), "{injected:?}");
        let text = recalled.message.as_ref().unwrap().text().unwrap().into_owned();
        assert!(text.contains("→ get_order({\"order\":\"LC1\"}) [c1]"), "{text}");
        assert!(text.contains("tool result for c1"), "{text}");
    });
}

#[test]
fn under_a_token_window_recall_fits_in_what_the_window_leaves() {
    rt().block_on(async {
        let counter = chatmem::Cl100k;
        // A full window leaves nothing: what would be recalled is cut by the budget, and the
        // prompt stays within it.
        let full = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::tokens(120))
            .recall(Recall::new(5).unwrap().max_tokens(10_000))
            .build()
            .unwrap();
        let id = ConversationId::new("budget").unwrap();
        full.add(&id, [Message::user("the melon code is 7781"), Message::assistant("ok")])
            .await
            .unwrap();
        for i in 0..12 {
            full.add(
                &id,
                [Message::user(format!("more small talk {i}")), Message::assistant("ok")],
            )
            .await
            .unwrap();
        }
        let mut turn = full.begin(&id).await.unwrap();
        turn.push(Message::user("melon code?"));
        let recalled = turn.recall().await.unwrap();
        assert_eq!(
            recalled.considered.first().map(|c| c.outcome),
            Some(Outcome::OverBudget),
            "{recalled:?}"
        );
        assert!(recalled.message.is_none());
        assert!(counter.count_messages(&turn.prompt()) <= 120);

        // Block eviction leaves room below the budget: the same message now fits, and the
        // prompt still does.
        let blocks = ChatMemory::builder(std::sync::Arc::new(InMemoryStore::new()))
            .policy(WindowPolicy::tokens(120).evict_to(60).unwrap())
            .recall(Recall::new(5).unwrap())
            .build()
            .unwrap();
        blocks
            .add(&id, [Message::user("the melon code is 7781"), Message::assistant("ok")])
            .await
            .unwrap();
        let long = "alpha ".repeat(30);
        for _ in 0..3 {
            blocks
                .add(&id, [Message::user(long.clone()), Message::assistant("ok")])
                .await
                .unwrap();
        }
        assert!(
            blocks.load(&id).await.unwrap().snapshot().window_start > 2,
            "a block was evicted"
        );
        let mut turn = blocks.begin(&id).await.unwrap();
        turn.push(Message::user("melon code?"));
        let recalled = turn.recall().await.unwrap();
        assert_eq!(
            recalled.injected().map(|c| c.seq).collect::<Vec<_>>(),
            [1],
            "{recalled:?}"
        );
        let prompt = turn.prompt();
        assert!(
            counter.count_messages(&prompt) <= 120,
            "{}",
            counter.count_messages(&prompt)
        );
        // Too big for the recall's own budget: cut.
        let tight = blocks.clone().with_recall(Some(Recall::new(5).unwrap().max_tokens(5)));
        let mut turn = tight.begin(&id).await.unwrap();
        turn.push(Message::user("melon code?"));
        assert_eq!(turn.recall().await.unwrap().considered[0].outcome, Outcome::OverBudget);
    });
}

#[test]
fn a_new_user_message_drops_what_was_recalled_for_the_last() {
    rt().block_on(async {
        let memory = memory(2, Recall::new(3).unwrap());
        let id = ConversationId::new("seed").unwrap();
        seed(&memory, &id).await;
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("LC202610060018 能退吗？"));
        turn.recall().await.unwrap();
        assert!(turn.recalled().is_some());
        turn.push(Message::assistant("可以。"));
        assert!(turn.recalled().is_some(), "the answer keeps it");
        turn.push(Message::user("还有别的吗"));
        assert!(turn.recalled().is_none());
        assert!(texts(&turn.prompt()).iter().all(|t| !t.starts_with(RECALL_HEADING)));
    });
}

#[test]
fn a_participants_name_finds_what_they_said_and_is_written_with_it() {
    rt().block_on(async {
        let memory = memory(2, Recall::new(1).unwrap());
        let id = ConversationId::new("names").unwrap();
        memory
            .add(
                &id,
                [
                    Message::user("I went to a support group yesterday.").with_name("Caroline"),
                    Message::assistant("Wow, that sounds meaningful!").with_name("Melanie"),
                ],
            )
            .await
            .unwrap();
        memory
            .add(
                &id,
                [
                    Message::user("The weather is nice.").with_name("Melanie"),
                    Message::assistant("It is."),
                ],
            )
            .await
            .unwrap();
        // Only the name ties the question to what left the window.
        let mut turn = memory.begin(&id).await.unwrap();
        turn.push(Message::user("What did Caroline do?"));
        let recalled = turn.recall().await.unwrap().clone();
        let injected: Vec<u64> = recalled.injected().map(|c| c.seq).collect();
        assert_eq!(injected, [1], "{recalled:?}");
        let text = recalled
            .message
            .as_ref()
            .and_then(|m| m.text())
            .unwrap_or_default()
            .into_owned();
        assert!(text.contains("[#1 user Caroline, "), "{text}");
        assert!(text.contains("I went to a support group yesterday."), "{text}");
        // Without the name nothing in the question is said by either message.
        let unnamed = self::memory(2, Recall::new(1).unwrap());
        unnamed
            .add(
                &id,
                [Message::user("I went to a support group."), Message::assistant("Wow!")],
            )
            .await
            .unwrap();
        unnamed
            .add(&id, [Message::user("Nice weather."), Message::assistant("It is.")])
            .await
            .unwrap();
        let mut turn = unnamed.begin(&id).await.unwrap();
        turn.push(Message::user("What did Caroline do?"));
        assert!(turn.recall().await.unwrap().message.is_none());
    });
}
