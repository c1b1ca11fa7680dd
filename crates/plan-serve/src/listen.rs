//! The service's connections: accepted, held to time limits and capped in number, so
//! that slow or idle clients cannot hold the service. A request's headers must arrive
//! within `header_timeout`, its body within `body_timeout` of its headers; a body
//! declared larger than the service takes is refused (413) before any of it is read.
//! At most `max_connections` are open: past that, the oldest connection not in a request
//! (idle, or still sending its headers) is closed for the new one, and when every one
//! is in a request the new one is answered 503 and closed. So a normal request is
//! answered while a thousand slow ones are open, whatever the process's file limit.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use http_body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;

use crate::error::{ApiError, BodyTimedOut};
use crate::trim::{LARGE, Trimmer};

/// How connections are held.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// A request's headers must arrive within this (an idle connection is closed after it).
    pub header_timeout: Duration,
    /// A request's body must arrive within this, from its headers.
    pub body_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// The connections open, by the order they were accepted in.
#[derive(Default)]
struct Open {
    next: u64,
    conns: BTreeMap<u64, Conn>,
}

struct Conn {
    /// Requests it is in (from its headers to the end of its response's body).
    busy: Arc<AtomicUsize>,
    /// Told to close at once.
    evict: watch::Sender<bool>,
}

impl Open {
    /// Closes the oldest connection in no request; whether there was one.
    fn evict_one(&mut self) -> bool {
        let idle = self
            .conns
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
            .map(|(id, _)| *id);
        match idle.and_then(|id| self.conns.remove(&id)) {
            Some(conn) => {
                conn.evict.send_replace(true);
                true
            }
            None => false,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits for the connections
/// open to finish their requests (see [`crate::Service::serve`]).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    (limits, max_body): (ConnLimits, usize),
    trimmer: Trimmer,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open: Arc<Mutex<Open>> = Arc::default();
    let (stop, stopping) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            // NB: the tasks of closed connections are reaped as they end.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) if is_connection_error(&e) => continue,
            // NB: out of file descriptors, most likely: make room, and try again soon
            // rather than spin.
            Err(_) => {
                lock(&open).evict_one();
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // NB: without TCP_NODELAY a small write (an event, a short answer) waits for the
        // client's delayed ACK: 40 ms a response here.
        let _ = tcp.set_nodelay(true);
        let (busy, evicted) = {
            let mut open = lock(&open);
            if open.conns.len() >= limits.max_connections.max(1) && !open.evict_one() {
                drop(open);
                tasks.spawn(refuse(tcp));
                continue;
            }
            let busy = Arc::new(AtomicUsize::new(0));
            let (evict, evicted) = watch::channel(false);
            let id = open.next;
            open.next += 1;
            open.conns.insert(
                id,
                Conn {
                    busy: busy.clone(),
                    evict,
                },
            );
            (busy, (id, evicted))
        };
        let watched = (evicted, stopping.clone());
        let served = serve_one(
            tcp,
            (app.clone(), trimmer.clone()),
            (limits, max_body),
            busy,
            watched,
        );
        let open = open.clone();
        tasks.spawn(async move {
            let id = served.await;
            lock(&open).conns.remove(&id);
        });
    }
    drop(listener);
    stop.send_replace(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

fn lock(open: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(|e| e.into_inner())
}

/// An error of one connection's accept (the client gave up), not of the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Answers a connection past the cap with 503 and closes it, its request unread.
async fn refuse(mut tcp: tokio::net::TcpStream) {
    let body = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        "the service has as many connections open as it takes: try again",
    )
    .body()
    .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(body.as_bytes()).await?;
        tcp.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// One connection served by hyper until it closes, is evicted or the service stops (its
/// request going on then ends first), each request's body held to its time limit and the
/// connection counted busy while it is in a request; the connection's number.
async fn serve_one(
    tcp: tokio::net::TcpStream,
    (app, trimmer): (Router, Trimmer),
    (limits, max_body): (ConnLimits, usize),
    busy: Arc<AtomicUsize>,
    ((id, mut evicted), mut stopping): ((u64, watch::Receiver<bool>), watch::Receiver<bool>),
) -> u64 {
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let guard = Busy::start(&busy);
        let (app, trimmer) = (app.clone(), trimmer.clone());
        async move {
            let declared = declared_length(&request);
            if let Some(refused) = too_large(declared, max_body) {
                // NB: what the client sends meanwhile is read and dropped for a moment, so
                // that a client still writing its body reads the answer rather than a
                // connection reset under its write.
                let body = Body::new(request.into_body());
                tokio::spawn(tokio::time::timeout(LINGER, async move {
                    let mut data = body.into_data_stream();
                    while let Some(Ok(_)) = futures::StreamExt::next(&mut data).await {}
                }));
                return Ok::<_, Infallible>(refused);
            }
            let deadline = tokio::time::Instant::now() + limits.body_timeout;
            let request = request.map(|body| {
                Body::new(Timed {
                    body,
                    sleep: Box::pin(tokio::time::sleep_until(deadline)),
                })
            });
            let response = app.oneshot(request).await.unwrap_or_else(|e| match e {});
            if declared.is_some_and(|n| n > LARGE as u64) {
                trimmer.note();
            }
            Ok(response.map(|body| Body::new(Held { body, _busy: guard })))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = http
        .serve_connection(TokioIo::new(tcp), service)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = async { drop(evicted.wait_for(|e| *e).await) } => {}
        () = async { drop(stopping.wait_for(|s| *s).await) } => {
            // NB: the request going on ends (event streams end once told); the
            // connection closes after it.
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    id
}

/// How long a refused body is read and dropped before its connection is closed.
const LINGER: Duration = Duration::from_secs(5);

/// The length of the body `request` declares, if it does.
fn declared_length<B>(request: &Request<B>) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse::<u64>()
        .ok()
}

/// 413, when a request declares a body longer than `max_body`: answered before any of it
/// is read.
fn too_large(declared: Option<u64>, max_body: usize) -> Option<Response<Body>> {
    let declared = declared?;
    if declared <= max_body as u64 {
        return None;
    }
    let mut response = ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the body is {declared} bytes; the service takes at most {max_body}"),
    )
    .into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    Some(response)
}

/// Counts a connection in a request while it lives.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn start(busy: &Arc<AtomicUsize>) -> Busy {
        busy.fetch_add(1, Ordering::AcqRel);
        Busy(busy.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response's body, the connection counted busy until it is sent or dropped.
struct Held {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request's body that fails once its time is up.
struct Timed {
    body: hyper::body::Incoming,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Timed {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The cap on connections for this process: half its file limit (the rest is for its
/// store, its tools and the connections past the cap answered 503), at most 4096. The
/// soft limit is raised to the hard one first (up to 65536), as servers do: the default
/// soft limit of 1024 is a relic.
pub fn default_max_connections() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let mut files = limit.current.unwrap_or(65_536);
    let wanted = limit.maximum.unwrap_or(65_536).min(65_536);
    if wanted > files {
        let raised = Rlimit {
            current: Some(wanted),
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            files = wanted;
        }
    }
    usize::try_from(files / 2).unwrap_or(4096).clamp(8, 4096)
}
