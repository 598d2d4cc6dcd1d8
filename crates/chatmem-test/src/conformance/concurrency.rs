//! Writers racing in one conversation and in many: nothing lost, sequences dense.

use std::collections::BTreeSet;

use chatmem::Retention;

use super::harness::{Run, seqs, texts};

pub(super) async fn one_conversation(run: &Run) {
    let id = run.id("concurrent-one");
    let mem = run.memory(1000, Retention::KeepHistory);
    let tasks: Vec<_> = (0..16)
        .map(|writer| {
            let (mem, id) = (mem.clone(), id.clone());
            tokio::spawn(async move { crate::stress::write_turns(&mem, &id, writer, 20).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer task panicked");
    }
    let history = mem.history(&id).await.expect("history");
    crate::check_stress_history(&history, 16, 20);
    let stored = run.history(&id, 0, 1000).await;
    assert_eq!(seqs(&stored), (1..=640).collect::<Vec<_>>(), "sequences are dense");
}

pub(super) async fn many_conversations(run: &Run) {
    let mem = run.memory(6, Retention::KeepHistory);
    let tasks: Vec<_> = (0..64)
        .map(|writer| {
            let mem = mem.clone();
            let id = run.id(&format!("concurrent-many/{writer:02}"));
            tokio::spawn(async move {
                crate::stress::write_turns(&mem, &id, writer, 5).await;
                id
            })
        })
        .collect();
    let mut ids = BTreeSet::new();
    for t in tasks {
        ids.insert(t.await.expect("writer task panicked"));
    }
    for (writer, id) in ids.iter().enumerate() {
        let history = mem.history(id).await.expect("history");
        let expected: Vec<String> = (0..5)
            .flat_map(|t| texts(&crate::stress::turn_messages(writer, t)))
            .collect();
        assert_eq!(texts(&history), expected, "{id:?}");
        assert_eq!(mem.get(id).await.expect("get").len(), 6);
    }
    assert_eq!(run.list_range("concurrent-many/", 20).await.len(), 64);
}
