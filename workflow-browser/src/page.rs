//! A [`Page`]: one step attempt's browser, with auto-waiting actions. Every action that
//! fails saves a screenshot and the page's HTML in the attempt's artifact directory and
//! names them in its [`BrowserError`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::error::{CmdError, ErrorStatus};
use fantoccini::{Client, Locator};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use workflow_core::RunId;

use crate::browser::{pids, Browser};
use crate::cdp::Cdp;
use crate::error::{classify, BrowserError, Evidence, Failure};
use crate::process;
use crate::selector::Selector;

/// How long a page's Chromium may take to shut down before it is killed.
const REAP_GRACE: Duration = Duration::from_secs(3);

/// How long taking evidence of a failure may take (the page may be hung).
const EVIDENCE_TIMEOUT: Duration = Duration::from_secs(3);

/// Finds the element, and says whether it is shown, with its text: one round trip.
const PROBE: &str = "const e = document.querySelector(arguments[0]);
if (!e) return null;
const r = e.getBoundingClientRect();
const s = getComputedStyle(e);
const shown = r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none';
return { shown: shown, text: shown ? e.innerText : '' };";

/// The page's URL and the HTTP status of its document: one round trip.
const LOCATION: &str = "const n = performance.getEntriesByType('navigation')[0];
return [location.href, n && n.responseStatus ? n.responseStatus : 0];";

/// A file a [`Page::download`] saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Download {
    /// Its name, as the server suggested it.
    pub file_name: String,
    /// Where it is: in the attempt's `downloads/` directory.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
}

/// One step attempt's page: a fresh headless Chromium, holding its run's cookies. Actions
/// wait for what they need (the element present, shown and interactable; the URL; the
/// download) up to [`BrowserConfig::action_timeout`](crate::BrowserConfig), then fail
/// with a classified [`BrowserError`] that names the screenshot and HTML saved for it.
///
/// Close it with [`Page::close`] to keep its cookies for the run's next page. Dropped
/// unclosed (the step timed out, its run was cancelled, the engine stopped), it kills its
/// Chromium at once.
#[derive(Debug)]
pub struct Page {
    browser: Browser,
    client: Option<Client>,
    run: RunId,
    dir: PathBuf,
    downloads: PathBuf,
    profile: PathBuf,
    failures: AtomicU32,
}

impl Page {
    pub(crate) fn new(
        browser: Browser,
        client: Client,
        ctx: &workflow_core::StepContext,
        dir: PathBuf,
        downloads: PathBuf,
        profile: PathBuf,
    ) -> Page {
        Page {
            browser,
            client: Some(client),
            run: ctx.run_id,
            dir,
            downloads,
            profile,
            failures: AtomicU32::new(0),
        }
    }

    /// The WebDriver client, for what the actions here do not cover. Its failures are not
    /// classified nor evidenced: turn them into a [`BrowserError`] with
    /// `page.fail("my action", Failure::from_client(&error))`.
    pub fn client(&self) -> &Client {
        // Only `close` and `drop` take the client, and both consume the page.
        self.client.as_ref().unwrap_or_else(|| unreachable!())
    }

    /// The attempt's artifact directory: `<artifacts>/run-<id>/<step>/attempt-<n>/`.
    pub fn artifacts(&self) -> &Path {
        &self.dir
    }

    /// The page's Chromium profile directory: every process of this page has it on its
    /// command line (see [`crate::processes_of`]).
    pub fn profile(&self) -> &Path {
        &self.profile
    }

    /// Opens `url` and waits until it has loaded. Returns the HTTP status of the page;
    /// a 4xx is a permanent failure, a 5xx a transient one.
    pub async fn goto(&self, url: &str) -> Result<u16, BrowserError> {
        let result = self.goto_inner(url).await;
        self.settle("goto", result).await
    }

    async fn goto_inner(&self, url: &str) -> Result<u16, Failure> {
        match self.client().goto(url).await {
            Ok(()) => {}
            Err(CmdError::Standard(wd)) if wd.error == ErrorStatus::Timeout => {
                return Err(Failure::NavigationTimeout {
                    url: url.to_owned(),
                    waited: self.browser.config().navigation_timeout,
                });
            }
            Err(error) => return Err(classify(&error)),
        }
        let (actual, status) = self.location().await?;
        check_status(&actual, status)?;
        Ok(status)
    }

    /// Types `text` into the element (cleared first), once it is shown and editable.
    pub async fn fill(
        &self,
        selector: impl Into<Selector>,
        text: &str,
    ) -> Result<(), BrowserError> {
        let selector = selector.into();
        let result = self
            .on_element(&selector, |element| async move {
                element.clear().await?;
                element.send_keys(text).await
            })
            .await;
        self.settle("fill", result).await
    }

