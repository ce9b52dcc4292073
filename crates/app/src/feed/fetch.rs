//! One conditional GET of a feed: `If-None-Match` / `If-Modified-Since`
//! from the last 200, a User-Agent, and limits on the body's size, the
//! total time and redirects. Errors never carry the URL (a secret): only
//! what went wrong.

use std::time::Duration;

use reqwest::header::{ETAG, HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};

/// The largest body read; a calendar of a few thousand events is well
/// under a megabyte.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// From the request to the body's last byte.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
pub const MAX_REDIRECTS: usize = 5;
pub const USER_AGENT: &str = concat!("unavez/", env!("CARGO_PKG_VERSION"), " (calendar feed)");

/// What a poll got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// 304: the validators still hold.
    NotModified,
    /// A 2xx body and its validators.
    Body {
        bytes: Vec<u8>,
        etag: Option<String>,
        last_modified: Option<String>,
    },
    /// Any other status.
    Status(u16),
    /// No answer, or one cut short; the reason names no URL.
    Failed(String),
}

/// The HTTP client of the feeds.
pub fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .timeout(TOTAL_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
        .build()
        .map_err(|e| e.without_url().to_string())
}

/// The request's own headers (from `headers_env`), built once.
pub fn headers(pairs: &[(String, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("{name:?} is not a header name"))?;
        let mut v = HeaderValue::from_str(value).map_err(|_| format!("the value of {name} is not a header value"))?;
        v.set_sensitive(true);
        map.insert(n, v);
    }
    Ok(map)
}

/// GETs `url`, conditionally on the last 200's validators.
pub async fn fetch(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    etag: Option<&str>,
    last_modified: Option<&str>,
) -> Fetched {
    let mut req = client.get(url).headers(headers.clone());
    if let Some(e) = etag.and_then(|e| HeaderValue::from_str(e).ok()) {
        req = req.header(IF_NONE_MATCH, e);
    }
    if let Some(m) = last_modified.and_then(|m| HeaderValue::from_str(m).ok()) {
        req = req.header(IF_MODIFIED_SINCE, m);
    }
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return Fetched::Failed(reason(e)),
    };
    let status = resp.status();
    if status == reqwest::StatusCode::NOT_MODIFIED {
        return Fetched::NotModified;
    }
    if !status.is_success() {
        return Fetched::Status(status.as_u16());
    }
    if resp.content_length().is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Fetched::Failed(format!("body larger than {MAX_BODY_BYTES} bytes"));
    }
    let text = |h| {
        resp.headers()
            .get(h)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let (etag, last_modified) = (text(ETAG), text(LAST_MODIFIED));
    let mut bytes = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if bytes.len() + c.len() > MAX_BODY_BYTES {
                    return Fetched::Failed(format!("body larger than {MAX_BODY_BYTES} bytes"));
                }
                bytes.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => return Fetched::Failed(reason(e)),
        }
    }
    Fetched::Body {
        bytes,
        etag,
        last_modified,
    }
}

/// A reqwest error without its URL, named by kind.
fn reason(e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_redirect() {
        "too many redirects"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "body cut short"
    } else {
        "request failed"
    };
    let detail = e.without_url().to_string();
    format!("{kind}: {detail}")
}
