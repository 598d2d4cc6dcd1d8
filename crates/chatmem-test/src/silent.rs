//! A loopback port that accepts connections and never answers: what a stalled server looks
//! like to a client's connect and response timeouts (the SQL and Redis stores' tests).

use std::net::SocketAddr;

/// A loopback listener that accepts connections and never says a word, holding each open
/// until the handle drops: what a stalled server looks like to a client's timeouts.
#[derive(Debug)]
pub struct Silent {
    /// The address it listens on.
    pub addr: SocketAddr,
    holder: tokio::task::JoinHandle<()>,
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.holder.abort();
    }
}

/// A [`Silent`] listener on a free loopback port, on the current tokio runtime.
///
/// # Panics
/// When no loopback port can be bound.
pub async fn listen() -> Silent {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    Silent { addr, holder }
}
