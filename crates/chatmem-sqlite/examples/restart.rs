//! Memory that survives a restart: one process writes turn 1 to an SQLite file, a "restarted"
//! memory over the same file answers turn 2 with the order number still in its window.
//!
//! Run it (offline, no service needed; the file goes to a temporary directory unless a path
//! is given):
//!
//! ```sh
//! cargo run -p chatmem-sqlite --example restart
//! cargo run -p chatmem-sqlite --example restart -- /tmp/chatmem-demo.db
//! ```

use chatmem::{ChatMemory, ConversationId, Message, Retention, WindowPolicy};
use chatmem_sqlite::SqliteStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = std::env::args()
        .nth(1)
        .map_or_else(|| dir.path().join("chatmem.db"), Into::into);
    let id = ConversationId::new("app-user-42-aftersale")?;
    let open = || async {
        let store = SqliteStore::open(&path).await?;
        let memory = ChatMemory::builder(store)
            .policy(WindowPolicy::messages(6))
            .retention(Retention::KeepHistory)
            .build()?;
        Ok::<_, Box<dyn std::error::Error>>(memory)
    };

    {
        let memory = open().await?;
        memory
            .add(
                &id,
                [
                    Message::system("你是邻里仓售后。"),
                    Message::user("我的订单是 LC202610060018，还没发货。"),
                    Message::assistant("收到，订单 LC202610060018 尚未发货。"),
                ],
            )
            .await?;
        println!("process 1 stored turn 1 in {}", path.display());
    } // the store is closed here: a restart

    let memory = open().await?;
    let mut turn = memory.begin(&id).await?;
    turn.push(Message::user("那单能退吗？"));
    println!("after the restart, turn 2 sends:");
    for m in turn.prompt() {
        println!("  {:<9} {}", m.role().as_str(), m.text().unwrap_or_default());
    }
    Ok(())
}
