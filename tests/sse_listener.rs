//! A listener of the change feed's stream (`GET /api/v1/changes/stream`) as a client sees it:
//! the Server-Sent Events parsed as they arrive (`kya_client::server_sent_events`), and every byte
//! received kept, for what an event parser drops (the heartbeat's comments).

use std::{
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt};

use crate::edge_fixture::fresh_ip;

/// The segment size of a client reached over Ethernet (1,500 bytes less the IP and TCP headers).
pub const INTERNET_MSS: u32 = 1_460;

/// One message of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub event: String,
    pub data: String,
}

type Events = Pin<Box<dyn Stream<Item = Result<Message, String>> + Send>>;

/// An open stream.
pub struct SseListener {
    events: Events,
    received: Arc<Mutex<Vec<u8>>>,
    /// The response's headers.
    pub headers: reqwest::header::HeaderMap,
    /// Set once the body has ended.
    ended: Arc<std::sync::atomic::AtomicBool>,
}

/// A refused stream: its status and body.
#[derive(Debug, Clone)]
pub struct Refused {
    pub status: u16,
    pub body: String,
    pub headers: reqwest::header::HeaderMap,
}

impl SseListener {
    /// Opens `base` + `path_and_query` from a fresh client IP, with `Last-Event-ID` when given.
    pub async fn open(
        base: &str,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Self, Refused> {
        Self::open_as(&fresh_ip(), base, path_and_query, last_event_id).await
    }

    /// [`SseListener::open`] from client IP `ip` (the stream's caps count a client's streams).
    pub async fn open_as(
        ip: &str,
        base: &str,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Self, Refused> {
        let mut request = crate::http_client()
            .get(format!("{base}{path_and_query}"))
            .header("cf-connecting-ip", ip)
            .header("accept", "text/event-stream");
        if let Some(last) = last_event_id {
            request = request.header("last-event-id", last);
        }
        let response = request.send().await.unwrap_or_else(|error| panic!("{path_and_query}: {error}"));
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status != 200 {
            let body = response.text().await.unwrap_or_default();
            return Err(Refused { status, body, headers });
        }
        let bytes = futures::stream::unfold(response, |mut response| async move {
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk.to_vec()), response)),
                Ok(None) => None,
                Err(error) => Some((Err(error.to_string()), response)),
            }
        });
        Ok(Self::reading(bytes, headers))
    }

    /// [`SseListener::open`] (with `Last-Event-ID` when given) on a socket shaped as an internet
    /// client's that never reads: a
    /// receive buffer of `receive_buffer` bytes and a segment size of [`INTERNET_MSS`], both set
    /// before it connects. Over loopback, a socket otherwise offers a 64 KiB segment size, from
    /// which the server's kernel sizes its send buffer (megabytes for ten segments), and Linux
    /// autotunes the receive buffer as large: 300 such sockets left unread took the machine's TCP
    /// memory to 641 MiB even with small receive buffers, near the kernel's pressure mark once
    /// other tests' sockets are added. Shaped so, the kernel holds little for it, and what waits
    /// for it waits on the server's side, as it would for a real client.
    pub async fn open_as_internet_client(
        base: &str,
        path_and_query: &str,
        last_event_id: Option<&str>,
        receive_buffer: usize,
    ) -> Result<Self, Refused> {
        use http_body_util::BodyExt;
        let address: std::net::SocketAddr = base
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|_| panic!("{base}: not http://ip:port"));
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
        socket.set_recv_buffer_size(receive_buffer).expect("a receive buffer size");
        socket.set_tcp_mss(INTERNET_MSS).expect("a segment size");
        // A connect on loopback does not wait: done before the socket turns non-blocking.
        socket.connect(&address.into()).unwrap_or_else(|error| panic!("{base}: {error}"));
        socket.set_nonblocking(true).expect("a non-blocking socket");
        let stream = tokio::net::TcpStream::from_std(socket.into()).expect("a Tokio socket");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("an HTTP/1.1 connection");
        tokio::spawn(connection);
        let mut request = hyper::Request::get(path_and_query)
            .header("host", address.to_string())
            .header("cf-connecting-ip", fresh_ip())
            .header("accept", "text/event-stream");
        if let Some(last) = last_event_id {
            request = request.header("last-event-id", last);
        }
        let request = request.body(http_body_util::Empty::<hyper::body::Bytes>::new()).expect("a request");
        let response =
            sender.send_request(request).await.unwrap_or_else(|error| panic!("{path_and_query}: {error}"));
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body();
        if status != 200 {
            let body = body.collect().await.map(|body| body.to_bytes()).unwrap_or_default();
            return Err(Refused { status, body: String::from_utf8_lossy(&body).into_owned(), headers });
        }
        let bytes = futures::stream::unfold(body, |mut body| async move {
            loop {
                match body.frame().await? {
                    Ok(frame) => match frame.into_data() {
                        Ok(data) => return Some((Ok(data.to_vec()), body)),
                        Err(_trailers) => continue,
                    },
                    Err(error) => return Some((Err(error.to_string()), body)),
                }
            }
        });
        Ok(Self::reading(bytes, headers))
    }

    /// A listener of a response body's `bytes`, each kept as it arrives; the body's end is
    /// recorded (`ended`).
    fn reading(
        bytes: impl Stream<Item = Result<Vec<u8>, String>> + Send + 'static,
        headers: reqwest::header::HeaderMap,
    ) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&received);
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let end = Arc::clone(&ended);
        let bytes = bytes
            .inspect(move |chunk| {
                if let Ok(chunk) = chunk {
                    kept.lock().unwrap().extend_from_slice(chunk);
                }
            })
            .chain(futures::stream::poll_fn(move |_| {
                end.store(true, std::sync::atomic::Ordering::SeqCst);
                std::task::Poll::Ready(None)
            }));
        let events = kya_client::server_sent_events(bytes).map(|event| {
            event
                .map(|event| Message { id: event.id, event: event.event, data: event.data })
                .map_err(|error| error.to_string())
        });
        Self { events: Box::pin(events), received, headers, ended }
    }

    /// Whether the response's body has ended (the server closed the stream).
    pub fn ended(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The next message within `within`; `None` when none came (or the stream ended).
    pub async fn next(&mut self, within: Duration) -> Option<Message> {
        match tokio::time::timeout(within, self.events.next()).await {
            Ok(Some(Ok(message))) => Some(message),
            Ok(Some(Err(error))) => panic!("the stream broke: {error}"),
            Ok(None) | Err(_) => None,
        }
    }

    /// The next `count` messages, each within `within` of the one before (fewer if they stop).
    pub async fn take(&mut self, count: usize, within: Duration) -> Vec<Message> {
        let mut taken = Vec::with_capacity(count);
        while taken.len() < count {
            match self.next(within).await {
                Some(message) => taken.push(message),
                None => break,
            }
        }
        taken
    }

    /// Everything received so far, as text.
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }

    /// Waits up to `within` for `text` to have arrived `times` times; whether it did.
    pub async fn wait_for(&mut self, text: &str, times: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.received().matches(text).count() >= times {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            // Reading drives the connection; a message arriving meanwhile is a test's surprise.
            if let Some(message) = self.next(Duration::from_millis(100)).await {
                panic!("waiting for {text:?}, an event came: {message:?}");
            }
        }
    }
}
