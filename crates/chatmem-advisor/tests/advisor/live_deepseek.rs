//! The after-sale scenario against the real DeepSeek API, when `DEEPSEEK_API_KEY` is set.

use chatmem::{ChatMemory, ConversationId, InMemoryStore, WindowPolicy};
use chatmem_advisor::{MemoryAdvisor, TurnRequest};
use chatmem_openai::Provider;

const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
const ORDER: &str = "LC202610060018";

#[tokio::test]
async fn deepseek_remembers_the_order_number() {
    if std::env::var_os("DEEPSEEK_API_KEY").is_none() {
        {
            // Written to stderr directly: libtest captures eprintln! output of passing tests.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipping: DEEPSEEK_API_KEY not set (set it to run the live DeepSeek test)"
            );
        }
        return;
    }
    let model = Provider::DeepSeek.builder().build().expect("DeepSeek client");
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    let advisor = MemoryAdvisor::new(model, memory);
    let id = ConversationId::new("app-user-42-aftersale").unwrap();
    let turn = |text: &str| TurnRequest::user(text).with_system(SYSTEM);

    let first = advisor
        .call(&id, turn("我的订单是 LC202610060018，还没发货。"))
        .await
        .unwrap();
    eprintln!("turn 1: {}", first.text());
    let second = advisor.call(&id, turn("那单能退吗？")).await.unwrap();
    eprintln!("turn 2: {}", second.text());
    assert!(
        second.text().contains(ORDER),
        "turn 2 should name the order: {}",
        second.text()
    );
    assert_eq!(advisor.memory().get(&id).await.unwrap().len(), 5);

    // Streaming works against the real provider too.
    let streamed = advisor
        .stream(&id, turn("请再确认一次退款条件。"))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    eprintln!("turn 3 (streamed): {}", streamed.text());
    assert!(!streamed.text().is_empty());
}