    /// Clicks the element once it is shown and nothing covers it.
    pub async fn click(&self, selector: impl Into<Selector>) -> Result<(), BrowserError> {
        let selector = selector.into();
        let result = self
            .on_element(&selector, |element| async move { element.click().await })
            .await;
        self.settle("click", result).await
    }

    /// Waits until the element is there and shown.
    pub async fn wait_for(&self, selector: impl Into<Selector>) -> Result<(), BrowserError> {
        let selector = selector.into();
        let result = self.shown_text(&selector).await.map(drop);
        self.settle("wait_for", result).await
    }

    /// The element's text (as shown), once it is shown.
    pub async fn text(&self, selector: impl Into<Selector>) -> Result<String, BrowserError> {
        let selector = selector.into();
        let result = self.shown_text(&selector).await;
        self.settle("text", result).await
    }

    /// Asserts that the element shows `expected` (trimmed), waiting for it to. A page
    /// that shows something else when the wait ends fails permanently
    /// ([`Failure::Assertion`]); one without the element, transiently.
    pub async fn assert_text(
        &self,
        selector: impl Into<Selector>,
        expected: &str,
    ) -> Result<(), BrowserError> {
        let selector = selector.into();
        let result = self.assert_inner(&selector, expected).await;
        self.settle("assert_text", result).await
    }

    async fn assert_inner(&self, selector: &Selector, expected: &str) -> Result<(), Failure> {
        let waiter = self.waiter();
        let mut seen = None;
        loop {
            if let Some(text) = self.probe(selector).await? {
                let text = text.trim();
                if text == expected {
                    return Ok(());
                }
                seen = Some(text.to_owned());
            }
            if !waiter.again().await {
                break;
            }
        }
        Err(match seen {
            None => Failure::SelectorTimeout {
                selector: selector.to_string(),
                waited: waiter.timeout,
            },
            Some(actual) => Failure::Assertion {
                selector: selector.to_string(),
                expected: expected.to_owned(),
                actual,
            },
        })
    }

    /// Waits until the page's URL matches `pattern`, then checks the page's status as
    /// [`Page::goto`] does. A pattern matches the whole URL or its path (with the query);
    /// ending in `*`, it matches what starts with the rest.
    pub async fn wait_for_url(&self, pattern: &str) -> Result<String, BrowserError> {
        let result = self.url_inner(pattern).await;
        self.settle("wait_for_url", result).await
    }

    async fn url_inner(&self, pattern: &str) -> Result<String, Failure> {
        let waiter = self.waiter();
        loop {
            let (url, status) = self.location().await?;
            if url_matches(pattern, &url) {
                check_status(&url, status)?;
                return Ok(url);
            }
            if !waiter.again().await {
                return Err(Failure::UrlTimeout {
                    expected: pattern.to_owned(),
                    actual: url,
                    waited: waiter.timeout,
                });
            }
        }
    }

    /// The page's URL.
    pub async fn url(&self) -> Result<String, BrowserError> {
        let result = self.location().await.map(|(url, _)| url);
        self.settle("url", result).await
    }

    /// Clicks the element and waits for the download it starts to complete, in the
    /// attempt's `downloads/` directory. Returns the file with its SHA-256.
    pub async fn download(&self, selector: impl Into<Selector>) -> Result<Download, BrowserError> {
        let selector = selector.into();
        let result = self.download_inner(&selector).await;
        self.settle("download", result).await
    }

    async fn download_inner(&self, selector: &Selector) -> Result<Download, Failure> {
        let before = listing(&self.downloads);
        self.on_element(selector, |element| async move { element.click().await })
            .await?;
        let waiter = self.waiter();
        let file_name = loop {
            // Chromium writes a hidden temporary file, then `name.crdownload`, and renames
            // that when the download is complete.
            let now = listing(&self.downloads);
            let partial = |name: &String| name.starts_with('.') || name.ends_with(".crdownload");
            let pending = now.iter().any(partial);
            let done = now
                .into_iter()
                .find(|name| !before.contains(name) && !partial(name));
            if let (Some(name), false) = (done, pending) {
                break name;
            }
            if !waiter.again().await {
                return Err(Failure::DownloadTimeout {
                    waited: waiter.timeout,
                });
            }
        };
        let path = self.downloads.join(&file_name);
        let content = tokio::fs::read(&path).await?;
        Ok(Download {
            file_name,
            bytes: content.len() as u64,
            sha256: hex(&Sha256::digest(&content)),
            path,
        })
    }

    /// Saves a screenshot (PNG) as `<name>.png` in the attempt's artifact directory.
    pub async fn screenshot(&self, name: &str) -> Result<PathBuf, BrowserError> {
        let result = async {
            let png = self.client().screenshot().await.map_err(|e| classify(&e))?;
            let path = self.dir.join(format!("{name}.png"));
            tokio::fs::write(&path, png).await?;
            Ok(path)
        }
        .await;
        self.settle("screenshot", result).await
    }

