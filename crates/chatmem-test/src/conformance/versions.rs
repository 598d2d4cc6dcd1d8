//! Version checks: a stale or conflicting commit writes nothing; a resent commit is stored
//! once.

use chatmem::store::{Snapshot, StoreErrorKind};
use chatmem::{Message, Retention};

use super::harness::{Run, commit, commit_full, seqs, sm, turns};

pub(super) async fn conflicts(run: &Run) {
    let id = run.id("conflict");
    let err_kind = |r: Result<u64, chatmem::store::StoreError>| match r {
        Ok(v) => panic!("expected a conflict, got version {v}"),
        Err(e) => e.kind(),
    };
    // A non-zero expected version on an unknown conversation conflicts and creates nothing.
    let r = run
        .store
        .commit(&id, commit(3, turns(1, 1), 1, Retention::KeepHistory))
        .await;
    assert_eq!(err_kind(r), StoreErrorKind::Conflict);
    assert_eq!(run.load(&id).await, Snapshot::empty());
    assert!(
        !run.list_range("conflict", 10).await.contains(&id),
        "a failed commit creates nothing"
    );

    assert_eq!(
        run.commit(&id, commit(0, turns(1, 2), 1, Retention::KeepHistory)).await,
        1
    );
    let snap = run.load(&id).await;
    // Version 0 means "must not exist".
    let r = run
        .store
        .commit(&id, commit(0, turns(1, 2), 1, Retention::KeepHistory))
        .await;
    assert_eq!(err_kind(r), StoreErrorKind::Conflict);
    assert_eq!(run.load(&id).await, snap, "a conflicting commit writes nothing");
    assert_eq!(
        run.commit(&id, commit(1, turns(3, 2), 1, Retention::KeepHistory)).await,
        2
    );
    let snap = run.load(&id).await;
    let history = run.history(&id, 0, 100).await;
    for stale in [1, 3, 99] {
        let r = run
            .store
            .commit(
                &id,
                commit_full(
                    stale,
                    5,
                    Some(sm(5, 1, Message::system("nope"))),
                    turns(5, 2),
                    5,
                    Retention::DropEvicted,
                    None,
                ),
            )
            .await;
        assert_eq!(err_kind(r), StoreErrorKind::Conflict, "expected version {stale}");
        assert_eq!(run.load(&id).await, snap, "a conflicting commit writes nothing");
        assert_eq!(
            run.history(&id, 0, 100).await,
            history,
            "a conflicting commit deletes nothing"
        );
    }
}

/// The same commit sent twice (as a store or its caller does when a reply was lost) is
/// stored once and answered with the version it made; another commit still conflicts.
pub(super) async fn resent_commit(run: &Run) {
    let id = run.id("resent");
    let create = commit(0, turns(1, 2), 1, Retention::KeepHistory);
    assert_eq!(run.commit(&id, create.clone()).await, 1);
    assert_eq!(
        run.commit(&id, create.clone()).await,
        1,
        "a resent creating commit answers its version"
    );
    let update = commit(1, turns(3, 2), 1, Retention::KeepHistory);
    assert_eq!(run.commit(&id, update.clone()).await, 2);
    assert_eq!(run.commit(&id, update).await, 2, "a resent commit answers its version");
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![1, 2, 3, 4], "stored once");
    // Once overtaken, the old commit is an ordinary conflict.
    let err = run.store.commit(&id, create).await.expect_err("an old commit");
    assert!(err.is_conflict(), "{err}");
    // A different commit expecting the old version conflicts, token or not.
    let other = commit(1, turns(3, 1), 1, Retention::KeepHistory);
    assert!(run.store.commit(&id, other).await.expect_err("stale").is_conflict());
    assert_eq!(seqs(&run.history(&id, 0, 100).await), vec![1, 2, 3, 4]);
}
