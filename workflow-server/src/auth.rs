//! Who is asking: a pluggable [`Authenticator`] (a trusted header set by a reverse proxy,
//! or bearer tokens) turning a request into one [`Caller`], and the CSRF tokens of the
//! inbox's forms. What that caller may do is the [`Permissions`](crate::Permissions)
//! policy's call; whether they may decide a task, the engine's authorizer's.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::permissions::{Caller, Credential, Principal, Roles};

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

/// The longest identity accepted, in bytes (400 `identity_too_long` past it).
pub const MAX_IDENTITY: usize = 256;

/// A request whose identity cannot be taken as it comes: answered 400, nothing done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The trusted identity header appears more than once (a client's copy followed by
    /// the proxy's): nobody is signed in by guessing which one the proxy set.
    #[error("the identity header `{0}` appears more than once")]
    DuplicateHeader(String),
    /// The identity is longer than [`MAX_IDENTITY`] bytes.
    #[error("the identity is {0} bytes long; at most {MAX_IDENTITY} are accepted")]
    TooLong(usize),
    /// The identity holds a `,` (what a proxy merging two header lines sends: two people,
    /// not one) or a control character.
    #[error(
        "the identity `{0}` holds a comma or a control character: one person's name is expected"
    )]
    InvalidIdentity(String),
    /// `Authorization` appears more than once: nobody is signed in by guessing which one
    /// counts.
    #[error("the `Authorization` header appears more than once")]
    DuplicateAuthorization,
}

impl AuthError {
    /// The stable code: `duplicate_identity_header`, `identity_too_long`,
    /// `invalid_identity`, `duplicate_authorization`.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::DuplicateHeader(_) => "duplicate_identity_header",
            AuthError::TooLong(_) => "identity_too_long",
            AuthError::InvalidIdentity(_) => "invalid_identity",
            AuthError::DuplicateAuthorization => "duplicate_authorization",
        }
    }
}

/// Whether `name` can be one person's identity: at most [`MAX_IDENTITY`] bytes, no `,`
/// and no control character. Every caller is checked with it, whichever authenticator
/// named them (400 otherwise).
pub fn check_identity(name: &str) -> Result<(), AuthError> {
    if name.len() > MAX_IDENTITY {
        return Err(AuthError::TooLong(name.len()));
    }
    if name.chars().any(|c| c == ',' || c.is_control()) {
        let shown: String = name.chars().flat_map(char::escape_default).collect();
        return Err(AuthError::InvalidIdentity(shown));
    }
    Ok(())
}

/// Says who sent a request; `None` is a 401.
///
/// The server asks [`Authenticator::caller`]. To combine authenticators (bearer tokens for
/// scripts, a trusted header for people), use [`Authenticator::or`] rather than a wrapper
/// of your own: a wrapper that calls only [`Authenticator::authenticate`] loses what
/// `caller` checks (a [`TrustedHeader`] with trusted proxies then names nobody).
pub trait Authenticator: Send + Sync + 'static {
    /// The identity the request's headers carry, if any.
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity>;

    /// The request's [`Caller`]: by default [`Authenticator::authenticate`]'s identity,
    /// with no groups and an [`Ambient`](Credential::Ambient) credential (so state changes
    /// are checked for cross-site origins). `parts` gives the peer address too
    /// (`ConnectInfo<SocketAddr>`, when the server is served with it).
    fn caller(&self, parts: &Parts) -> Result<Option<Caller>, AuthError> {
        Ok(self
            .authenticate(&parts.headers)
            .map(|identity| Caller::new(identity, Credential::Ambient)))
    }

    /// This authenticator, then `next` for a request this one names nobody in (a refusal
    /// by either, such as a duplicate header, stands):
    /// `BearerTokens::parse(text)?.or(TrustedHeader::new())`.
    fn or(self, next: impl Authenticator) -> Authenticators
    where
        Self: Sized,
    {
        Authenticators::new().with(self).with(next)
    }
}

/// Several authenticators asked in order: the first that names the caller does; a refusal
/// (400) by any of them stands. Built by [`Authenticator::or`] or [`Authenticators::with`].
#[derive(Clone, Default)]
pub struct Authenticators {
    list: Vec<std::sync::Arc<dyn Authenticator>>,
}

impl fmt::Debug for Authenticators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticators")
            .field("len", &self.list.len())
            .finish()
    }
}

impl Authenticators {
    /// None yet: nobody is signed in.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks `next` after those added before.
    pub fn with(mut self, next: impl Authenticator) -> Self {
        self.list.push(std::sync::Arc::new(next));
        self
    }
}

