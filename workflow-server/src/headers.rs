//! The security headers of every answer: HTML pages and JSON alike may carry payloads, so
//! none may be framed, sniffed, cached or leak its address to another site.
//!
//! | header | value |
//! |---|---|
//! | `Content-Security-Policy` | `default-src 'self'; script-src 'self'; style-src 'self' 'sha256-…'` (the pages' one stylesheet, by hash; no inline script) `; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'` |
//! | `X-Frame-Options` | `DENY` |
//! | `X-Content-Type-Options` | `nosniff` |
//! | `Referrer-Policy` | `same-origin` (with `no-referrer` a browser would send `Origin: null` on the inbox's own form posts) |
//! | `Cache-Control` | `no-store` (unless a handler set its own) |

use std::sync::OnceLock;

use axum::http::header::{self, HeaderValue};
use axum::response::Response;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::html::STYLE;

/// The `Content-Security-Policy` of every answer.
pub fn content_security_policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        let style = BASE64.encode(Sha256::digest(STYLE.as_bytes()));
        format!(
            "default-src 'self'; script-src 'self'; style-src 'self' 'sha256-{style}'; \
             img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'"
        )
    })
}

/// Adds the security headers to `response` (a handler's own `Cache-Control` stays).
pub(crate) async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    if let Ok(policy) = HeaderValue::from_str(content_security_policy()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
