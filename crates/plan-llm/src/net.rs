//! One service endpoint: retries with exponential backoff and jitter, a per-attempt and a
//! total timeout, a concurrency limit, a cap on response size, redirects kept to the
//! configured origin, and responses read whole (JSON) or as server-sent events.
//!
//! Error messages are built here from the status, the URL and the innermost cause only;
//! request headers (where the bearer key lives) are never formatted.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::error::{CallError, CallErrorKind, preview, secs};
use crate::redact::Redactor;
use crate::secret::Secret;
use crate::sse::SseDecoder;

/// A call's attempts together may take this many times the per-attempt timeout.
pub const TOTAL_TIMEOUT_FACTOR: u32 = 3;
/// "No deadline" for endpoints without a timeout: a year.
const FAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Redirects followed within one origin before the request fails.
pub const MAX_REDIRECTS: usize = 3;

/// Follows a redirect only to the origin (scheme, host, port) of the URL first requested,
/// at most [`MAX_REDIRECTS`] times. A redirect elsewhere is not followed: its 3xx response
/// comes back and fails the call naming the Location, so a plan's arguments (a 307 re-sends
/// the POST body) never reach a host the tools file does not name, such as a cloud
/// metadata address.
pub(crate) fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.stop();
        };
        let same_origin = first.scheme() == attempt.url().scheme()
            && first.host_str() == attempt.url().host_str()
            && first.port_or_known_default() == attempt.url().port_or_known_default();
        if !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            let msg = format!("more than {MAX_REDIRECTS} redirects");
            attempt.error(msg)
        } else {
            attempt.follow()
        }
    })
}

/// Resolves host names as the system does, but never to a link-local address
/// (169.254.0.0/16, fe80::/10: cloud metadata services live there). A URL that writes
/// such an address literally is not resolved and still works: the tools file named it.
#[derive(Debug)]
pub(crate) struct NoLinkLocal;

fn link_local(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_link_local(),
        std::net::IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
    }
}

impl reqwest::dns::Resolve for NoLinkLocal {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let all: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<std::net::SocketAddr> = all
                .iter()
                .copied()
                .filter(|a| !link_local(a.ip()))
                .collect();
            if allowed.is_empty() && !all.is_empty() {
                return Err(format!(
                    "{host} resolves only to link-local addresses, which are refused (write the address in the URL to reach it)"
                )
                .into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// Characters of a response body an error message shows.
const BODY_PREVIEW_CHARS: usize = 400;
/// Responses larger than this are refused rather than buffered.
const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// `Retry-After` is honoured up to this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// When and how often to retry.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts, including the first (≥ 1).
    pub tries: u32,
    /// Delay before the second attempt; doubles each time.
    pub base_delay: Duration,
    /// Ceiling of one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            tries: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// Delay before attempt `attempt + 1` (attempt counts from 1): "equal jitter", i.e. a
    /// random point in the upper half of the exponential step, so synchronized clients
    /// spread out while the delay still grows.
    fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base_delay.saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u32::MAX),
        );
        let full = exp.min(self.max_delay);
        let half = full / 2;
        let jitter_ns = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        let extra = if jitter_ns == 0 {
            0
        } else {
            rand::thread_rng().gen_range(0..=jitter_ns)
        };
        half + Duration::from_nanos(extra)
    }
}

/// One service endpoint with its limits.
/// Built by [`crate::Connector::endpoint`], which checks the configuration.
#[derive(Debug)]
pub struct Endpoint {
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) auth: Option<Secret>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retry: RetryPolicy,
    pub(crate) limit: Semaphore,
    /// The host's secrets: an error body is redacted before it is shortened.
    pub(crate) redactor: Arc<Redactor>,
}

/// What one attempt produced.
enum Attempt {
    Done(Value),
    /// Worth retrying; optional server-requested delay.
    Retry(CallError, Option<Duration>),
    Fatal(CallError),
}

/// Receives the `data` of each server-sent event as it arrives and says what it did with
/// it; an error stops the read and fails the call.
pub type EventSink<'a> = dyn FnMut(&str) -> Result<Taken, CallError> + Send + 'a;

