//! Question: where does a chatmem Redis turn's time go, by CPU? Answer (Xeon 2): of 213–230 µs a turn, this process's CPU 89–94 µs, the server's 92–101 µs, neither on a CPU 33–36 µs; most of either side's is kernel time (loopback TCP and wake-ups).
//!
//! Where a chatmem Redis turn's time goes: wall time against CPU time, in this process and in
//! the Redis server. Runs chatmem's W3 turn (load, prompt, commit; a 21-message window) on one
//! conversation, 200 warm-up turns then 10,000 measured, and prints per turn: the wall time, this
//! process's CPU time (`/proc/self/stat`) and the Redis server's (`INFO cpu`, so nothing else may
//! use that server meanwhile), each split into user and kernel time, and the rest, when neither
//! was on a CPU (waiting for the other side to wake). chatmem's turn costs the same at every history
//! (W3), so a new conversation stands for all.
//! `CHATMEM_TEST_REDIS_URL=redis://127.0.0.1:6379 cargo run --release --bin redis_turn_time`
//! (from `bench/explore`).

use std::process::Command;
use std::time::Instant;

use chatmem::{ChatMemory, ConversationId, Retention, WindowPolicy};
use chatmem_redis::RedisStore;

/// This process's user and system CPU time, in seconds.
fn own_cpu() -> Result<(f64, f64), String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    // The fields after the command name (in parentheses, which may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or("no ) in /proc/self/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .ok_or("short /proc/self/stat")
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    Ok((ticks(11)? / hz, ticks(12)? / hz))
}

/// The Redis server's user and system CPU time, in seconds.
fn server_cpu(url: &str) -> Result<(f64, f64), String> {
    let out = Command::new("redis-cli")
        .args(["-u", url, "info", "cpu"])
        .output()
        .map_err(|e| format!("redis-cli: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok()))
            .ok_or(format!("no {name} in INFO cpu"))
    };
    Ok((field("used_cpu_user:")?, field("used_cpu_sys:")?))
}

fn main() -> Result<(), String> {
    let url = std::env::var("CHATMEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let rt = bench_common::runtime();
    let url2 = url.clone();
    rt.block_on(rt.spawn(async move {
        let url = url2;
        let store = RedisStore::connect(&url).await.map_err(|e| e.to_string())?;
        let memory = ChatMemory::builder(store)
            .policy(WindowPolicy::messages(bench_common::W3_MESSAGES + 1))
            .retention(Retention::KeepHistory)
            .build()
            .map_err(|e| e.to_string())?;
        let id = ConversationId::new(format!("bench-redis-turn-time-{}", bench_common::run_id()))
            .map_err(|e| e.to_string())?;
        let turn = |i: usize| {
            bench_common::in_memory::chatmem_turn(
                &memory,
                &id,
                bench_common::user_text(i, ""),
                bench_common::answer_text(i, ""),
            )
        };
        for i in 0..200 {
            turn(i).await?;
        }
        let n = 10_000;
        for round in 0..3 {
            let (cpu0, server0, t0) = (own_cpu()?, server_cpu(&url)?, Instant::now());
            for i in 0..n {
                turn(200 + round * n + i).await?;
            }
            let wall = t0.elapsed().as_secs_f64();
            let ((u1, s1), (su1, ss1)) = (own_cpu()?, server_cpu(&url)?);
            let (user, sys, server_user, server_sys) = (u1 - cpu0.0, s1 - cpu0.1, su1 - server0.0, ss1 - server0.1);
            let us = |s: f64| s * 1e6 / n as f64;
            println!(
                "round {round}: {:.1} µs a turn: this process's CPU {:.1} µs (user {:.1}, kernel {:.1}), \
                 the Redis server's {:.1} µs (user {:.1}, kernel {:.1}), neither {:.1} µs",
                us(wall),
                us(user + sys),
                us(user),
                us(sys),
                us(server_user + server_sys),
                us(server_user),
                us(server_sys),
                us(wall - user - sys - server_user - server_sys)
            );
        }
        memory.clear(&id).await.map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    }))
    .map_err(|e| e.to_string())?
}