    /// The page's HTML.
    pub async fn html(&self) -> Result<String, BrowserError> {
        let result = self.client().source().await.map_err(|e| classify(&e));
        self.settle("html", result).await
    }

    /// Turns a failure of your own (of an action through [`Page::client`], or a check of
    /// what the page shows) into a [`BrowserError`] with evidence, like the actions'.
    pub async fn fail(&self, action: &'static str, failure: Failure) -> BrowserError {
        match self.settle::<()>(action, Err(failure)).await {
            Err(error) => error,
            Ok(()) => unreachable!(),
        }
    }

    /// Closes the page: keeps its cookies for the run's next page, ends the WebDriver
    /// session and makes sure its Chromium is gone.
    pub async fn close(mut self) -> Result<(), BrowserError> {
        self.keep_cookies().await;
        let closed = match self.client.take() {
            Some(client) => tokio::time::timeout(Duration::from_secs(5), client.close()).await,
            None => Ok(Ok(())),
        };
        self.reap();
        match closed {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(BrowserError::new("close", classify(&error))),
            Err(_) => Err(BrowserError::new(
                "close",
                Failure::Crashed("the session did not end within 5 s".into()),
            )),
        }
    }

    /// Ends what is left of the page's Chromium (SIGTERM, then SIGKILL after a grace
    /// period) and removes its profile, on a thread of its own: neither `close` nor `drop`
    /// waits for Chromium's processes to drain.
    fn reap(&self) {
        let profile = self.profile.clone();
        let reaper = std::thread::Builder::new()
            .name("browser-reaper".into())
            .spawn(move || {
                process::end_chromium(&profile, REAP_GRACE);
                let _ = std::fs::remove_dir_all(&profile);
            });
        if reaper.is_err() {
            process::kill(&pids(&self.profile));
        }
    }

    async fn keep_cookies(&self) {
        let Some(client) = self.client.as_ref() else {
            return;
        };
        let cmd = Cdp {
            cmd: "Network.getAllCookies",
            params: json!({}),
        };
        if let Ok(Ok(answer)) = tokio::time::timeout(EVIDENCE_TIMEOUT, client.issue_cmd(cmd)).await
        {
            if let Some(cookies) = answer.get("cookies").and_then(Value::as_array) {
                self.browser.keep_cookies(self.run, cookies.clone());
            }
        }
    }

    /// An action's result; a failure gets its evidence (and the run keeps the cookies it
    /// had, so a retry starts from there).
    async fn settle<T>(
        &self,
        action: &'static str,
        result: Result<T, Failure>,
    ) -> Result<T, BrowserError> {
        let failure = match result {
            Ok(value) => return Ok(value),
            Err(failure) => failure,
        };
        let error = BrowserError::new(action, failure);
        if error.failure().is_crash() {
            return Err(error);
        }
        let evidence = self.evidence().await;
        self.keep_cookies().await;
        tracing::warn!(%error, "browser action failed");
        Err(error.with_evidence(evidence))
    }

    /// A screenshot and the HTML, as `failure-<n>.png` / `.html`, each as far as the page
    /// can still give them.
    async fn evidence(&self) -> Evidence {
        let n = self.failures.fetch_add(1, Ordering::SeqCst) + 1;
        let client = self.client();
        let mut evidence = Evidence::default();
        if let Ok(Ok(png)) = tokio::time::timeout(EVIDENCE_TIMEOUT, client.screenshot()).await {
            let path = self.dir.join(format!("failure-{n}.png"));
            if tokio::fs::write(&path, png).await.is_ok() {
                evidence.screenshot = Some(path);
            }
        }
        if let Ok(Ok(html)) = tokio::time::timeout(EVIDENCE_TIMEOUT, client.source()).await {
            let path = self.dir.join(format!("failure-{n}.html"));
            if tokio::fs::write(&path, html).await.is_ok() {
                evidence.html = Some(path);
            }
        }
        evidence
    }

