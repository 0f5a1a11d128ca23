//! Who is asking: a pluggable [`Authenticator`] (a trusted header set by a reverse proxy,
//! or bearer tokens), and the CSRF tokens of the inbox's forms. Whether that person may
//! decide a task is the engine's authorizer's call, not this module's.

use std::collections::HashMap;
use std::fmt;

use axum::http::{header, HeaderMap, HeaderName};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// A signed-in person, named as the engine's authorizer expects (`lee@support_leads`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity(pub String);

impl Identity {
    /// The name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Says who sent a request, from its headers; `None` is a 401.
pub trait Authenticator: Send + Sync + 'static {
    /// The identity the request carries, if any.
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity>;
}

impl<F> Authenticator for F
where
    F: Fn(&HeaderMap) -> Option<Identity> + Send + Sync + 'static,
{
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        self(headers)
    }
}

/// The identity a reverse proxy that signed the person in puts in a header
/// (`X-Forwarded-User` by default). Only sound behind that proxy: the server must not be
/// reachable any other way.
#[derive(Debug, Clone)]
pub struct TrustedHeader {
    name: HeaderName,
}

impl TrustedHeader {
    /// Trusts `X-Forwarded-User`.
    pub fn new() -> Self {
        TrustedHeader {
            name: HeaderName::from_static("x-forwarded-user"),
        }
    }

    /// Trusts the header `name` instead (`X-Auth-Request-Email`, `Remote-User`, ...).
    pub fn named(name: &str) -> Result<Self, axum::http::header::InvalidHeaderName> {
        Ok(TrustedHeader {
            name: HeaderName::from_bytes(name.as_bytes())?,
        })
    }
}

impl Default for TrustedHeader {
    fn default() -> Self {
        Self::new()
    }
}

impl Authenticator for TrustedHeader {
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        let value = headers.get(&self.name)?.to_str().ok()?.trim();
        (!value.is_empty()).then(|| Identity(value.to_owned()))
    }
}

/// `Authorization: Bearer <token>`, each token mapped to an identity. Tokens are kept as
/// SHA-256 digests and looked up by digest.
#[derive(Clone, Default)]
pub struct BearerTokens {
    tokens: HashMap<[u8; 32], String>,
}

impl fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl BearerTokens {
    /// No tokens.
    pub fn new() -> Self {
        Self::default()
    }

    /// Admits `token` as `identity`. Empty tokens are ignored.
    pub fn token(mut self, token: &str, identity: impl Into<String>) -> Self {
        if !token.is_empty() {
            self.tokens.insert(digest(token), identity.into());
        }
        self
    }

    /// Tokens from text, one `TOKEN IDENTITY` pair a line; blank lines and `#` comments
    /// are skipped. Returns the line numbers that are neither.
    pub fn parse(text: &str) -> Result<Self, Vec<usize>> {
        let mut tokens = BearerTokens::new();
        let mut bad = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.split_once(char::is_whitespace) {
                Some((token, identity)) if !identity.trim().is_empty() => {
                    tokens = tokens.token(token, identity.trim());
                }
                _ => bad.push(number + 1),
            }
        }
        if bad.is_empty() {
            Ok(tokens)
        } else {
            Err(bad)
        }
    }
}

impl Authenticator for BearerTokens {
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let token = value.strip_prefix("Bearer ")?.trim();
        if token.is_empty() {
            return None;
        }
        self.tokens.get(&digest(token)).cloned().map(Identity)
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The CSRF tokens of the inbox's forms: an HMAC of the identity under a key of the
/// server's, carried in a hidden field and verified in constant time on every POST. A form
/// made for one person does not verify for another, and no other site can make one.
#[derive(Clone)]
pub struct Csrf {
    key: [u8; 32],
}

impl fmt::Debug for Csrf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Csrf(..)")
    }
}

impl Csrf {
    /// Tokens under `key`.
    pub fn new(key: [u8; 32]) -> Self {
        Csrf { key }
    }

    /// Tokens under a random key (forms made before a restart stop verifying).
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Csrf { key })
    }

    fn mac(&self, identity: &Identity) -> Hmac<Sha256> {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(b"workflow-server csrf\0");
        mac.update(identity.0.as_bytes());
        mac
    }

    /// The token for `identity`'s forms.
    pub fn token(&self, identity: &Identity) -> String {
        BASE64URL.encode(self.mac(identity).finalize().into_bytes())
    }

    /// Whether `token` is `identity`'s.
    pub fn verify(&self, identity: &Identity, token: &str) -> bool {
        match BASE64URL.decode(token) {
            Ok(bytes) => self.mac(identity).verify_slice(&bytes).is_ok(),
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn trusted_header_reads_the_configured_header_only() {
        let default = TrustedHeader::new();
        assert_eq!(
            default.authenticate(&with("x-forwarded-user", "lee@support_leads")),
            Some(Identity("lee@support_leads".into()))
        );
        assert_eq!(default.authenticate(&with("x-forwarded-user", "  ")), None);
        assert_eq!(default.authenticate(&with("remote-user", "lee")), None);
        let named = TrustedHeader::named("Remote-User").unwrap();
        assert_eq!(
            named.authenticate(&with("remote-user", "lee")),
            Some(Identity("lee".into()))
        );
    }

    #[test]
    fn bearer_tokens_map_known_tokens_only() {
        let tokens =
            BearerTokens::parse("# ops\ns3cret lee@support_leads\n\nother  ana@on_call\n").unwrap();
        assert_eq!(
            tokens.authenticate(&with("authorization", "Bearer s3cret")),
            Some(Identity("lee@support_leads".into()))
        );
        assert_eq!(
            tokens.authenticate(&with("authorization", "Bearer other")),
            Some(Identity("ana@on_call".into()))
        );
        for bad in ["Bearer s3cre", "Bearer ", "Basic s3cret", "s3cret"] {
            assert_eq!(
                tokens.authenticate(&with("authorization", bad)),
                None,
                "{bad}"
            );
        }
        assert_eq!(BearerTokens::parse("lonely\nok id\n").unwrap_err(), vec![1]);
    }

    #[test]
    fn csrf_tokens_verify_for_their_identity_only() {
        let csrf = Csrf::new([7; 32]);
        let lee = Identity("lee@support_leads".into());
        let eve = Identity("eve".into());
        let token = csrf.token(&lee);
        assert!(csrf.verify(&lee, &token));
        assert!(!csrf.verify(&eve, &token));
        assert!(!csrf.verify(&lee, ""));
        assert!(!csrf.verify(&lee, &token[..token.len() - 4]));
        assert!(!Csrf::new([8; 32]).verify(&lee, &token));
        assert!(!csrf.verify(&lee, "not base64!"));
    }
}