/// What an [`EventSink`] did with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Nothing was passed on (a role-only delta, an empty event): a failure after it may
    /// still be retried.
    Ignored,
    /// Part of the answer was passed on: a failure after it is not retried.
    Used,
    /// The answer is complete: reading stops (a server may keep the connection open).
    End,
    /// The answer is complete, and a trailer may follow (the token usage OpenAI sends
    /// after the last piece): reading goes on for [`TRAILER_WAIT`] at most, or until the
    /// stream ends or an event says [`Taken::End`].
    Finished,
}

tokio::task_local! {
    /// The W3C `traceparent` of the run whose calls this task makes: sent with each
    /// request, so that a server's own spans join the run's trace.
    static TRACEPARENT: String;
}

/// Runs `fut` with every request it makes carrying `traceparent` (none: as it is).
pub async fn with_traceparent<F: std::future::Future>(
    traceparent: Option<String>,
    fut: F,
) -> F::Output {
    match traceparent {
        Some(t) => TRACEPARENT.scope(t, fut).await,
        None => fut.await,
    }
}

/// The `traceparent` the requests of this task carry, if any: for a task spawned from it
/// to carry it too ([`with_traceparent`]).
pub fn current_traceparent() -> Option<String> {
    TRACEPARENT.try_with(Clone::clone).ok()
}

/// An attempt of a call that failed and was tried again.
#[derive(Clone, Debug)]
pub struct Retry {
    /// When it failed.
    pub at: std::time::SystemTime,
    pub kind: CallErrorKind,
    /// Why, redacted.
    pub message: String,
    /// The wait before the next attempt.
    pub wait: Duration,
}

/// What a call noted about itself as it was made, read once it is answered.
#[derive(Default)]
pub struct CallNotes {
    /// Its attempts that failed and were tried again.
    retries: std::cell::RefCell<Vec<Retry>>,
    /// Answered from a recording, not by its tool.
    replayed: std::cell::Cell<bool>,
}

impl CallNotes {
    /// Its retried attempts, and whether a recording answered it.
    pub fn into_parts(self) -> (Vec<Retry>, bool) {
        (self.retries.into_inner(), self.replayed.get())
    }
}

tokio::task_local! {
    static NOTES: CallNotes;
}

/// `fut` (one call) with its notes: once it is answered, `take_value` on the pinned
/// future gives them.
///
/// NB: a future, not an `async fn` around one: each level of `async` keeps a copy of the
/// future it wraps, and a call wrapped twice so took 1,120 bytes for a 96-byte call in
/// every call a batch has out.
pub fn noting<F: std::future::Future>(
    fut: F,
) -> tokio::task::futures::TaskLocalFuture<CallNotes, F> {
    NOTES.scope(CallNotes::default(), fut)
}

/// Notes that the call being made was answered from a recording.
pub fn note_replayed() {
    let _ = NOTES.try_with(|n| n.replayed.set(true));
}

/// How long a stream whose answer is complete is read on for its trailer.
pub const TRAILER_WAIT: Duration = Duration::from_millis(500);

/// How the body of a successful response is read.
enum Read<'s, 'a> {
    /// Whole and capped, as JSON (a body that is not JSON becomes a string).
    Json,
    /// As server-sent events, each passed on as it arrives.
    Events(&'s mut EventSink<'a>),
}

impl Endpoint {
    /// POSTs `body` as JSON, retrying transient failures. All attempts together, with
    /// their backoff and any wait for a slot between them, stop [`TOTAL_TIMEOUT_FACTOR`] ×
    /// the per-attempt timeout after the first attempt starts, so a server that never
    /// answers costs bounded time. The wait for the first slot does not count: a call
    /// queued behind others (a batch, a plan's many calls) is not failed for being queued.
    /// The response is parsed as JSON; a body that is not JSON is returned as a string.
    pub async fn post_json(&self, body: &Value) -> Result<Value, CallError> {
        self.post(body, Read::Json).await
    }

