//! Awkward conversation ids: quotes, wildcards, SQL, Unicode, the longest allowed; each
//! sees only its own messages and lists in byte order.

use chatmem::{ConversationId, Message, Retention};

use super::harness::{Run, stored_texts, texts};

pub(super) async fn awkward_ids(run: &Run) {
    for bad in ["a\nb", "tab\there", "nul\0", ""] {
        assert!(ConversationId::new(bad).is_err(), "{bad:?} must be rejected");
    }
    let mut names: Vec<String> = [
        "it's \"q\" 100% * a:b {x}",
        "a*",
        "ab",
        "a",
        "x%",
        "xy",
        "x",
        "_",
        "z",
        "a\\b",
        "a\\\\b",
        "{tag}",
        "{tag}x",
        "a:b",
        "a:b:c",
        "'; DROP TABLE conversations; --",
        "$1 ?1 :name @p",
        "ü ✓ 会话",
    ]
    .iter()
    .map(|s| format!("ids/{s}"))
    .collect();
    // Exactly 256 bytes of UTF-8 with multi-byte characters, and a prefix of it.
    let mut long = format!("{}/ids/long-", run.prefix);
    while long.len() + 3 <= 256 {
        long.push('界');
    }
    while long.len() < 256 {
        long.push('x');
    }
    assert_eq!(long.len(), 256);
    assert!(
        ConversationId::new(format!("{long}y")).is_err(),
        "257 bytes is too long"
    );
    let long_id = ConversationId::new(long.clone()).expect("256 bytes is allowed");
    let short = long.trim_end_matches('x');
    let short = &short[..short.len() - 3];
    names.push(long[run.prefix.len() + 1..].to_owned());
    names.push(short[run.prefix.len() + 1..].to_owned());

    let ids: Vec<ConversationId> = names.iter().map(|n| run.id(n)).collect();
    assert!(ids.contains(&long_id));
    let mem = run.memory(20, Retention::DropEvicted);
    for id in &ids {
        mem.add(id, [Message::user(id.as_str()), Message::assistant(id.as_str())])
            .await
            .expect("add");
    }
    for id in &ids {
        let got = texts(&mem.get(id).await.expect("get"));
        assert_eq!(
            got,
            vec![id.to_string(), id.to_string()],
            "{id:?} sees only its own messages"
        );
        assert_eq!(stored_texts(&run.history(id, 0, 100).await), got);
        assert_eq!(run.load(id).await.version, 1);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(run.list_range("ids/", 5).await, sorted, "list order is byte order");
    // Clearing one never touches a look-alike.
    assert!(mem.clear(&run.id("ids/a*")).await.expect("clear"));
    assert!(mem.clear(&run.id("ids/x%")).await.expect("clear"));
    for other in ["ids/ab", "ids/a", "ids/xy", "ids/x", "ids/_"] {
        assert_eq!(mem.get(&run.id(other)).await.expect("get").len(), 2, "{other}");
    }
    assert_eq!(run.list_range("ids/", 100).await.len(), ids.len() - 2);
}
