//! Webhook signatures, checked on the raw bytes before anything parses them: Standard
//! Webhooks, Stripe and GitHub. Every comparison is HMAC-SHA256 through `hmac`'s
//! constant-time `verify_slice`; an empty or truncated signature never verifies.

use std::time::Duration;

use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The default tolerance between a signed timestamp and the server's clock, both ways.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// The default limit on a webhook body.
pub const DEFAULT_MAX_BODY: usize = 256 * 1024;

/// A signature scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// [Standard Webhooks](https://www.standardwebhooks.com/): `webhook-id`,
    /// `webhook-timestamp` and `webhook-signature` (`v1,<base64>` entries, space separated)
    /// over `id.timestamp.body`, with `whsec_<base64>` secrets. The event id is `webhook-id`.
    StandardWebhooks,
    /// Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]` over
    /// `timestamp.body`, keyed with the endpoint secret as written. The event id is the
    /// payload's `id`.
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body. The event id is
    /// `X-GitHub-Delivery`. GitHub signs no timestamp, so nothing is stale.
    GitHub,
}

impl Scheme {
    /// The scheme's name: `standard_webhooks`, `stripe`, `github`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standard_webhooks",
            Scheme::Stripe => "stripe",
            Scheme::GitHub => "github",
        }
    }
}

/// A secret that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// A Standard Webhooks secret is `whsec_` followed by base64.
    #[error("a Standard Webhooks secret is `whsec_` followed by base64: {0}")]
    NotWhsec(String),
    /// An empty secret would let anyone sign.
    #[error("the secret is empty")]
    Empty,
}

/// Why a delivery was refused before its body was read as anything but bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header the scheme needs is absent or not text.
    #[error("the `{0}` header is missing")]
    MissingHeader(&'static str),
    /// A header is present but not in the scheme's format.
    #[error("the `{0}` header is malformed")]
    Malformed(&'static str),
    /// No signature verifies with any of the secrets.
    #[error("no signature matches")]
    BadSignature,
    /// The signed timestamp is further from now than the tolerance.
    #[error("the signed timestamp is {skew_secs} s from now, more than the {tolerance_secs} s tolerated")]
    Stale {
        /// Signed timestamp minus now, in seconds.
        skew_secs: i64,
        /// The tolerance, in seconds.
        tolerance_secs: u64,
    },
}

impl VerifyError {
    /// A stable code: `missing_signature`, `malformed_signature`, `bad_signature`,
    /// `stale_timestamp`.
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::MissingHeader(_) => "missing_signature",
            VerifyError::Malformed(_) => "malformed_signature",
            VerifyError::BadSignature => "bad_signature",
            VerifyError::Stale { .. } => "stale_timestamp",
        }
    }
}

/// How one webhook endpoint verifies its deliveries: a scheme, its secrets (several during
/// a rotation: a signature made with any of them verifies), the timestamp tolerance and
/// the body limit.
#[derive(Clone)]
pub struct WebhookConfig {
    scheme: Scheme,
    secrets: Vec<Vec<u8>>,
    tolerance: Duration,
    max_body: usize,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("scheme", &self.scheme)
            .field("secrets", &self.secrets.len())
            .field("tolerance", &self.tolerance)
            .field("max_body", &self.max_body)
            .finish()
    }
}

impl WebhookConfig {
    /// Standard Webhooks with a `whsec_<base64>` secret.
    pub fn standard(secret: &str) -> Result<Self, SecretError> {
        Self::new(Scheme::StandardWebhooks, secret)
    }

    /// Stripe with the endpoint's signing secret (`whsec_...`, used as written).
    pub fn stripe(secret: &str) -> Result<Self, SecretError> {
        Self::new(Scheme::Stripe, secret)
    }

    /// GitHub with the webhook's secret.
    pub fn github(secret: &str) -> Result<Self, SecretError> {
        Self::new(Scheme::GitHub, secret)
    }

    fn new(scheme: Scheme, secret: &str) -> Result<Self, SecretError> {
        Ok(WebhookConfig {
            scheme,
            secrets: vec![key(scheme, secret)?],
            tolerance: DEFAULT_TOLERANCE,
            max_body: DEFAULT_MAX_BODY,
        })
    }

    /// Adds a secret, for a rotation: deliveries signed with any of the secrets verify.
    pub fn secret(mut self, secret: &str) -> Result<Self, SecretError> {
        self.secrets.push(key(self.scheme, secret)?);
        Ok(self)
    }

    /// The tolerance between the signed timestamp and now, both ways (default 5 minutes).
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// The largest body accepted, in bytes (default 256 KiB); a larger one is a 413.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The body limit.
    pub fn body_limit(&self) -> usize {
        self.max_body
    }

