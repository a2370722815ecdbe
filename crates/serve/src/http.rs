//! HTTP/1.1 requests in (parsed by `httparse`), response heads out.
//!
//! Only GET and HEAD of static files: other methods get 405, request bodies 400, more header
//! bytes than the limit (or more than `MAX_HEADERS` fields) 431, versions other than 1.0 and
//! 1.1 505, anything httparse refuses 400.

use std::cell::RefCell;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// Header fields a request may carry.
pub const MAX_HEADERS: usize = 64;
/// The request header a client uses to name its class (`--class name=...`).
pub const CLASS_HEADER: &str = "x-schedlab-class";
/// The request id the load generator sends, echoed into the server's per-request log.
pub const ID_HEADER: &str = "x-request-id";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    pub keep_alive: bool,
    pub class: Option<String>,
    pub request_id: Option<u64>,
    /// Bytes of the buffer this request used.
    pub len: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes needed.
    Partial,
    Complete(Request),
    /// A status to answer with, after which the connection closes.
    Error(u16),
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses one request from the start of `buf`.
pub fn parse(buf: &[u8], max_header: usize) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > max_header {
                Parsed::Error(431)
            } else {
                Parsed::Partial
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Parsed::Error(431),
        Err(httparse::Error::Version) => return Parsed::Error(version_status(buf)),
        Err(_) => return Parsed::Error(400),
    };
    if len > max_header {
        return Parsed::Error(431);
    }
    let version = req.version.unwrap_or(1);
    let method = match req.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => return Parsed::Error(405),
    };
    let target = req.path.unwrap_or("").to_string();
    let mut keep_alive = version == 1;
    let (mut class, mut request_id, mut hosts) = (None, None, 0);
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                keep_alive = false;
            } else if has_token(h.value, "keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(h.value).ok().map(str::trim) {
                Some("0") => {}
                _ => return Parsed::Error(400),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Error(400);
        } else if name.eq_ignore_ascii_case(CLASS_HEADER) {
            class = std::str::from_utf8(h.value)
                .ok()
                .map(|s| s.trim().to_string());
        } else if name.eq_ignore_ascii_case(ID_HEADER) {
            // Up to 2^63 - 1, what the log's signed column holds (-1 there: no id); a larger
            // or non-numeric value is no id.
            request_id = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&i| i <= i64::MAX as u64);
        }
    }
    // RFC 9112 3.2: a 1.1 request without exactly one Host field gets 400.
    if (version == 1 && hosts != 1) || hosts > 1 {
        return Parsed::Error(400);
    }
    Parsed::Complete(Request {
        method,
        target,
        version,
        keep_alive,
        class,
        request_id,
        len,
    })
}

/// A request line httparse refused for its version: 505 when the version is well formed
/// (`HTTP/2.0`), 400 when the line is not (`GET /a b HTTP/1.1`, `http/1.1`, `FOO/1.1`).
fn version_status(buf: &[u8]) -> u16 {
    let line = buf.split(|b| *b == b'\n').next().unwrap_or(b"");
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.split(|b| *b == b' ').collect::<Vec<_>>()[..] {
        [_, _, [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            505
        }
        _ => 400,
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

thread_local! {
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// The Date header value, formatted once per second per thread.
fn with_date<R>(f: impl FnOnce(&str) -> R) -> R {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            *d = (secs, httpdate::fmt_http_date(now));
        }
        f(&d.1)
    })
}

/// Appends a response head to `out`.
pub fn write_head(out: &mut Vec<u8>, status: u16, len: u64, ctype: &str, keep_alive: bool) {
    let conn = if keep_alive { "keep-alive" } else { "close" };
    with_date(|date| {
        let _ = write!(
            out,
            "HTTP/1.1 {status} {}\r\nServer: schedlab\r\nDate: {date}\r\nContent-Type: {ctype}\r\n\
             Content-Length: {len}\r\nConnection: {conn}\r\n",
            reason(status)
        );
    });
    if status == 405 {
        out.extend_from_slice(b"Allow: GET, HEAD\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A whole error response with a one-line text body; `head_only` (a HEAD request): the head
/// alone, with the length the body would have (RFC 9110 9.3.2).
pub fn error_response(status: u16, keep_alive: bool, head_only: bool) -> Vec<u8> {
    let body = format!("{status} {}\n", reason(status));
    let mut out = Vec::with_capacity(200);
    write_head(
        &mut out,
        status,
        body.len() as u64,
        "text/plain; charset=utf-8",
        keep_alive,
    );
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

pub fn content_type(path: &[u8]) -> &'static str {
    let ext = path
        .rsplit(|b| *b == b'.')
        .next()
        .filter(|e| e.len() < path.len())
        .unwrap_or(b"");
    match ext.to_ascii_lowercase().as_slice() {
        b"html" | b"htm" => "text/html; charset=utf-8",
        b"txt" | b"log" | b"csv" => "text/plain; charset=utf-8",
        b"css" => "text/css",
        b"js" => "text/javascript",
        b"json" => "application/json",
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Request {
        match parse(text.as_bytes(), 8192) {
            Parsed::Complete(r) => r,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn parses_get_head_and_connection_rules() {
        let r = ok("GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Request-Id: 42\r\nX-Schedlab-Class: vip\r\n\r\nGET");
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.target, "/a.txt");
        assert!(r.keep_alive);
        assert_eq!(r.request_id, Some(42));
        let id = |v: &str| {
            ok(&format!(
                "GET / HTTP/1.1\r\nHost: x\r\nX-Request-Id: {v}\r\n\r\n"
            ))
            .request_id
        };
        assert_eq!(id("9223372036854775807"), Some(i64::MAX as u64));
        // Past what the log's signed column holds, or not a number: no id, never a negative one.
        assert_eq!(id("9223372036854775808"), None);
        assert_eq!(id("18446744073709551615"), None);
        assert_eq!(id("abc"), None);
        assert_eq!(r.class.as_deref(), Some("vip"));
        assert_eq!(r.len, 73);
        assert!(!ok("GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n").keep_alive);
        assert!(!ok("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(ok("HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: x\r\n", 8192),
            Parsed::Partial
        );
    }

    #[test]
    fn refuses_malformed_and_oversized() {
        let cases: &[(&[u8], u16)] = &[
            (b"GARBAGE\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            (b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505),
            // Not a version at all: a malformed line, not an unsupported version.
            (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET /a http/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET /a FOO/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET /a HTTP/11\r\nHost: a\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\n\r\n", 405),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
                400,
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
                400,
            ),
            (b"GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ];
        for (text, status) in cases {
            assert_eq!(parse(text, 8192), Parsed::Error(*status), "{text:?}");
        }
        let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 9000));
        assert_eq!(parse(&big, 8192), Parsed::Error(431));
        let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..70 {
            many.extend_from_slice(format!("H{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many, 8192), Parsed::Error(431));
    }

    #[test]
    fn heads_are_well_formed() {
        let r = error_response(404, true, false);
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&r).unwrap() {
            httparse::Status::Complete(n) => n,
            _ => panic!(),
        };
        assert_eq!(resp.code, Some(404));
        let len = resp
            .headers
            .iter()
            .find(|h| h.name == "Content-Length")
            .map(|h| {
                std::str::from_utf8(h.value)
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .unwrap();
        assert_eq!(len, r.len() - n);
        // A HEAD's error: the same head, no body (the next response on the connection would
        // otherwise start inside it).
        let head = error_response(404, true, true);
        assert_eq!(head.len(), n);
        assert_eq!(&head[..], &r[..n]);
        assert_eq!(content_type(b"a/b.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"noext"), "application/octet-stream");
    }
}
