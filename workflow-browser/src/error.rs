//! What a browser action returns when it fails: [`BrowserError`], a [`Failure`] with the
//! evidence saved for it, converted into the engine's [`StepError`] kinds.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use workflow_core::{ErrorKind, StepError};

/// Why a browser action failed. Each variant has one [`ErrorKind`] ([`Failure::kind`]),
/// which decides whether the engine retries the step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// The element was not there, not visible or not interactable in time (transient).
    #[error("{selector} was not ready within {} ms", .waited.as_millis())]
    SelectorTimeout {
        /// The selector, as written (`test_id("login")`, `css("form button")`).
        selector: String,
        /// How long the action waited.
        waited: Duration,
    },
    /// A page did not finish loading in time (transient).
    #[error("{url} did not finish loading within {} ms", .waited.as_millis())]
    NavigationTimeout {
        /// The URL asked for.
        url: String,
        /// How long the action waited.
        waited: Duration,
    },
    /// The page's URL did not come to match in time (transient).
    #[error("the URL did not match `{expected}` within {} ms (it is {actual})", .waited.as_millis())]
    UrlTimeout {
        /// The pattern waited for.
        expected: String,
        /// The URL when the wait ended.
        actual: String,
        /// How long the action waited.
        waited: Duration,
    },
    /// The page was answered with an HTTP error: 4xx is permanent (401/403 `unauthorized`,
    /// 404/410 `not_found`, 429 `rate_limited`, other 4xx `validation`), 5xx transient.
    #[error("{url} answered HTTP {status}")]
    HttpStatus {
        /// The page's URL.
        url: String,
        /// The status of the page's document.
        status: u16,
    },
    /// The page is there but says something else than asserted (permanent).
    #[error("{selector} shows {actual:?}, expected {expected:?}")]
    Assertion {
        /// The selector asserted on.
        selector: String,
        /// What was expected.
        expected: String,
        /// What the page shows.
        actual: String,
    },
    /// A download did not complete in time (transient).
    #[error("no download completed within {} ms", .waited.as_millis())]
    DownloadTimeout {
        /// How long the action waited.
        waited: Duration,
    },
    /// The browser (or chromedriver) crashed or went away (transient: the next page
    /// relaunches what is missing).
    #[error("the browser went away: {0}")]
    Crashed(String),
    /// chromedriver could not be started (transient: a later attempt starts it again).
    #[error("chromedriver could not be started: {0}")]
    Launch(String),
    /// No chromedriver or Chromium was found on the machine (permanent).
    #[error("{0}")]
    NotInstalled(String),
    /// WebDriver refused the command for another reason (permanent).
    #[error("WebDriver: {0}")]
    Driver(String),
    /// Writing an artifact failed.
    #[error("artifact: {0}")]
    Io(#[from] std::io::Error),
}

impl Failure {
    /// The error kind the engine sees.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Failure::SelectorTimeout { .. }
            | Failure::NavigationTimeout { .. }
            | Failure::UrlTimeout { .. }
            | Failure::DownloadTimeout { .. } => ErrorKind::Timeout,
            Failure::HttpStatus { status, .. } => match status {
                401 | 403 => ErrorKind::Unauthorized,
                404 | 410 => ErrorKind::NotFound,
                429 => ErrorKind::RateLimited,
                500.. => ErrorKind::Unavailable,
                _ => ErrorKind::Validation,
            },
            Failure::Assertion { .. } => ErrorKind::Validation,
            Failure::Crashed(_) | Failure::Launch(_) => ErrorKind::Unavailable,
            Failure::NotInstalled(_) | Failure::Driver(_) => ErrorKind::Internal,
            Failure::Io(error) => StepError::from(std::io::Error::from(error.kind())).kind(),
        }
    }

    /// Classifies an error of the WebDriver client (of a call through
    /// [`Page::client`](crate::Page::client)): a lost session or connection is
    /// [`Failure::Crashed`], anything else [`Failure::Driver`].
    pub fn from_client(error: &fantoccini::error::CmdError) -> Failure {
        classify(error)
    }

    /// Whether the browser is gone, so no evidence can be taken from it.
    pub fn is_crash(&self) -> bool {
        matches!(self, Failure::Crashed(_) | Failure::Launch(_))
    }
}

/// What a failed action left behind: a screenshot and the page's HTML, in the attempt's
/// artifact directory (`<artifacts>/run-<id>/<step>/attempt-<n>/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The screenshot (PNG), if the browser could still take one.
    pub screenshot: Option<PathBuf>,
    /// The page's HTML, if the browser could still give it.
    pub html: Option<PathBuf>,
}

impl Evidence {
    /// Whether nothing was saved.
    pub fn is_empty(&self) -> bool {
        self.screenshot.is_none() && self.html.is_none()
    }
}