    /// Verifies a delivery on its raw bytes at `now` (unix seconds). Returns the event id
    /// the headers carry (`webhook-id`, `X-GitHub-Delivery`; Stripe's is in the payload).
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Option<String>, VerifyError> {
        match self.scheme {
            Scheme::StandardWebhooks => self.verify_standard(headers, body, now).map(Some),
            Scheme::Stripe => self.verify_stripe(headers, body, now).map(|()| None),
            Scheme::GitHub => self
                .verify_github(headers, body)
                .map(|()| header(headers, "x-github-delivery").ok().map(str::to_owned)),
        }
    }

    fn verify_standard(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<String, VerifyError> {
        let id = header(headers, "webhook-id")?;
        let timestamp = header(headers, "webhook-timestamp")?;
        let signatures = header(headers, "webhook-signature")?;
        let at: i64 = timestamp
            .parse()
            .map_err(|_| VerifyError::Malformed("webhook-timestamp"))?;
        let candidates: Vec<Vec<u8>> = signatures
            .split(' ')
            .filter_map(|entry| entry.strip_prefix("v1,"))
            .filter_map(|encoded| BASE64.decode(encoded).ok())
            .collect();
        let signed = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
        self.any_matches(&signed, &candidates)?;
        self.fresh(at, now)?;
        Ok(id.to_owned())
    }

    fn verify_stripe(&self, headers: &HeaderMap, body: &[u8], now: i64) -> Result<(), VerifyError> {
        let value = header(headers, "stripe-signature")?;
        let mut timestamp = None;
        let mut candidates = Vec::new();
        for part in value.split(',') {
            match part.trim().split_once('=') {
                Some(("t", t)) => timestamp = Some(t),
                Some(("v1", hex)) => candidates.extend(from_hex(hex)),
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or(VerifyError::Malformed("stripe-signature"))?;
        let at: i64 = timestamp
            .parse()
            .map_err(|_| VerifyError::Malformed("stripe-signature"))?;
        self.any_matches(&[timestamp.as_bytes(), b".", body], &candidates)?;
        self.fresh(at, now)
    }

    fn verify_github(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
        let value = header(headers, "x-hub-signature-256")?;
        let hex = value
            .strip_prefix("sha256=")
            .ok_or(VerifyError::Malformed("x-hub-signature-256"))?;
        let candidates: Vec<Vec<u8>> = from_hex(hex).into_iter().collect();
        self.any_matches(&[body], &candidates)
    }

    /// Whether any candidate signature is the HMAC of `parts` under any secret, compared
    /// in constant time. An empty list, or an empty or short candidate, never matches.
    fn any_matches(&self, parts: &[&[u8]], candidates: &[Vec<u8>]) -> Result<(), VerifyError> {
        for secret in &self.secrets {
            let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
                continue;
            };
            for part in parts {
                mac.update(part);
            }
            for candidate in candidates {
                if mac.clone().verify_slice(candidate).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(VerifyError::BadSignature)
    }

    fn fresh(&self, at: i64, now: i64) -> Result<(), VerifyError> {
        let skew = at.saturating_sub(now);
        let tolerance = self.tolerance.as_secs();
        if skew.unsigned_abs() > tolerance {
            return Err(VerifyError::Stale {
                skew_secs: skew,
                tolerance_secs: tolerance,
            });
        }
        Ok(())
    }

    /// The headers a sender puts on `body`, signed with the first secret at `timestamp`
    /// (unix seconds): for tests, examples and load clients. For Stripe the event id is
    /// the payload's and `event_id` is not sent.
    pub fn sign(&self, event_id: &str, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
        let secret = self.secrets.first().map_or(&[][..], Vec::as_slice);
        let ts = timestamp.to_string();
        match self.scheme {
            Scheme::StandardWebhooks => {
                let mac = hmac_of(
                    secret,
                    &[event_id.as_bytes(), b".", ts.as_bytes(), b".", body],
                );
                vec![
                    ("webhook-id", event_id.to_owned()),
                    ("webhook-timestamp", ts),
                    ("webhook-signature", format!("v1,{}", BASE64.encode(mac))),
                ]
            }
            Scheme::Stripe => {
                let mac = hmac_of(secret, &[ts.as_bytes(), b".", body]);
                vec![("stripe-signature", format!("t={ts},v1={}", to_hex(&mac)))]
            }
            Scheme::GitHub => {
                let mac = hmac_of(secret, &[body]);
                vec![
                    ("x-github-delivery", event_id.to_owned()),
                    ("x-hub-signature-256", format!("sha256={}", to_hex(&mac))),
                ]
            }
        }
    }
}

/// The HMAC key of a secret as the scheme writes it.
fn key(scheme: Scheme, secret: &str) -> Result<Vec<u8>, SecretError> {
    let key = match scheme {
        Scheme::StandardWebhooks => {
            let encoded = secret
                .strip_prefix("whsec_")
                .ok_or_else(|| SecretError::NotWhsec("no `whsec_` prefix".into()))?;
            BASE64
                .decode(encoded)
                .map_err(|error| SecretError::NotWhsec(error.to_string()))?
        }
        Scheme::Stripe | Scheme::GitHub => secret.as_bytes().to_vec(),
    };
    if key.is_empty() {
        return Err(SecretError::Empty);
    }
    Ok(key)
}

fn hmac_of(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, VerifyError> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .ok_or(VerifyError::MissingHeader(name))
}

/// Lowercase or uppercase hex to bytes; `None` for odd lengths or other characters.
fn from_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim().as_bytes();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|pair| {
            let high = (pair[0] as char).to_digit(16)?;
            let low = (pair[1] as char).to_digit(16)?;
            u8::try_from(high * 16 + low).ok()
        })
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 15)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderName, HeaderValue};

