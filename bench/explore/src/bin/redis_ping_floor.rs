//! Question: what does one Redis round trip cost on this host, and how much of it is redis-rs? Answer (Xeon 2, bc42b36's session): a `ConnectionManager` `PING` 67.5, 68.1 and 14.0 µs p50 in three rounds, a tokio socket with no driver task 68.0–70.7 µs, a blocking socket 6–66 µs: the host's wake-up, not the client.
//!
//! The floor under a Redis round trip on this host: `PING` answered by the server, sent four
//! ways, in the bench's 2-worker runtime: through redis-rs's `ConnectionManager` (what
//! chatmem's `RedisStore` and daimon use), through a bare `MultiplexedConnection`, over a
//! tokio `TcpStream` written and read by the task itself (no driver task between), and over
//! a blocking `std::net::TcpStream` on a plain thread. Prints each one's median and mean in
//! three rounds, the four taking turns in each, so a drift of the host hits all alike.
//! `CHATMEM_TEST_REDIS_URL=redis://127.0.0.1:6379 cargo run --release --bin redis_ping_floor`
//! (from `bench/explore`).

use std::future::Future;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PINGS: usize = 10_000;
const PONG: &[u8] = b"+PONG\r\n";

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "  {name:<24} p50 {:>6.1} µs  mean {:>6.1} µs",
        samples[samples.len() / 2].as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6
    );
}

/// `host:port` of a `redis://host:port[/db]` URL.
fn address(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("redis://").ok_or("expected a redis:// URL")?;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    Ok(rest.split('/').next().unwrap_or(rest).to_owned())
}

/// One `PING` through a redis-rs connection (a clone: they share the connection).
async fn redis_ping(mut conn: impl redis::aio::ConnectionLike) -> Result<(), String> {
    let pong: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    std::hint::black_box(pong);
    Ok(())
}

/// `PINGS` round trips of `ping`, timed one by one.
async fn timed<F, Fut>(mut ping: F) -> Result<Vec<Duration>, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut times = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let t = Instant::now();
        ping().await?;
        times.push(t.elapsed());
    }
    Ok(times)
}

fn main() -> Result<(), String> {
    let url = std::env::var("CHATMEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let addr = address(&url)?;
    let mut blocking = std::net::TcpStream::connect(&addr).map_err(|e| e.to_string())?;
    blocking.set_nodelay(true).map_err(|e| e.to_string())?;
    let rt = bench_common::runtime();
    // The async clients run in a task on the runtime's workers, as the bench's turns do.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<Result<(), String>>>(1);
    let addr2 = addr.clone();
    let task = rt.spawn(async move {
        let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
        let manager = redis::aio::ConnectionManager::new(client.clone())
            .await
            .map_err(|e| e.to_string())?;
        let multiplexed = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let stream = tokio::net::TcpStream::connect(&addr2)
            .await
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let stream = tokio::sync::Mutex::new(stream);
        while let Some(done) = rx.recv().await {
            let result = async {
                summary("ConnectionManager", timed(|| redis_ping(manager.clone())).await?);
                summary(
                    "MultiplexedConnection",
                    timed(|| redis_ping(multiplexed.clone())).await?,
                );
                let stream = &stream;
                let ping = || async move {
                    let mut s = stream.lock().await;
                    let mut buf = [0u8; PONG.len()];
                    s.write_all(b"PING\r\n").await.map_err(|e| e.to_string())?;
                    s.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
                    if buf != PONG {
                        return Err("unexpected reply to PING".to_owned());
                    }
                    Ok(())
                };
                summary("tokio TcpStream", timed(ping).await?);
                Ok(())
            }
            .await;
            let _ = done.send(result);
        }
        Ok::<(), String>(())
    });
    for round in 0..3 {
        println!("round {round}: {PINGS} pings each");
        let (done, answer) = tokio::sync::oneshot::channel();
        tx.blocking_send(done).map_err(|_| "the ping task ended".to_owned())?;
        answer.blocking_recv().map_err(|_| "the ping task ended".to_owned())??;
        let mut times = Vec::with_capacity(PINGS);
        let mut buf = [0u8; PONG.len()];
        for _ in 0..PINGS {
            let t = Instant::now();
            blocking.write_all(b"PING\r\n").map_err(|e| e.to_string())?;
            blocking.read_exact(&mut buf).map_err(|e| e.to_string())?;
            times.push(t.elapsed());
            if buf != PONG {
                return Err("unexpected reply to PING".into());
            }
        }
        summary("blocking std TcpStream", times);
    }
    drop(tx);
    rt.block_on(task).map_err(|e| e.to_string())?
}