    /// POSTs `body` as JSON and reads the answer as server-sent events (`text/event-stream`),
    /// passing each event's data to `sink` as it arrives. Retried as [`Endpoint::post_json`]
    /// is, but only until `sink` has used an event: after that a failure fails the call,
    /// since the receiver has acted on part of the answer. The timeout applies to the
    /// wait for the response and then to each wait for more of it; all attempts
    /// together, the whole answer included, stop at [`TOTAL_TIMEOUT_FACTOR`] × the
    /// timeout as for [`Endpoint::post_json`], so an answer that trickles is cut too.
    pub async fn post_events(
        &self,
        body: &Value,
        sink: &mut EventSink<'_>,
    ) -> Result<(), CallError> {
        self.post(body, Read::Events(sink)).await.map(drop)
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How long one call may take, all attempts together ([`TOTAL_TIMEOUT_FACTOR`] × the
    /// per-attempt timeout); `None` without a timeout.
    pub fn budget(&self) -> Option<Duration> {
        self.timeout.map(|t| t.saturating_mul(TOTAL_TIMEOUT_FACTOR))
    }

    async fn post(&self, body: &Value, mut read: Read<'_, '_>) -> Result<Value, CallError> {
        let total = self.budget();
        let out_of_time = |total: Duration| {
            CallError::new(
                CallErrorKind::Timeout,
                format!(
                    "POST {}: no answer within {} s, all attempts together ({TOTAL_TIMEOUT_FACTOR} × timeout_secs)",
                    self.url,
                    secs(total)
                ),
            )
        };
        let tries = self.retry.tries.max(1);
        let mut attempt = 1;
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let outcome = {
                // NB: the permit is held for the request only, not across the backoff
                // sleep, so a failing call does not starve the others.
                let closed = |_| {
                    CallError::new(
                        CallErrorKind::Config,
                        "internal: concurrency limiter closed",
                    )
                };
                // NB: once the first attempt has started, waiting for a slot counts too.
                let _permit = match deadline {
                    None => self.limit.acquire().await.map_err(closed)?,
                    Some(at) => match tokio::time::timeout_at(at, self.limit.acquire()).await {
                        Ok(p) => p.map_err(closed)?,
                        Err(_) => return Err(out_of_time(total.unwrap_or(FAR))),
                    },
                };
                let at = *deadline.get_or_insert_with(|| {
                    let now = tokio::time::Instant::now();
                    total.and_then(|t| now.checked_add(t)).unwrap_or(now + FAR)
                });
                // NB: a streamed answer too: its per-wait timeouts alone would let one
                // that trickles (a byte a second) go on forever.
                match tokio::time::timeout_at(at, self.attempt(body, &mut read)).await {
                    Ok(outcome) => outcome,
                    Err(_) => return Err(out_of_time(total.unwrap_or(FAR))),
                }
            };
            match outcome {
                Attempt::Done(v) => return Ok(v),
                Attempt::Fatal(e) => return Err(e),
                Attempt::Retry(e, _) if attempt >= tries => {
                    let kind = e.kind;
                    let msg = if tries == 1 {
                        e.message
                    } else {
                        format!("{} (gave up after {tries} attempts)", e.message)
                    };
                    return Err(CallError::new(kind, msg));
                }
                Attempt::Retry(e, asked) => {
                    let d = asked
                        .map(|a| a.min(MAX_RETRY_AFTER))
                        .unwrap_or_else(|| self.retry.delay(attempt));
                    if let (Some(at), Some(t)) = (deadline, total)
                        && tokio::time::Instant::now() + d >= at
                    {
                        // The last answer says more than "out of time".
                        return Err(CallError::new(
                            e.kind,
                            format!(
                                "{} (gave up after {attempt} attempts: no time left for another within {} s, {TOTAL_TIMEOUT_FACTOR} × timeout_secs)",
                                e.message,
                                secs(t)
                            ),
                        ));
                    }
                    // NB: outside a call that notes its retries (a planner's), nothing to do.
                    let _ = NOTES.try_with(|n| {
                        n.retries.borrow_mut().push(Retry {
                            at: std::time::SystemTime::now(),
                            kind: e.kind,
                            message: e.message.clone(),
                            wait: d,
                        });
                    });
                    tokio::time::sleep(d).await;
                    attempt += 1;
                }
            }
        }
    }

    /// The start of a response body for an error message, secrets redacted. NB: redacted
    /// whole, then shortened, so a cut cannot leave part of a key.
    pub fn preview(&self, body: &str) -> String {
        preview(&self.redactor.text(body), BODY_PREVIEW_CHARS)
    }

    async fn attempt(&self, body: &Value, read: &mut Read<'_, '_>) -> Attempt {
        let mut req = self.client.post(&self.url).json(body);
        if let Some(key) = &self.auth {
            req = req.bearer_auth(key.expose());
        }
        if let Ok(traceparent) = TRACEPARENT.try_with(Clone::clone) {
            req = req.header("traceparent", traceparent);
        }
        let streaming = matches!(read, Read::Events(_));
        if let Some(t) = self.timeout.filter(|_| !streaming) {
            req = req.timeout(t);
        }
        let sent = match self.timeout.filter(|_| streaming) {
            Some(t) => match tokio::time::timeout(t, req.send()).await {
                Ok(r) => r,
                Err(_) => return self.idle_timeout(t, false),
            },
            None => req.send().await,
        };
        let resp = match sent {
            Ok(r) => r,
            Err(e) => return self.transport_error(&e),
        };
        let status = resp.status();
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        if status.is_success()
            && let Read::Events(sink) = read
        {
            return self.read_events(resp, &mut **sink).await;
        }
        let bytes = match read_capped(resp).await {
            Ok(b) => b,
            Err(ReadError::TooLarge) => return Attempt::Fatal(self.too_large()),
            Err(ReadError::Http(e)) => return self.transport_error(&e),
        };
        if status.is_redirection() {
            // The redirect policy stopped here: the Location is on another origin.
            let to = location.as_deref().unwrap_or("(no Location header)");
            return Attempt::Fatal(CallError::new(
                CallErrorKind::Transport,
                format!(
                    "POST {}: HTTP {status}: redirect to {to} refused: only redirects within the same origin (scheme, host and port) are followed",
                    self.url
                ),
            ));
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let retry = status.as_u16() == 429 || status.is_server_error();
            // NB: a client error other than 429 says the service did not act on the
            // request (a run store may send a `write` call again after it, not after a
            // timeout or a 5xx).
            let kind = if retry {
                CallErrorKind::Transport
            } else {
                CallErrorKind::Refused
            };
            let err = CallError::new(
                kind,
                format!(
                    "POST {}: HTTP {status}: {}",
                    self.url,
                    self.preview(text.trim())
                ),
            );
            return if retry {
                Attempt::Retry(err, retry_after)
            } else {
                Attempt::Fatal(err)
            };
        }
        match serde_json::from_slice(&bytes) {
            Ok(v) => Attempt::Done(v),
            Err(_) => Attempt::Done(Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        }
    }

    /// Reads a successful response as server-sent events. A server that ignored the
    /// request to stream and answered with one JSON body is read as one event.
    async fn read_events(&self, mut resp: reqwest::Response, sink: &mut EventSink<'_>) -> Attempt {
        let streamed = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| {
                t.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
        if !streamed {
            let whole = read_capped(resp);
            let whole = match self.timeout {
                Some(t) => match tokio::time::timeout(t, whole).await {
                    Ok(r) => r,
                    Err(_) => return self.idle_timeout(t, false),
                },
                None => whole.await,
            };
            return match whole {
                Ok(bytes) => match sink(&String::from_utf8_lossy(&bytes)) {
                    Ok(_) => Attempt::Done(Value::Null),
                    Err(e) => Attempt::Fatal(e),
                },
                Err(ReadError::TooLarge) => Attempt::Fatal(self.too_large()),
                Err(ReadError::Http(e)) => self.transport_error(&e),
            };
        }
        let mut decoder = SseDecoder::default();
        let mut used = false;
        let mut read = 0usize;
        // NB: the receiver has acted on part of the answer: a failure is not retried.
        let broke_off = |outcome: Attempt, used: bool| match outcome {
            Attempt::Retry(err, _) if used => Attempt::Fatal(CallError::new(
                err.kind,
                format!(
                    "{} (the answer broke off after it had started)",
                    err.message
                ),
            )),
            other => other,
        };
        // NB: only progress of the answer itself moves the deadline: keep-alive comments
        // and empty events do not keep a stalled answer waiting forever.
        let mut deadline = self.timeout.map(|t| (t, tokio::time::Instant::now() + t));
        // NB: set once the answer is complete: what is left is a trailer, not waited for
        // beyond this.
        let mut trailer: Option<tokio::time::Instant> = None;
        loop {
            let next = match (trailer, deadline) {
                (Some(at), _) => match tokio::time::timeout_at(at, resp.chunk()).await {
                    Ok(c) => c,
                    Err(_) => return Attempt::Done(Value::Null),
                },
                (None, Some((t, at))) => match tokio::time::timeout_at(at, resp.chunk()).await {
                    Ok(c) => c,
                    Err(_) => return broke_off(self.idle_timeout(t, used), used),
                },
                (None, None) => resp.chunk().await,
            };
            let chunk = match next {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) if trailer.is_some() => return Attempt::Done(Value::Null),
                Err(e) => return broke_off(self.transport_error(&e), used),
            };
            read = read.saturating_add(chunk.len());
            if read > MAX_RESPONSE_BYTES {
                return Attempt::Fatal(self.too_large());
            }
            for data in decoder.push(&chunk) {
                match sink(&data) {
                    Ok(Taken::Ignored) => {}
                    Ok(Taken::Used) => {
                        used = true;
                        if let Some((t, at)) = &mut deadline {
                            *at = tokio::time::Instant::now() + *t;
                        }
                    }
                    Ok(Taken::End) => return Attempt::Done(Value::Null),
                    Ok(Taken::Finished) => {
                        used = true;
                        trailer.get_or_insert_with(|| tokio::time::Instant::now() + TRAILER_WAIT);
                    }
                    Err(e) => return Attempt::Fatal(e),
                }
            }
        }
        if let Some(data) = decoder.finish()
            && let Err(e) = sink(&data)
        {
            return Attempt::Fatal(e);
        }
        Attempt::Done(Value::Null)
    }

    /// No (more of the) answer within the timeout while streaming.
    fn idle_timeout(&self, t: Duration, started: bool) -> Attempt {
        let what = if started {
            "no more of the answer"
        } else {
            "no answer"
        };
        Attempt::Retry(
            CallError::new(
                CallErrorKind::Timeout,
                format!("POST {}: {what} within {} s", self.url, secs(t)),
            ),
            None,
        )
    }

    fn too_large(&self) -> CallError {
        CallError::new(
            CallErrorKind::BadResponse,
            format!(
                "POST {}: response larger than {MAX_RESPONSE_BYTES} bytes",
                self.url
            ),
        )
    }

    /// A failure without a usable response. Built from the error's kind and innermost
    /// cause, never from the request (headers), so keys cannot leak.
    fn transport_error(&self, e: &reqwest::Error) -> Attempt {
        if e.is_timeout() {
            let t = self.timeout.map(secs).unwrap_or_else(|| "?".into());
            return Attempt::Retry(
                CallError::new(
                    CallErrorKind::Timeout,
                    format!("POST {}: timed out after {t} s", self.url),
                ),
                None,
            );
        }
        let mut cause: &dyn std::error::Error = e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        if e.is_redirect() {
            let at = e.url().map_or_else(|| self.url.clone(), |u| u.to_string());
            return Attempt::Fatal(CallError::new(
                CallErrorKind::Transport,
                format!("POST {}: redirect failed at {at}: {cause}", self.url),
            ));
        }
        let what = if e.is_connect() {
            "connection failed"
        } else if e.is_body() || e.is_decode() {
            "reading the response failed"
        } else {
            "request failed"
        };
        let err = CallError::new(
            CallErrorKind::Transport,
            format!("POST {}: {what}: {cause}", self.url),
        );
        if e.is_builder() {
            Attempt::Fatal(err)
        } else {
            Attempt::Retry(err, None)
        }
    }
}

enum ReadError {
    TooLarge,
    Http(reqwest::Error),
}

async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, ReadError> {
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(ReadError::TooLarge);
    }
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(ReadError::Http)? {
        if buf.len().saturating_add(chunk.len()) > MAX_RESPONSE_BYTES {
            return Err(ReadError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_addresses() {
        for (ip, want) in [
            ("169.254.169.254", true),
            ("169.254.0.1", true),
            ("127.0.0.1", false),
            ("10.0.0.1", false),
            ("fe80::1", true),
            ("febf::1", true),
            ("fec0::1", false),
            ("::1", false),
            ("::ffff:169.254.169.254", true),
        ] {
            assert_eq!(link_local(ip.parse().unwrap()), want, "{ip}");
        }
    }

    #[test]
    fn backoff_grows_and_stays_in_bounds() {
        let p = RetryPolicy {
            tries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        for attempt in 1..40 {
            let full = Duration::from_millis(100)
                .saturating_mul(1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX))
                .min(Duration::from_secs(1));
            let d = p.delay(attempt);
            assert!(
                d >= full / 2 && d <= full,
                "attempt {attempt}: {d:?} vs {full:?}"
            );
        }
        let zero = RetryPolicy {
            tries: 3,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        };
        assert_eq!(zero.delay(5), Duration::ZERO);
    }
}