/// A failed browser action: what failed, why, and the evidence saved for it. Converts into
/// a [`StepError`] whose kind is [`Failure::kind`] and whose message names the evidence's
/// paths, so they are journaled with the failed attempt and shown by `workflow runs show`.
#[derive(Debug, thiserror::Error)]
pub struct BrowserError {
    action: &'static str,
    failure: Failure,
    evidence: Evidence,
}

impl BrowserError {
    /// An error of `action` (`goto`, `click`, ...) without evidence.
    pub fn new(action: &'static str, failure: Failure) -> Self {
        BrowserError {
            action,
            failure,
            evidence: Evidence::default(),
        }
    }

    /// The action that failed.
    pub fn action(&self) -> &'static str {
        self.action
    }

    /// Why it failed.
    pub fn failure(&self) -> &Failure {
        &self.failure
    }

    /// The kind the engine sees.
    pub fn kind(&self) -> ErrorKind {
        self.failure.kind()
    }

    /// The screenshot and HTML saved when it failed.
    pub fn evidence(&self) -> &Evidence {
        &self.evidence
    }

    pub(crate) fn with_evidence(mut self, evidence: Evidence) -> Self {
        self.evidence = evidence;
        self
    }
}

impl fmt::Display for BrowserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.action, self.failure)?;
        let saved: Vec<String> = [&self.evidence.screenshot, &self.evidence.html]
            .into_iter()
            .flatten()
            .map(|path| path.display().to_string())
            .collect();
        if !saved.is_empty() {
            write!(f, " [evidence: {}]", saved.join(", "))?;
        }
        Ok(())
    }
}

impl From<BrowserError> for StepError {
    fn from(error: BrowserError) -> Self {
        StepError::new(error.kind(), error.to_string())
    }
}

/// Classifies a WebDriver error: a lost connection or session is a crash, a timeout of
/// page loading a navigation timeout (done by the caller), anything else the driver's.
pub(crate) fn classify(error: &fantoccini::error::CmdError) -> Failure {
    use fantoccini::error::{CmdError, ErrorStatus};
    match error {
        CmdError::Lost(_) | CmdError::Failed(_) | CmdError::FailedC(_) => {
            Failure::Crashed(error.to_string())
        }
        CmdError::Standard(wd) => {
            let message = wd.message.to_ascii_lowercase();
            let gone = wd.error == ErrorStatus::InvalidSessionId
                || wd.error == ErrorStatus::NoSuchWindow
                || ["not reachable", "disconnected", "crash", "session deleted"]
                    .iter()
                    .any(|sign| message.contains(sign));
            if gone {
                Failure::Crashed(format!("{}: {}", wd.error, wd.message))
            } else {
                Failure::Driver(format!("{}: {}", wd.error, wd.message))
            }
        }
        other => Failure::Driver(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_onto_the_engine_kinds() {
        let status = |status| Failure::HttpStatus {
            url: "http://x/".into(),
            status,
        };
        assert_eq!(status(403).kind(), ErrorKind::Unauthorized);
        assert_eq!(status(404).kind(), ErrorKind::NotFound);
        assert_eq!(status(422).kind(), ErrorKind::Validation);
        assert_eq!(status(429).kind(), ErrorKind::RateLimited);
        assert_eq!(status(503).kind(), ErrorKind::Unavailable);
        assert!(!status(400).kind().is_transient());
        let waited = Duration::from_millis(5);
        assert!(Failure::SelectorTimeout {
            selector: "test_id(\"x\")".into(),
            waited
        }
        .kind()
        .is_transient());
        assert!(Failure::Crashed("gone".into()).kind().is_transient());
        assert!(!Failure::Assertion {
            selector: "s".into(),
            expected: "a".into(),
            actual: "b".into()
        }
        .kind()
        .is_transient());
        assert!(!Failure::NotInstalled("no".into()).kind().is_transient());
    }

    #[test]
    fn the_step_error_names_the_evidence() {
        let error = BrowserError::new(
            "click",
            Failure::SelectorTimeout {
                selector: "test_id(\"go\")".into(),
                waited: Duration::from_millis(1500),
            },
        )
        .with_evidence(Evidence {
            screenshot: Some("/a/run-1/s/attempt-1/failure-1.png".into()),
            html: Some("/a/run-1/s/attempt-1/failure-1.html".into()),
        });
        let step: StepError = error.into();
        assert_eq!(step.kind(), ErrorKind::Timeout);
        assert_eq!(
            step.message(),
            "click: test_id(\"go\") was not ready within 1500 ms [evidence: \
             /a/run-1/s/attempt-1/failure-1.png, /a/run-1/s/attempt-1/failure-1.html]"
        );
    }
}
