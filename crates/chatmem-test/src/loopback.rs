//! The one loopback server of the tests: a [`Router`] served on `127.0.0.1:0` on the current
//! tokio runtime, with its address, a count of the connections it accepted and a shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use tokio::sync::Notify;

/// A router being served on loopback. Dropping the handle leaves the server running until the
/// test's runtime ends; [`Served::shutdown`] stops it.
#[derive(Debug)]
pub struct Served {
    /// The address it listens on.
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    stop: Arc<Notify>,
}

impl Served {
    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stops accepting connections and lets the open ones finish.
    pub fn shutdown(&self) {
        self.stop.notify_one();
    }
}

/// Serves `router` on a free loopback port.
///
/// # Panics
/// When no loopback port can be bound.
pub async fn serve(router: Router) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    let connections = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(Notify::new());
    let counting = Counting {
        listener,
        connections: Arc::clone(&connections),
    };
    let stopped = Arc::clone(&stop);
    tokio::spawn(async move {
        let _ = axum::serve(counting, router)
            .with_graceful_shutdown(async move { stopped.notified().await })
            .await;
    });
    Served {
        addr,
        connections,
        stop,
    }
}

/// A loopback port free at the time of the call, for a program the test starts that binds it.
///
/// # Panics
/// When no loopback port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Counting {
    listener: tokio::net::TcpListener,
    connections: Arc<AtomicUsize>,
}

impl axum::serve::Listener for Counting {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((io, addr)) = self.listener.accept().await {
                self.connections.fetch_add(1, Ordering::SeqCst);
                return (io, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}
