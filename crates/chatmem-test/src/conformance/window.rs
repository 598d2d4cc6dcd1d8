//! The window a memory keeps: the window contract, replacing the system message, and what
//! each retention keeps of what leaves the window.

use chatmem::{Message, Retention};

use super::harness::{Run, seqs, stored_texts, strs, texts};

/// The first `n` messages of the dialogue `U1`, `A1`, `U2`, `A2`, … (user, then assistant).
fn dialogue(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let turn = i / 2 + 1;
            if i % 2 == 0 {
                Message::user(format!("U{turn}"))
            } else {
                Message::assistant(format!("A{turn}"))
            }
        })
        .collect()
}

pub(super) async fn window_contract(run: &Run) {
    let id = run.id("window5");
    let mem = run.memory(5, Retention::DropEvicted);
    let batch = [Message::system("S_old")]
        .into_iter()
        .chain(dialogue(6))
        .chain([Message::system("S_new")]);
    mem.add(&id, batch).await.expect("add");
    assert_eq!(
        texts(&mem.get(&id).await.expect("get")),
        strs(&["S_new", "U2", "A2", "U3", "A3"])
    );
    let snap = run.load(&id).await;
    assert_eq!(snap.window_start, 3);
    assert_eq!(snap.next_seq, 7);
    assert_eq!(stored_texts(&snap.messages), strs(&["U2", "A2", "U3", "A3"]));
    assert_eq!(
        stored_texts(&run.history(&id, 0, 100).await),
        strs(&["U2", "A2", "U3", "A3"])
    );

    let id = run.id("window2");
    let mem = run.memory(2, Retention::DropEvicted);
    mem.add(&id, dialogue(5)).await.expect("add");
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["U3"]));
    assert_eq!(stored_texts(&run.history(&id, 0, 100).await), strs(&["U3"]));

    // One message at a time gives the same window as one batch.
    let id = run.id("window2-steps");
    for m in dialogue(5) {
        mem.add(&id, [m]).await.expect("add");
    }
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["U3"]));
}

pub(super) async fn system_replacement(run: &Run) {
    let id = run.id("system");
    let mem = run.memory(20, Retention::DropEvicted);
    mem.add(&id, [Message::system("rules v1"), Message::user("hi")])
        .await
        .expect("add");
    let v1 = run.load(&id).await.version;
    mem.add(&id, [Message::system("rules v1")]).await.expect("add");
    assert_eq!(
        run.load(&id).await.version,
        v1,
        "the same system text is ignored (no commit)"
    );
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["rules v1", "hi"]));
    mem.add(&id, [Message::system("rules v2")]).await.expect("add");
    let snap = run.load(&id).await;
    assert_eq!(snap.version, v1 + 1);
    assert_eq!(snap.next_seq, 2, "a system message takes no sequence of its own");
    assert_eq!(texts(&mem.get(&id).await.expect("get")), strs(&["rules v2", "hi"]));
    assert_eq!(
        texts(&mem.history(&id).await.expect("history")),
        strs(&["rules v2", "hi"])
    );
}

pub(super) async fn retention(run: &Run) {
    for retention in [Retention::DropEvicted, Retention::KeepHistory] {
        let id = run.id(&format!("retention-{retention:?}"));
        let mem = run.memory(4, retention);
        mem.add(&id, [Message::system("sys")]).await.expect("add");
        let mut all = vec!["sys".to_owned()];
        for i in 0..5 {
            let turn = [Message::user(format!("u{i}")), Message::assistant(format!("a{i}"))];
            all.extend(texts(&turn));
            mem.add(&id, turn).await.expect("add");
        }
        let window = texts(&mem.get(&id).await.expect("get"));
        assert_eq!(window, strs(&["sys", "u4", "a4"]), "{retention:?}");
        let snap = run.load(&id).await;
        let stored = run.history(&id, 0, 1000).await;
        let history = texts(&mem.history(&id).await.expect("history"));
        match retention {
            Retention::DropEvicted => {
                assert_eq!(stored, snap.messages, "DropEvicted keeps only the window's messages");
                assert_eq!(stored_texts(&stored), strs(&["u4", "a4"]));
                assert_eq!(history, window);
            }
            Retention::KeepHistory => {
                assert_eq!(seqs(&stored), (1..=10).collect::<Vec<_>>());
                assert_eq!(history, all, "KeepHistory returns everything in order");
                assert_eq!(stored_texts(&snap.messages), strs(&["u4", "a4"]));
            }
        }
    }
}
