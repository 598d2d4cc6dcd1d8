//! The real facts prompt against DeepSeek, when `DEEPSEEK_API_KEY` is set: one eviction block
//! goes to `deepseek-chat` with `response_format: json_object`, and its answer must be the
//! documented shape (nothing discarded) and name what the user said.

use std::sync::Arc;
use std::time::Duration;

use chatmem::facts::{FactExtractor, Facts};
use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, UserId, WindowPolicy};
use chatmem_openai::Provider;

#[tokio::test]
async fn deepseek_extracts_facts_with_the_real_prompt() {
    if std::env::var_os("DEEPSEEK_API_KEY").is_none() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipping: DEEPSEEK_API_KEY not set (set it to run the live facts extraction test)"
        );
        return;
    }
    let model = Provider::DeepSeek.builder().build().expect("DeepSeek client");
    let extractor = FactExtractor::new(model, |f| {
        tokio::spawn(f);
    })
    .timeout(Duration::from_secs(90));
    let memory = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(4).evict_to(2).expect("a valid policy"))
        .facts(Facts::new())
        .fact_extractor(extractor)
        .build()
        .expect("valid memory settings");
    let (c, ada) = (ConversationId::new("live-facts").unwrap(), UserId::new("ada").unwrap());
    // The first two turns leave the window when the third commits: the extraction sees a
    // durable fact and a passing question.
    let said = [
        (
            "Hi, I'm Ada. Please send everything to my default delivery address: 12 Rose Street, Berlin. \
             I'm allergic to peanuts.",
            "Thanks Ada, I've noted 12 Rose Street, Berlin as your delivery address, and no peanuts.",
        ),
        ("What's the weather like today?", "I can't check the weather, sorry."),
        ("Ok, thanks.", "You're welcome."),
    ];
    for (user, assistant) in said {
        let mut turn = memory.begin_as(&c, &ada).await.expect("begin");
        turn.push(Message::user(user));
        turn.push(Message::assistant(assistant));
        turn.commit().await.expect("commit");
    }
    let extractor = memory.fact_extractor().expect("an extractor");
    assert!(
        extractor.settle(Duration::from_secs(120)).await,
        "the extraction finished"
    );
    let stats = extractor.stats();
    eprintln!("stats: {stats:?}");
    assert_eq!(stats.calls, 1, "one call for the one eviction block");
    assert_eq!((stats.failures, stats.discarded_total()), (0, 0), "{stats:?}");

    let facts = memory.facts(&ada).await.expect("facts");
    let texts: Vec<&str> = facts.set.facts().iter().map(|f| f.text.as_str()).collect();
    eprintln!("facts: {texts:#?}");
    let all = texts.join("\n").to_lowercase();
    assert!(all.contains("rose street"), "the address is a fact: {texts:?}");
    assert!(all.contains("peanut"), "the allergy is a fact: {texts:?}");
    assert!(!all.contains("weather"), "a passing question is not: {texts:?}");
    assert!(
        facts.set.facts().iter().all(|f| !f.sources.is_empty()),
        "every fact names the messages it came from"
    );
}