impl Authenticator for Authenticators {
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        self.list.iter().find_map(|one| one.authenticate(headers))
    }

    fn caller(&self, parts: &Parts) -> Result<Option<Caller>, AuthError> {
        for one in &self.list {
            if let Some(caller) = one.caller(parts)? {
                return Ok(Some(caller));
            }
        }
        Ok(None)
    }

    fn or(self, next: impl Authenticator) -> Authenticators {
        self.with(next)
    }
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
/// reachable any other way, or [`TrustedHeader::trusted_proxies`] names the proxy's
/// addresses. A header that appears twice is refused (400 `duplicate_identity_header`).
/// The credential is [`Ambient`](Credential::Ambient): the proxy signs the browser in by
/// its cookie, which a browser sends with cross-site requests too.
#[derive(Debug, Clone)]
pub struct TrustedHeader {
    name: HeaderName,
    groups: Option<HeaderName>,
    proxies: Option<Vec<IpAddr>>,
}

impl TrustedHeader {
    /// Trusts `X-Forwarded-User`.
    pub fn new() -> Self {
        TrustedHeader {
            name: HeaderName::from_static("x-forwarded-user"),
            groups: None,
            proxies: None,
        }
    }

    /// Trusts the header `name` instead (`X-Auth-Request-Email`, `Remote-User`, ...).
    pub fn named(name: &str) -> Result<Self, axum::http::header::InvalidHeaderName> {
        Ok(TrustedHeader {
            name: HeaderName::from_bytes(name.as_bytes())?,
            ..Self::new()
        })
    }

    /// Also reads the caller's groups from the header `name` (comma-separated, as
    /// `X-Forwarded-Groups` of oauth2-proxy), for [`Principal::Group`] grants. That header
    /// too is refused when it appears twice.
    ///
    /// [`Principal::Group`]: crate::Principal::Group
    pub fn groups_header(
        mut self,
        name: &str,
    ) -> Result<Self, axum::http::header::InvalidHeaderName> {
        self.groups = Some(HeaderName::from_bytes(name.as_bytes())?);
        Ok(self)
    }

    /// Trusts the header only on connections from these addresses (the proxy's); from
    /// anywhere else the request has no identity (401). Needs the peer address: serve the
    /// router with `into_make_service_with_connect_info::<SocketAddr>()` (as
    /// [`Server::serve`](crate::Server::serve) does); without it nobody is trusted.
    pub fn trusted_proxies(mut self, proxies: impl IntoIterator<Item = IpAddr>) -> Self {
        self.proxies = Some(proxies.into_iter().collect());
        self
    }

    fn trusts_peer(&self, parts: &Parts) -> bool {
        let Some(proxies) = &self.proxies else {
            return true;
        };
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        peer.is_some_and(|peer| proxies.contains(&peer))
    }
}

impl Default for TrustedHeader {
    fn default() -> Self {
        Self::new()
    }
}

impl TrustedHeader {
    /// The header's one value, trimmed, if it has one.
    fn read(&self, headers: &HeaderMap) -> Option<Identity> {
        let mut values = headers.get_all(&self.name).iter();
        let value = values.next()?;
        if values.next().is_some() {
            return None;
        }
        let value = value.to_str().ok()?.trim();
        (!value.is_empty()).then(|| Identity(value.to_owned()))
    }
}

impl Authenticator for TrustedHeader {
    /// The header's identity; `None` when it appears twice, is not one person's name
    /// ([`check_identity`]), or [`TrustedHeader::trusted_proxies`] are set: the headers
    /// alone cannot tell who connected, so only [`Authenticator::caller`] (which sees the
    /// peer) names anyone then.
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        if self.proxies.is_some() {
            return None;
        }
        self.read(headers)
            .filter(|identity| check_identity(identity.name()).is_ok())
    }

    fn caller(&self, parts: &Parts) -> Result<Option<Caller>, AuthError> {
        if !self.trusts_peer(parts) {
            if parts.headers.contains_key(&self.name) {
                tracing::warn!(header = %self.name, "identity header from an untrusted peer ignored");
            }
            return Ok(None);
        }
        if parts.headers.get_all(&self.name).iter().count() > 1 {
            return Err(AuthError::DuplicateHeader(self.name.to_string()));
        }
        let Some(identity) = self.read(&parts.headers) else {
            return Ok(None);
        };
        check_identity(identity.name())?;
        let mut groups = Vec::new();
        if let Some(name) = &self.groups {
            let mut values = parts.headers.get_all(name).iter();
            if let Some(value) = values.next() {
                if values.next().is_some() {
                    return Err(AuthError::DuplicateHeader(name.to_string()));
                }
                groups = value
                    .to_str()
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|group| !group.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
        }
        Ok(Some(
            Caller::new(identity, Credential::Ambient).with_groups(groups),
        ))
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

    /// Tokens from text in the format of [`TokenFile`], ignoring the roles. Returns the
    /// line numbers that do not parse.
    pub fn parse(text: &str) -> Result<Self, Vec<usize>> {
        TokenFile::parse(text)
            .map(|file| file.tokens)
            .map_err(|error| vec![error.line])
    }
}

impl Authenticator for BearerTokens {
    /// The identity of `Authorization: Bearer <token>` (the scheme in any case), if the
    /// header appears once and the token is known.
    fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let value = values.next()?.to_str().ok()?;
        if values.next().is_some() {
            return None;
        }
        let (scheme, token) = value.trim_start().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = token.trim();
        if token.is_empty() {
            return None;
        }
        self.tokens.get(&digest(token)).cloned().map(Identity)
    }

    /// Two `Authorization` headers are refused (400 `duplicate_authorization`).
    fn caller(&self, parts: &Parts) -> Result<Option<Caller>, AuthError> {
        if parts.headers.get_all(header::AUTHORIZATION).iter().count() > 1 {
            return Err(AuthError::DuplicateAuthorization);
        }
        Ok(self
            .authenticate(&parts.headers)
            .map(|identity| Caller::new(identity, Credential::Bearer)))
    }
}

