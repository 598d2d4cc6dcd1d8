//! Store checks both SQL server stores run in their own `store` tests: the message helper
//! they build commits from, racing creators, and how corrupt rows are reported.

use std::sync::Arc;

use chatmem::store::{StoreErrorKind, StoredMessage};
use chatmem::{ChatMemory, ConversationId, Message, Retention, Store};

use super::SqlDb;
use crate::commit;

/// Message `seq` with 3 tokens: a user message at odd seqs, an assistant's at even ones.
pub fn sm(seq: u64, text: &str) -> StoredMessage {
    let message = if seq % 2 == 1 {
        Message::user(text)
    } else {
        Message::assistant(text)
    };
    StoredMessage::new(seq, 3, message)
}

/// Eight tasks create one conversation at once, five times: exactly one wins each time, the
/// others see a conflict, and one message is stored.
pub async fn concurrent_creators_one_wins<D: SqlDb>() {
    let url = D::url();
    let namespace = D::fresh_namespace("create");
    let store = Arc::new(D::store_in(&url, &namespace).await);
    for round in 0..5 {
        let conv = crate::unique_id(&format!("create-{round}"));
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let (store, conv) = (store.clone(), conv.clone());
                tokio::spawn(async move {
                    store
                        .commit(
                            &conv,
                            commit(0, vec![sm(1, &format!("w{w}"))], 1, Retention::KeepHistory),
                        )
                        .await
                })
            })
            .collect();
        let mut wins = 0;
        for t in tasks {
            match t.await.expect("task") {
                Ok(v) => {
                    assert_eq!(v, 1);
                    wins += 1;
                }
                Err(e) => assert_eq!(e.kind(), StoreErrorKind::Conflict, "{e}"),
            }
        }
        assert_eq!(wins, 1, "exactly one creator wins");
        assert_eq!(store.history(&conv, 0, 10).await.expect("history").len(), 1);
    }
    D::drop_namespace(&url, &namespace).await;
}

/// Creates each of `convs` with three messages (seqs 1-3), to be corrupted by hand.
pub async fn create_three_messages<S: Store>(store: &S, convs: &[&ConversationId]) {
    for conv in convs {
        store
            .commit(
                conv,
                commit(0, vec![sm(1, "u"), sm(2, "a"), sm(3, "u2")], 1, Retention::KeepHistory),
            )
            .await
            .expect("commit");
    }
}

/// Each `(conversation, seq)` of `corrupt` has an unreadable message at `seq`: a load fails
/// as corrupt naming both, history fails as corrupt, and the message before it still reads.
pub async fn assert_corrupt_messages<S: Store>(store: &S, corrupt: &[(&ConversationId, u64)]) {
    for &(conv, seq) in corrupt {
        let err = store.load(conv).await.expect_err("corrupt load");
        assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
        let text = err.to_string();
        assert!(
            text.contains(conv.as_str()) && text.contains(&format!("seq {seq}")),
            "{text}"
        );
        let err = store.history(conv, 0, 10).await.expect_err("corrupt history");
        assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
        // A message before the bad one is still readable through history.
        assert_eq!(
            store
                .history(conv, 0, 1)
                .await
                .expect("history before the bad row")
                .len(),
            1
        );
    }
}

/// A [`ChatMemory`] over `store` reports the corrupt conversation `conv` as corrupt.
pub async fn assert_memory_sees_corruption<S: Store + Clone>(store: &S, conv: &ConversationId) {
    let memory = ChatMemory::new(store.clone());
    let err = memory.get(conv).await.expect_err("memory sees corruption");
    assert_eq!(err.store_error().map(|e| e.kind()), Some(StoreErrorKind::Corrupt));
}
