//! Who may reach the service from a browser. A service without a token listens on
//! loopback, where any web page the user opens could reach it: through DNS rebinding
//! (a name of the page's that resolves to 127.0.0.1, so the browser sends that name as
//! `Host`), or by posting a form across origins. So every request's `Host` must name
//! this machine's loopback or the listening address (or a name the operator allowed),
//! and every request that changes state and carries an `Origin` must come from the
//! service's own origin. With a token, `Host` is checked only against the names the
//! operator allowed, if any: the service may then be reached under any name, and a
//! page cannot send the token.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The names `Host` may give.
#[derive(Debug)]
pub(crate) struct Hosts {
    /// The operator's (`--allowed-host`), lower case.
    allowed: Vec<String>,
    /// The listening address's, when it is not a wildcard.
    listening: Option<IpAddr>,
    /// Whether `Host` is checked at all.
    check: bool,
}

impl Hosts {
    pub(crate) fn new(allowed: &[String], listening: SocketAddr, token: bool) -> Hosts {
        Hosts {
            allowed: allowed.iter().map(|h| h.to_ascii_lowercase()).collect(),
            listening: Some(listening.ip()).filter(|ip| !ip.is_unspecified()),
            check: !token || !allowed.is_empty(),
        }
    }

    /// Whether host name `name` (no port) may be asked for.
    fn allows(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if self.allowed.contains(&name) {
            return true;
        }
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || Some(ip) == self.listening,
            Err(_) => name == "localhost",
        }
    }
}

/// `authority` (`host[:port]`) without its port.
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(authority, |(host, _)| host)
}

/// Refuses (403) a request for a host the service is not, or one that changes state
/// from another origin.
pub(crate) async fn guard(
    State(hosts): State<Arc<Hosts>>,
    request: Request,
    next: Next,
) -> Response {
    match refusal(&hosts, &request) {
        None => next.run(request).await,
        Some(why) => ApiError::new(StatusCode::FORBIDDEN, "forbidden_origin", why).into_response(),
    }
}

fn refusal(hosts: &Hosts, request: &Request) -> Option<String> {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}"))
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if hosts.check {
        match host {
            Some(h) if hosts.allows(host_name(h)) => {}
            Some(h) => {
                return Some(format!(
                    "`Host: {}` is not this service: it answers on loopback names and its \
                     listening address (add a name with --allowed-host)",
                    h.escape_debug()
                ));
            }
            None => return Some("a request must say its `Host`".to_owned()),
        }
    }
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let origin = request.headers().get(header::ORIGIN);
    match origin {
        None => None,
        Some(_) if safe => None,
        Some(origin) => {
            let text = origin.to_str().unwrap_or("\u{fffd}");
            let authority = text
                .strip_prefix("http://")
                .or_else(|| text.strip_prefix("https://"));
            let same = match (authority, host) {
                (Some(a), Some(h)) => a.eq_ignore_ascii_case(h),
                _ => false,
            };
            let allowed = authority
                .is_some_and(|a| hosts.allowed.contains(&host_name(a).to_ascii_lowercase()));
            (!same && !allowed).then(|| {
                format!(
                    "a request from `Origin: {}` may not change anything here: only the \
                     service's own pages may (or an origin added with --allowed-host)",
                    text.escape_debug()
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, host: Option<&str>, origin: Option<&str>) -> Request {
        let mut r = axum::http::Request::builder()
            .method(method)
            .uri("/v1/runs");
        if let Some(h) = host {
            r = r.header("host", h);
        }
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn hosts_are_loopback_the_listening_address_or_allowed() {
        let at: SocketAddr = "127.0.0.1:8910".parse().unwrap();
        let hosts = Hosts::new(&["Plans.Internal".into()], at, false);
        for ok in [
            "127.0.0.1:8910",
            "localhost:8910",
            "LOCALHOST",
            "[::1]:8910",
            "127.0.0.2",
            "plans.internal:80",
        ] {
            assert_eq!(
                refusal(&hosts, &request("GET", Some(ok), None)),
                None,
                "{ok}"
            );
        }
        for bad in [
            "evil.example",
            "evil.example:8910",
            "localhost.evil.example",
            "127.0.0.1.nip.io:8910",
            "",
        ] {
            assert!(
                refusal(&hosts, &request("GET", Some(bad), None)).is_some(),
                "{bad}"
            );
        }
        assert!(refusal(&hosts, &request("GET", None, None)).is_some());
        // With a token and no names allowed, any name (the token guards it).
        let open = Hosts::new(&[], "0.0.0.0:80".parse().unwrap(), true);
        assert_eq!(
            refusal(&open, &request("GET", Some("evil.example"), None)),
            None
        );
    }

    #[test]
    fn only_the_services_own_origin_changes_state() {
        let hosts = Hosts::new(&[], "127.0.0.1:8910".parse().unwrap(), false);
        let host = Some("127.0.0.1:8910");
        for (method, origin, ok) in [
            ("POST", None, true),
            ("POST", Some("http://127.0.0.1:8910"), true),
            ("POST", Some("http://evil.example"), false),
            ("POST", Some("null"), false),
            ("POST", Some("http://localhost:8910"), false),
            ("DELETE", Some("http://evil.example"), false),
            ("GET", Some("http://evil.example"), true),
        ] {
            let refused = refusal(&hosts, &request(method, host, origin));
            assert_eq!(refused.is_none(), ok, "{method} {origin:?}: {refused:?}");
        }
    }
}