/// A tokens file (`workflow serve --tokens FILE`): one `TOKEN IDENTITY [ROLE:WORKFLOW...]`
/// a line, where each role is `viewer`, `operator` or `payloads` and the workflow a name
/// or `*`; blank lines and `#` comments are skipped.
///
/// ```text
/// # token            identity             roles
/// 5f2a…c1            ana@ops              operator:Triage payloads:Triage
/// 9b7e…04            vic@audit            viewer:*
/// 0c31…aa            lee@support_leads
/// ```
///
/// A token without roles signs its person in with none: they see only the runs whose tasks
/// the engine's authorizer admits them for.
#[derive(Debug, Clone, Default)]
pub struct TokenFile {
    /// Token → identity.
    pub tokens: BearerTokens,
    /// Identity → roles, as named on each token's line.
    pub roles: Roles,
}

/// A line of a tokens file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TokenFileError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl TokenFile {
    /// Parses the text of a tokens file.
    pub fn parse(text: &str) -> Result<Self, TokenFileError> {
        let mut file = TokenFile::default();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |message: String| TokenFileError {
                line: number + 1,
                message,
            };
            let mut words = line.split_whitespace();
            let (Some(token), Some(identity)) = (words.next(), words.next()) else {
                return Err(fail("not `TOKEN IDENTITY [ROLE:WORKFLOW...]`".to_owned()));
            };
            if identity.len() > MAX_IDENTITY {
                return Err(fail(format!(
                    "the identity is longer than {MAX_IDENTITY} bytes"
                )));
            }
            file.tokens = file.tokens.token(token, identity);
            for grant in words {
                file.roles = std::mem::take(&mut file.roles)
                    .grant_text(Principal::Identity(identity.to_owned()), grant)
                    .map_err(|error| fail(error.to_string()))?;
            }
        }
        Ok(file)
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
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            assert_eq!(
                tokens.authenticate(&with("authorization", &format!("{scheme} s3cret"))),
                Some(Identity("lee@support_leads".into())),
                "{scheme}"
            );
        }
        for bad in ["Bearer s3cre", "Bearer ", "Basic s3cret", "s3cret"] {
            assert_eq!(
                tokens.authenticate(&with("authorization", bad)),
                None,
                "{bad}"
            );
        }
        assert_eq!(BearerTokens::parse("lonely\nok id\n").unwrap_err(), vec![1]);
    }

    fn parts(pairs: &[(&'static str, &str)]) -> Parts {
        let mut request = axum::http::Request::builder();
        for (name, value) in pairs {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn trusted_header_callers_are_ambient_and_refuse_duplicates() {
        let header = TrustedHeader::new().groups_header("x-groups").unwrap();
        let caller = header
            .caller(&parts(&[
                ("x-forwarded-user", "lee"),
                ("x-groups", "a, b,,c"),
            ]))
            .unwrap()
            .unwrap();
        assert_eq!(caller.identity().name(), "lee");
        assert_eq!(caller.groups(), ["a", "b", "c"]);
        // A client's groups followed by the proxy's: refused, not merged.
        assert_eq!(
            header.caller(&parts(&[
                ("x-forwarded-user", "lee"),
                ("x-groups", "admins"),
                ("x-groups", "a"),
            ])),
            Err(AuthError::DuplicateHeader("x-groups".into()))
        );
        assert_eq!(caller.credential(), Credential::Ambient);
        let twice = parts(&[("x-forwarded-user", "eve"), ("x-forwarded-user", "lee")]);
        assert_eq!(
            header.caller(&twice),
            Err(AuthError::DuplicateHeader("x-forwarded-user".into()))
        );
        assert_eq!(header.authenticate(&twice.headers), None);
        let long = "x".repeat(MAX_IDENTITY + 1);
        assert_eq!(
            header.caller(&parts(&[("x-forwarded-user", &long)])),
            Err(AuthError::TooLong(MAX_IDENTITY + 1))
        );
        // Behind listed proxies, a request without its peer address has no identity.
        let proxied = TrustedHeader::new().trusted_proxies(["10.0.0.1".parse().unwrap()]);
        assert_eq!(
            proxied.caller(&parts(&[("x-forwarded-user", "lee")])),
            Ok(None)
        );
        let mut from_proxy = parts(&[("x-forwarded-user", "lee")]);
        from_proxy
            .extensions
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 4000))));
        assert!(proxied.caller(&from_proxy).unwrap().is_some());
    }

    #[test]
    fn identities_are_one_persons_name() {
        let header = TrustedHeader::new();
        for bad in ["eve@marketing, ana@finance", "ana\tx"] {
            let mut request = axum::http::Request::builder();
            request = request.header(
                "x-forwarded-user",
                axum::http::HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
            );
            let parts = request.body(()).unwrap().into_parts().0;
            assert!(
                matches!(header.caller(&parts), Err(AuthError::InvalidIdentity(_))),
                "{bad:?}"
            );
            assert_eq!(header.authenticate(&parts.headers), None, "{bad:?}");
        }
        assert!(check_identity("ana@finance").is_ok());
        assert_eq!(
            check_identity("a,b").unwrap_err().code(),
            "invalid_identity"
        );
        assert_eq!(
            check_identity("a\u{7f}").unwrap_err().code(),
            "invalid_identity"
        );
    }

    #[test]
    fn two_authorization_headers_are_refused() {
        let tokens = BearerTokens::new().token("t1", "ana").token("t2", "vic");
        let twice = parts(&[
            ("authorization", "Bearer t1"),
            ("authorization", "Bearer t2"),
        ]);
        assert_eq!(
            tokens.caller(&twice),
            Err(AuthError::DuplicateAuthorization)
        );
        assert_eq!(tokens.authenticate(&twice.headers), None);
    }

    #[test]
    fn combined_authenticators_keep_the_proxy_check() {
        let proxied = TrustedHeader::new().trusted_proxies(["10.0.0.1".parse().unwrap()]);
        // However it is wrapped, the header names nobody without the peer's address.
        assert_eq!(proxied.authenticate(&with("x-forwarded-user", "eve")), None);
        let both = BearerTokens::new().token("t1", "bot").or(proxied);
        let forged = parts(&[("x-forwarded-user", "eve")]);
        assert_eq!(both.caller(&forged), Ok(None));
        let mut from_proxy = parts(&[("x-forwarded-user", "lee")]);
        from_proxy
            .extensions
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 4000))));
        let caller = both.caller(&from_proxy).unwrap().unwrap();
        assert_eq!(
            (caller.identity().name(), caller.credential()),
            ("lee", Credential::Ambient)
        );
        let bot = both
            .caller(&parts(&[("authorization", "Bearer t1")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (bot.identity().name(), bot.credential()),
            ("bot", Credential::Bearer)
        );
        // A refusal by any of them stands.
        let twice = parts(&[
            ("authorization", "Bearer t1"),
            ("authorization", "Bearer t1"),
        ]);
        assert_eq!(both.caller(&twice), Err(AuthError::DuplicateAuthorization));
    }

    #[test]
    fn token_files_name_identities_and_roles() {
        let file =
            TokenFile::parse("# t\nt1 ana@ops operator:Triage payloads:*\nt2 vic\n").unwrap();
        let caller = file
            .tokens
            .caller(&parts(&[("authorization", "Bearer t1")]))
            .unwrap()
            .unwrap();
        assert_eq!(caller.identity().name(), "ana@ops");
        assert_eq!(caller.credential(), Credential::Bearer);
        let expected = Roles::new()
            .grant(
                Principal::Identity("ana@ops".into()),
                crate::Role::Operator,
                "Triage",
            )
            .grant(
                Principal::Identity("ana@ops".into()),
                crate::Role::Payloads,
                "*",
            );
        assert_eq!(file.roles, expected);
        let error = TokenFile::parse("t1 ana\nt2 vic viewer\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.message.contains("`viewer`"), "{error}");
        assert_eq!(TokenFile::parse("lonely\n").unwrap_err().line, 1);
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
