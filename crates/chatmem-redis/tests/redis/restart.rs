//! A conversation written by one process is read back by another (the parent), as after
//! an application restart.

use std::process::Command;

use crate::common::{cleanup, unique_prefix, url};
use chatmem::{ChatMemory, ConversationId, Message, Retention, Store};
use chatmem_redis::RedisStore;

const CHILD_VAR: &str = "CHATMEM_REDIS_RESTART_CHILD";

#[tokio::test(flavor = "multi_thread")]
async fn restart_child() {
    // `<url>\n<prefix>\n<id>`, set only when the parent runs this binary as a child.
    let Ok(spec) = std::env::var(CHILD_VAR) else { return };
    let mut parts = spec.splitn(3, '\n');
    let (Some(url), Some(prefix), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("bad {CHILD_VAR}");
    };
    let store = RedisStore::builder(url).key_prefix(prefix).connect().await.unwrap();
    let memory = ChatMemory::builder(store)
        .retention(Retention::KeepHistory)
        .build()
        .expect("valid memory settings");
    let id = ConversationId::new(id).unwrap();
    memory.add(&id, [Message::system("你是邻里仓售后。")]).await.unwrap();
    memory
        .add(
            &id,
            [
                Message::user("我的订单是 LC202610060018，还没发货。"),
                Message::assistant("已查询。"),
            ],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn written_by_another_process_read_back() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let url = url();
    let prefix = unique_prefix("restart");
    let id = "restart \"conversation\" {1}";
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "restart::restart_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_VAR, format!("{url}\n{prefix}\n{id}"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let store = RedisStore::builder(&url).key_prefix(&prefix).connect().await.unwrap();
    let memory = ChatMemory::new(store);
    let id = ConversationId::new(id).unwrap();
    let window = memory.get(&id).await.unwrap();
    let texts: Vec<String> = window.iter().map(|m| m.text().unwrap().into_owned()).collect();
    assert_eq!(
        texts,
        ["你是邻里仓售后。", "我的订单是 LC202610060018，还没发货。", "已查询。"]
    );
    let snap = memory.store().load(&id).await.unwrap();
    assert_eq!((snap.version, snap.next_seq), (2, 3));
    cleanup(&url, &prefix).await;
}