    const NOW: i64 = 1_784_351_400;
    const BODY: &[u8] = br#"{"id":"evt_1","ticket_id":"T-91"}"#;

    fn headers(pairs: &[(&str, String)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn standard() -> WebhookConfig {
        WebhookConfig::standard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap()
    }

    /// The example of the Standard Webhooks specification, signed by its reference code.
    #[test]
    fn standard_webhooks_matches_the_reference_vector() {
        let config = WebhookConfig::standard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signed = headers(&[
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".into()),
            ("webhook-timestamp", "1614265330".into()),
            (
                "webhook-signature",
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".into(),
            ),
        ]);
        assert_eq!(
            config.verify(&signed, body, 1_614_265_330),
            Ok(Some("msg_p5jXN8AQM9LWM0D4loKWxJek".into()))
        );
        assert_eq!(
            config.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body)[2].1,
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn standard_webhooks_refuses_a_changed_body_id_or_timestamp() {
        let config = standard();
        let good = config.sign("evt_1", NOW, BODY);
        assert_eq!(
            config.verify(&headers(&good), BODY, NOW),
            Ok(Some("evt_1".into()))
        );
        let changed = br#"{"id":"evt_1","ticket_id":"T-92"}"#;
        assert_eq!(
            config.verify(&headers(&good), changed, NOW),
            Err(VerifyError::BadSignature)
        );
        let mut other_id = good.clone();
        other_id[0].1 = "evt_2".into();
        assert_eq!(
            config.verify(&headers(&other_id), BODY, NOW),
            Err(VerifyError::BadSignature)
        );
        let mut other_time = good;
        other_time[1].1 = (NOW + 1).to_string();
        assert_eq!(
            config.verify(&headers(&other_time), BODY, NOW),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn standard_webhooks_tolerates_five_minutes_both_ways_and_no_more() {
        let config = standard();
        for skew in [-300, 0, 300] {
            let signed = config.sign("evt_1", NOW + skew, BODY);
            assert!(
                config.verify(&headers(&signed), BODY, NOW).is_ok(),
                "{skew}"
            );
        }
        for skew in [-301, 301, -86_400] {
            let signed = config.sign("evt_1", NOW + skew, BODY);
            assert_eq!(
                config.verify(&headers(&signed), BODY, NOW),
                Err(VerifyError::Stale {
                    skew_secs: skew,
                    tolerance_secs: 300
                })
            );
        }
    }

    #[test]
    fn standard_webhooks_accepts_any_of_several_signatures_and_secrets() {
        let old = standard();
        let new = WebhookConfig::standard("whsec_bmV3LXNlY3JldC1rZXktZm9yLXJvdGF0aW9u").unwrap();
        let rotating = WebhookConfig::standard("whsec_bmV3LXNlY3JldC1rZXktZm9yLXJvdGF0aW9u")
            .unwrap()
            .secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        // Signed with the old secret only: the rotating endpoint takes it, the new one not.
        let by_old = old.sign("evt_1", NOW, BODY);
        assert!(rotating.verify(&headers(&by_old), BODY, NOW).is_ok());
        assert_eq!(
            new.verify(&headers(&by_old), BODY, NOW),
            Err(VerifyError::BadSignature)
        );
        // A sender mid-rotation sends both signatures (and one of another version).
        let by_new = new.sign("evt_1", NOW, BODY);
        let both = format!("v2,abc {} {}", by_old[2].1, by_new[2].1);
        let mut signed = by_old.clone();
        signed[2].1 = both;
        assert!(new.verify(&headers(&signed), BODY, NOW).is_ok());
        assert!(old.verify(&headers(&signed), BODY, NOW).is_ok());
    }

    #[test]
    fn empty_truncated_or_missing_signatures_never_verify() {
        let config = standard();
        let good = config.sign("evt_1", NOW, BODY);
        let full = good[2].1.clone();
        let decoded = BASE64.decode(&full[3..]).unwrap();
        let truncated = format!("v1,{}", BASE64.encode(&decoded[..16]));
        for signature in ["v1,", "v1", "", " ", &truncated, "v1,AAAA"] {
            let mut signed = good.clone();
            signed[2].1 = signature.into();
            let result = config.verify(&headers(&signed), BODY, NOW);
            assert!(
                matches!(
                    result,
                    Err(VerifyError::BadSignature | VerifyError::MissingHeader(_))
                ),
                "{signature:?}: {result:?}"
            );
        }
        let missing: Vec<_> = good[..2].to_vec();
        assert_eq!(
            config.verify(&headers(&missing), BODY, NOW),
            Err(VerifyError::MissingHeader("webhook-signature"))
        );
    }

    #[test]
    fn a_secret_without_whsec_or_empty_is_refused() {
        assert!(matches!(
            WebhookConfig::standard("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::NotWhsec(_))
        ));
        assert_eq!(
            WebhookConfig::standard("whsec_").unwrap_err(),
            SecretError::Empty
        );
        assert_eq!(WebhookConfig::github("").unwrap_err(), SecretError::Empty);
    }

    /// Stripe's documented construction: HMAC-SHA256 of `t.body` with the secret, hex.
    #[test]
    fn stripe_verifies_any_v1_and_refuses_stale_or_truncated() {
        let config = WebhookConfig::stripe("whsec_stripe_test").unwrap();
        let signed = config.sign("ignored", NOW, BODY);
        assert_eq!(config.verify(&headers(&signed), BODY, NOW), Ok(None));
        let v1 = signed[0].1.split_once(",v1=").unwrap().1.to_owned();
        let several = format!("t={NOW},v1={},v0=ffff,v1={v1}", "00".repeat(32));
        assert_eq!(
            config.verify(&headers(&[("stripe-signature", several)]), BODY, NOW),
            Ok(None)
        );
        for bad in [
            format!("t={NOW},v1={}", &v1[..62]),
            format!("t={NOW},v1="),
            format!("t={NOW}"),
            format!("t={NOW},v0={v1}"),
        ] {
            assert_eq!(
                config.verify(&headers(&[("stripe-signature", bad.clone())]), BODY, NOW),
                Err(VerifyError::BadSignature),
                "{bad}"
            );
        }
        assert_eq!(
            config.verify(
                &headers(&[("stripe-signature", format!("v1={v1}"))]),
                BODY,
                NOW
            ),
            Err(VerifyError::Malformed("stripe-signature"))
        );
        let stale = config.sign("ignored", NOW - 301, BODY);
        assert!(matches!(
            config.verify(&headers(&stale), BODY, NOW),
            Err(VerifyError::Stale { .. })
        ));
        let rotated = WebhookConfig::stripe("whsec_next")
            .unwrap()
            .secret("whsec_stripe_test")
            .unwrap();
        assert_eq!(rotated.verify(&headers(&signed), BODY, NOW), Ok(None));
    }

    /// GitHub's documented test vector ("Hello, World!" with secret "It's a Secret to
    /// Everybody").
    #[test]
    fn github_matches_its_documented_vector_and_refuses_truncation() {
        let config = WebhookConfig::github("It's a Secret to Everybody").unwrap();
        let body = b"Hello, World!";
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let signed = headers(&[
            ("x-hub-signature-256", good.into()),
            (
                "x-github-delivery",
                "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
            ),
        ]);
        assert_eq!(
            config.verify(&signed, body, NOW),
            Ok(Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".into()))
        );
        assert_eq!(config.sign("d", NOW, body)[1].1, good);
        for bad in [
            "sha256=",
            "sha256=757107ea",
            &good[..good.len() - 2],
            "sha1=00",
        ] {
            let result = config.verify(&headers(&[("x-hub-signature-256", bad.into())]), body, NOW);
            assert!(
                matches!(
                    result,
                    Err(VerifyError::BadSignature | VerifyError::Malformed(_))
                ),
                "{bad}: {result:?}"
            );
        }
        let rotated = WebhookConfig::github("new")
            .unwrap()
            .secret("It's a Secret to Everybody")
            .unwrap();
        assert!(rotated.verify(&signed, body, NOW).is_ok());
    }

    #[test]
    fn hex_round_trips_and_refuses_odd_or_foreign_text() {
        assert_eq!(from_hex(&to_hex(&[0, 15, 255])), Some(vec![0, 15, 255]));
        assert_eq!(from_hex("ABcd"), Some(vec![0xab, 0xcd]));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