    /// Runs `act` on the element, finding it again until it is there and `act` no longer
    /// fails for want of it (not there, stale, hidden, covered), up to the action timeout.
    async fn on_element<'a, F, Fut>(&'a self, selector: &Selector, act: F) -> Result<(), Failure>
    where
        F: Fn(Element) -> Fut,
        Fut: Future<Output = Result<(), CmdError>> + 'a,
    {
        let client = self.client();
        let waiter = self.waiter();
        loop {
            let done = match client.find(Locator::Css(selector.css())).await {
                Ok(element) => act(element).await,
                Err(error) => Err(error),
            };
            match done {
                Ok(()) => return Ok(()),
                Err(error) if not_ready(&error) => {}
                Err(error) => return Err(classify(&error)),
            }
            if !waiter.again().await {
                return Err(Failure::SelectorTimeout {
                    selector: selector.to_string(),
                    waited: waiter.timeout,
                });
            }
        }
    }

    /// The element's text once it is shown.
    async fn shown_text(&self, selector: &Selector) -> Result<String, Failure> {
        let waiter = self.waiter();
        loop {
            if let Some(text) = self.probe(selector).await? {
                return Ok(text);
            }
            if !waiter.again().await {
                return Err(Failure::SelectorTimeout {
                    selector: selector.to_string(),
                    waited: waiter.timeout,
                });
            }
        }
    }

    /// The element's text if it is there and shown.
    async fn probe(&self, selector: &Selector) -> Result<Option<String>, Failure> {
        let found = match self
            .client()
            .execute(PROBE, vec![json!(selector.css())])
            .await
        {
            Ok(found) => found,
            Err(error) if navigating(&error) => return Ok(None),
            Err(error) => return Err(classify(&error)),
        };
        Ok(match found.get("shown") {
            Some(Value::Bool(true)) => Some(
                found
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ => None,
        })
    }

    async fn location(&self) -> Result<(String, u16), Failure> {
        let found = match self.client().execute(LOCATION, vec![]).await {
            Ok(found) => found,
            Err(error) if navigating(&error) => return Ok((String::new(), 0)),
            Err(error) => return Err(classify(&error)),
        };
        let url = found[0].as_str().unwrap_or_default().to_owned();
        let status = found[1].as_u64().unwrap_or(0);
        Ok((url, u16::try_from(status).unwrap_or(0)))
    }

    fn waiter(&self) -> Waiter {
        let config = self.browser.config();
        Waiter {
            started: Instant::now(),
            timeout: config.action_timeout,
            poll: config.poll,
        }
    }
}

/// The clock of one auto-waiting action.
struct Waiter {
    started: Instant,
    timeout: Duration,
    poll: Duration,
}

impl Waiter {
    /// Waits one polling interval; false once the action's time is up.
    async fn again(&self) -> bool {
        if self.started.elapsed() >= self.timeout {
            return false;
        }
        tokio::time::sleep(self.poll).await;
        true
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if self.client.take().is_some() {
            // Unclosed: a timed-out or cancelled step. Its Chromium goes now; the dropped
            // client ends the WebDriver session in the background.
            self.reap();
        }
    }
}

/// An error that waiting may clear: the element is not there yet, was replaced, is hidden
/// or covered.
fn not_ready(error: &CmdError) -> bool {
    matches!(
        error,
        CmdError::Standard(wd) if matches!(
            wd.error,
            ErrorStatus::NoSuchElement
                | ErrorStatus::StaleElementReference
                | ErrorStatus::ElementNotInteractable
                | ErrorStatus::ElementClickIntercepted
                | ErrorStatus::InvalidElementState
        )
    )
}

/// A script that ran while the page navigated away: no failure, only "not yet".
fn navigating(error: &CmdError) -> bool {
    matches!(
        error,
        CmdError::Standard(wd) if wd.error == ErrorStatus::JavascriptError
            || wd.error == ErrorStatus::ScriptTimeout
    )
}

/// A page answered with an HTTP error fails; a page whose status is unknown (0: not
/// loaded over HTTP) passes.
fn check_status(url: &str, status: u16) -> Result<(), Failure> {
    if status >= 400 {
        return Err(Failure::HttpStatus {
            url: url.to_owned(),
            status,
        });
    }
    Ok(())
}

/// Whether `url` matches `pattern` (see [`Page::wait_for_url`]).
pub(crate) fn url_matches(pattern: &str, url: &str) -> bool {
    let path = url
        .find("://")
        .and_then(|scheme| {
            url[scheme + 3..]
                .find('/')
                .map(|at| &url[scheme + 3 + at..])
        })
        .unwrap_or(url);
    match pattern.strip_suffix('*') {
        Some(prefix) => url.starts_with(prefix) || path.starts_with(prefix),
        None => url == pattern || path == pattern,
    }
}

fn listing(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_match_whole_paths_or_prefixes() {
        let url = "http://127.0.0.1:4000/dashboard?week=3";
        assert!(url_matches("/dashboard?week=3", url));
        assert!(url_matches("/dashboard*", url));
        assert!(url_matches(url, url));
        assert!(url_matches("http://127.0.0.1:4000/*", url));
        assert!(!url_matches("/dashboard", url));
        assert!(!url_matches("/login*", url));
    }

    #[test]
    fn statuses_of_4xx_and_5xx_fail() {
        assert!(check_status("u", 200).is_ok());
        assert!(check_status("u", 0).is_ok());
        assert!(matches!(
            check_status("u", 403),
            Err(Failure::HttpStatus { status: 403, .. })
        ));
    }

    #[test]
    fn checksums_are_lowercase_hex() {
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
