//! Listing by recency on MySQL/MariaDB: a version 1 database upgraded by connect (its rows
//! list with time 0 until their next commit), the migration run again after an interruption,
//! and cursors whose time a `DATETIME` cannot hold.

use crate::common;

use std::time::Duration;

use chatmem::store::{RecentCursor, StoredMessage, now_micros};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_mysql::SCHEMA_VERSION;
use chatmem_test::commit_full;
use mysql_async::prelude::Queryable;

/// Makes the tables of `prefix` as chatmem-mysql 0.1 did at schema version 1: its one
/// migration file, applied the way `migrate.rs` applies it.
async fn schema_version_1(conn: &mut mysql_async::Conn, prefix: &str) {
    conn.query_drop(format!(
        "CREATE TABLE `{prefix}_schema_version` (
             version    INT NOT NULL PRIMARY KEY,
             applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
         ) ENGINE = InnoDB"
    ))
    .await
    .expect("version table");
    let sql = include_str!("../../migrations/0001_init.sql").replace("{p}", prefix);
    for statement in sql.split("-- next statement\n") {
        conn.query_drop(statement).await.expect("applying 0001_init.sql");
    }
    conn.query_drop(format!("INSERT INTO `{prefix}_schema_version` (version) VALUES (1)"))
        .await
        .expect("recording version 1");
}

/// A conversation created by version 1's commit procedure, with one message and `ttl_micros`.
async fn create_with_version_1(
    conn: &mut mysql_async::Conn,
    prefix: &str,
    id: &ConversationId,
    ttl_micros: Option<i64>,
) {
    let json = StoredMessage::new(1, 3, Message::user("from version 1"))
        .message_json()
        .expect("message json");
    let batch = serde_json::to_string(&[(1, 3, None::<String>, json)]).expect("batch json");
    let (applied, version): (i64, i64) = conn
        .exec_first(
            format!("CALL `{prefix}_commit`(?, 0, NULL, NULL, NULL, NULL, 1, 2, NULL, ?, 1, NULL, ?)"),
            (id.as_str().as_bytes(), ttl_micros, batch),
        )
        .await
        .expect("version 1's commit")
        .expect("a result row");
    assert_eq!((applied, version), (1, 1));
}

async fn max_version(conn: &mut mysql_async::Conn, prefix: &str) -> Option<i32> {
    conn.query_first(format!("SELECT MAX(version) FROM `{prefix}_schema_version`"))
        .await
        .expect("schema version")
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn a_version_1_database_is_upgraded_and_lists_old_rows_with_time_0() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recent_v1");
    let mut raw = common::raw_conn(&url).await;
    schema_version_1(&mut raw, &prefix).await;
    let tenant = chatmem_test::unique_id("tenant");
    let [old, old_ttl] = ["old", "old-ttl"].map(|n| ConversationId::new(format!("{tenant}/{n}")).expect("id"));
    let before_v1 = now_micros();
    create_with_version_1(&mut raw, &prefix, &old, None).await;
    create_with_version_1(&mut raw, &prefix, &old_ttl, Some(3_600_000_000)).await;

    let store = common::store_in(&url, &prefix).await;
    assert_eq!(max_version(&mut raw, &prefix).await, Some(SCHEMA_VERSION));
    let listing = format!("{tenant}/");
    let page = store
        .recent(&chatmem::store::RecentQuery::new(&listing, None, 10))
        .await
        .expect("recent");
    let listed: Vec<_> = page.conversations.iter().map(|c| (&c.id, c.updated_micros)).collect();
    assert_eq!(
        listed,
        vec![(&old_ttl, 0), (&old, 0)],
        "not recorded: 0, then by id, descending"
    );
    assert_eq!(page.conversations[1].expires_micros, None);
    // Written by version 1 in UTC, read as UTC microseconds (a day's slack for the server's clock).
    let expires = page.conversations[0].expires_micros.expect("old-ttl expires");
    let hour_later = before_v1 + 3_600_000_000;
    assert!(
        (hour_later - 86_400_000_000..hour_later + 86_400_000_000).contains(&expires),
        "{expires}"
    );
    // Paging through rows at time 0 goes by id.
    let first = store
        .recent(&chatmem::store::RecentQuery::new(&listing, None, 1))
        .await
        .expect("page 1");
    assert_eq!(
        first.next,
        Some(RecentCursor {
            updated_micros: 0,
            id: old_ttl.clone()
        })
    );
    let second = store
        .recent(&chatmem::store::RecentQuery::new(&listing, first.next.as_ref(), 1))
        .await
        .expect("page 2");
    assert_eq!(second.conversations[0].id, old);
    assert_eq!(second.next, None);

    // The upgraded procedure records the next commit's time.
    let started = now_micros();
    let append = commit_full(
        1,
        2,
        None,
        vec![StoredMessage::new(2, 3, Message::assistant("after the upgrade"))],
        1,
        Retention::KeepHistory,
        Some(Duration::from_secs(60)),
    );
    assert_eq!(store.commit(&old, append).await.expect("commit after the upgrade"), 2);
    let page = store
        .recent(&chatmem::store::RecentQuery::new(&listing, None, 10))
        .await
        .expect("recent");
    assert_eq!(page.conversations[0].id, old);
    let updated = page.conversations[0].updated_micros;
    assert!(
        (started - 60_000_000..started + 60_000_000).contains(&updated),
        "{updated}"
    );
    assert_eq!(
        page.conversations[0].expires_micros,
        Some(updated + 60_000_000),
        "same clock reading"
    );
    assert_eq!(
        (&page.conversations[1].id, page.conversations[1].updated_micros),
        (&old_ttl, 0)
    );
    assert_eq!(store.load(&old).await.expect("load").messages.len(), 2, "data kept");

    // Migrations interrupted before they were recorded run again over what they already did.
    raw.query_drop(format!("DELETE FROM `{prefix}_schema_version` WHERE version >= 2"))
        .await
        .expect("forget versions 2 and later");
    let again = common::store_in(&url, &prefix).await;
    assert_eq!(max_version(&mut raw, &prefix).await, Some(SCHEMA_VERSION));
    assert_eq!(
        again
            .recent(&chatmem::store::RecentQuery::new(&listing, None, 10))
            .await
            .expect("recent")
            .conversations,
        page.conversations
    );
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn cursors_beyond_what_a_datetime_holds() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recent_cursor");
    let store = common::store_in(&url, &prefix).await;
    let id = chatmem_test::unique_id("cursor");
    let create = chatmem_test::commit(
        0,
        vec![StoredMessage::new(1, 1, Message::user("hi"))],
        1,
        Retention::KeepHistory,
    );
    store.commit(&id, create).await.expect("commit");
    let listing = id.as_str();
    let at = |updated_micros| RecentCursor {
        updated_micros,
        id: id.clone(),
    };
    // Past year 9999: after every conversation. Before year 1000 (or the epoch): after none.
    for (cursor, listed) in [(i64::MAX, 1), (253_402_300_800_000_000, 1), (i64::MIN, 0), (-1, 0)] {
        let page = store
            .recent(&chatmem::store::RecentQuery::new(listing, Some(&at(cursor)), 10))
            .await
            .expect("recent");
        assert_eq!(page.conversations.len(), listed, "cursor at {cursor}");
    }
    // The escape character of the prefix pattern is a plain byte too.
    assert!(
        store
            .recent(&chatmem::store::RecentQuery::new("!", None, 10))
            .await
            .expect("recent")
            .conversations
            .is_empty()
    );
    common::drop_prefix(&url, &prefix).await;
}
