//! A TCP proxy on loopback that delivers every byte a fixed time after it arrived, in each
//! direction: a server some network distance away (a database in another zone, a hosted RPC
//! provider) in front of a local one. Bytes only, no protocol: it serves PostgreSQL's wire
//! protocol and HTTP alike. Data in flight is not held back by the delay (a chunk read is queued
//! with its time and the next one read at once), so only the latency changes, not the bandwidth.
//!
//! It can also be taken down ([`DelayProxy::set_down`]): its connections are cut and new ones
//! closed at once, as a server that went away; back up, it forwards again.
//!
//! It runs on a thread and runtime of its own, so that a test or benchmark blocking its own
//! runtime (or freezing a process) does not slow the proxy down.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch},
    time::Instant,
};

/// A running proxy; it stops when the process ends.
#[derive(Debug, Clone)]
pub struct DelayProxy {
    address: SocketAddr,
    upstream_ports: Arc<Mutex<Vec<u16>>>,
    down: Arc<watch::Sender<bool>>,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`, every chunk
    /// delayed by `one_way` in each direction (a round trip costs twice it).
    ///
    /// # Panics
    /// When no loopback port is free.
    pub fn start(upstream: SocketAddr, one_way: Duration) -> Self {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        std_listener.set_nonblocking(true).expect("a non-blocking listener");
        let address = std_listener.local_addr().expect("bound");
        let upstream_ports = Arc::new(Mutex::new(Vec::new()));
        let ports = Arc::clone(&upstream_ports);
        let (down, is_down) = watch::channel(false);
        std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("a tokio listener");
                while let Ok((client, _)) = listener.accept().await {
                    if *is_down.borrow() {
                        continue;
                    }
                    let (ports, mut is_down) = (Arc::clone(&ports), is_down.clone());
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(upstream).await else { return };
                        if let Ok(local) = server.local_addr() {
                            ports.lock().unwrap().push(local.port());
                        }
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        let both = async {
                            tokio::join!(
                                pipe(client_read, server_write, one_way),
                                pipe(server_read, client_write, one_way)
                            )
                        };
                        // Taken down: both sockets dropped, so both ends see the connection cut.
                        // (A proxy whose handle is gone can no longer be taken down.)
                        let taken_down = async {
                            if is_down.wait_for(|down| *down).await.is_err() {
                                std::future::pending::<()>().await;
                            }
                        };
                        tokio::select! {
                            _ = both => {}
                            () = taken_down => {}
                        }
                    });
                }
            });
        });
        Self { address, upstream_ports, down: Arc::new(down) }
    }

    /// Takes it down (every connection cut, new ones closed at once) or brings it back up.
    pub fn set_down(&self, down: bool) {
        self.down.send_replace(down);
    }

    /// Its address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The local ports of its connections to the upstream server so far: how the server names
    /// the proxied clients (PostgreSQL's `pg_stat_activity.client_port`).
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.upstream_ports.lock().unwrap().clone()
    }
}

/// Copies `from` to `to`, each chunk written `delay` after it was read; at end of file (or an
/// error) what was read is still delivered, then `to` is shut down.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(read) = from.read(&mut buffer).await {
            if read == 0 || queue.send((Instant::now() + delay, buffer[..read].to_vec())).is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = queued.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
