//! The [`Browser`]: one chromedriver, started once and shared through a workflow's `env`,
//! handing out a fresh, isolated [`Page`] per step attempt.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fantoccini::wd::Capabilities;
use serde_json::{json, Value};
use workflow_core::{RunId, StepContext};

use crate::cdp::{cookie_param, Cdp};
use crate::error::{classify, BrowserError, Failure};
use crate::page::Page;
use crate::process::{self, Driver};

/// How a [`Browser`] starts and how long its actions wait.
#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// Where attempts' artifacts go: `<artifacts>/run-<id>/<step>/attempt-<n>/`
    /// (downloads, screenshots, the evidence of failures).
    pub artifacts: PathBuf,
    /// chromedriver; found on the `PATH` (or `$CHROMEDRIVER`) when `None`.
    pub chromedriver: Option<PathBuf>,
    /// Chromium's binary; Debian's (or `$CHROMIUM`) when `None`.
    pub chromium: Option<PathBuf>,
    /// How long an action waits for its element, its URL or its download.
    pub action_timeout: Duration,
    /// How long a page may take to load.
    pub navigation_timeout: Duration,
    /// How often an auto-waiting action looks again.
    pub poll: Duration,
    /// The window's size in pixels (screenshots have it).
    pub window: (u32, u32),
}

impl BrowserConfig {
    /// Defaults: artifacts under `artifacts`, actions wait 5 s, pages load within 15 s,
    /// polling every 25 ms, a 1280×900 window.
    pub fn new(artifacts: impl Into<PathBuf>) -> Self {
        BrowserConfig {
            artifacts: artifacts.into(),
            chromedriver: None,
            chromium: None,
            action_timeout: Duration::from_secs(5),
            navigation_timeout: Duration::from_secs(15),
            poll: Duration::from_millis(25),
            window: (1280, 900),
        }
    }

    /// The same, with actions waiting `timeout`.
    pub fn action_timeout(mut self, timeout: Duration) -> Self {
        self.action_timeout = timeout;
        self
    }

    /// The same, with pages loading within `timeout`.
    pub fn navigation_timeout(mut self, timeout: Duration) -> Self {
        self.navigation_timeout = timeout;
        self
    }
}

/// Headless Chromium for workflow steps. Put it in the workflow's `env`; it is cheap to
/// clone (one shared chromedriver). Each step attempt takes its own [`Page`] with
/// [`Browser::page`]: a fresh Chromium with its own profile, so steps run in parallel
/// without sharing state, holding the cookies its run had when its last page closed (a
/// retry need not log in again).
///
/// chromedriver starts with [`Browser::launch`] and again, by the next page, if it
/// crashed. Dropping the last clone kills chromedriver's process group: no Chromium or
/// chromedriver process outlives the `Browser` (nor, so, the engine holding it in an
/// `env`), and a page dropped unfinished (a timed-out or cancelled step) ends its own
/// Chromium at once (SIGTERM, then SIGKILL after 3 s, on a thread of its own). Dropping the
/// last clone blocks for up to 2 s while the pages still open shut down.
///
/// Compiled, not run here: it needs Chromium and a site to visit.
///
/// ```no_run
/// use workflow_browser::{css, test_id, Browser, BrowserConfig, BrowserError};
/// use workflow_core::StepContext;
///
/// /// A step's action: the browser is the workflow's `env`.
/// async fn read_balance(browser: &Browser, ctx: &StepContext) -> Result<String, BrowserError> {
///     let page = browser.page(ctx).await?; // a fresh Chromium, with this run's cookies
///     page.goto("http://127.0.0.1:8080/account").await?;
///     page.wait_for(test_id("balance")).await?;
///     let balance = page.text(css("[data-testid=balance]")).await?;
///     page.close().await?;
///     Ok(balance)
/// }
///
/// # async fn start() -> Result<(), BrowserError> {
/// // Once per process: artifacts (downloads, failure screenshots) go under this directory.
/// let browser = Browser::launch(BrowserConfig::new("/var/lib/app/artifacts")).await?;
/// // engine.register::<Accounts>(browser.clone())?;
/// # let _ = browser;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Browser {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: BrowserConfig,
    chromedriver: PathBuf,
    /// Profiles and chromedriver's temporary files; removed on drop.
    scratch: PathBuf,
    driver: tokio::sync::Mutex<Option<Driver>>,
    /// chromedriver's process group, for hygiene checks (0 before the first launch).
    group: AtomicU32,
    launches: AtomicU32,
    pages: AtomicU64,
    cookies: Mutex<HashMap<RunId, Vec<Value>>>,
}

impl Browser {
    /// Starts chromedriver (Chromium starts per page). Fails with
    /// [`Failure::NotInstalled`] when there is none (see [`crate::ensure_installed`]).
    pub async fn launch(config: BrowserConfig) -> Result<Browser, BrowserError> {
        let fail = |failure| BrowserError::new("launch", failure);
        let chromedriver = config
            .chromedriver
            .clone()
            .or_else(process::find_chromedriver)
            .ok_or_else(|| fail(process::not_installed()))?;
        if config.chromium.is_none() && process::find_chromium().is_none() {
            return Err(fail(process::not_installed()));
        }
        static BROWSERS: AtomicU64 = AtomicU64::new(0);
        let scratch = std::env::temp_dir().join(format!(
            "workflow-browser-{}-{}",
            std::process::id(),
            BROWSERS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&scratch).map_err(|e| fail(e.into()))?;
        let browser = Browser {
            inner: Arc::new(Inner {
                config,
                chromedriver,
                scratch,
                driver: tokio::sync::Mutex::new(None),
                group: AtomicU32::new(0),
                launches: AtomicU32::new(0),
                pages: AtomicU64::new(0),
                cookies: Mutex::new(HashMap::new()),
            }),
        };
        browser.driver_port().await.map_err(fail)?;
        Ok(browser)
    }

    /// The configuration.
    pub fn config(&self) -> &BrowserConfig {
        &self.inner.config
    }

    /// How many times chromedriver was started (more than once after a crash).
    pub fn launches(&self) -> u32 {
        self.inner.launches.load(Ordering::SeqCst)
    }

    /// chromedriver's process group, which holds every process this browser started.
    pub fn process_group(&self) -> u32 {
        self.inner.group.load(Ordering::SeqCst)
    }

    /// The scratch directory holding the pages' profiles: every process of this browser
    /// is in its [`process_group`](Browser::process_group) or mentions this directory.
    pub fn scratch_dir(&self) -> &Path {
        &self.inner.scratch
    }

    /// The live processes of this browser: chromedriver, every page's Chromium and their
    /// crash handlers.
    pub fn processes(&self) -> Vec<process::ProcessInfo> {
        owned_processes(self.process_group(), &self.inner.scratch)
    }

    /// The cookies kept for a run (as the DevTools protocol spells them).
    pub fn cookies(&self, run: RunId) -> Vec<Value> {
        self.lock_cookies().get(&run).cloned().unwrap_or_default()
    }

    /// Forgets a run's cookies (when it is finished, say).
    pub fn forget(&self, run: RunId) {
        self.lock_cookies().remove(&run);
    }

    pub(crate) fn keep_cookies(&self, run: RunId, cookies: Vec<Value>) {
        self.lock_cookies().insert(run, cookies);
    }

    fn lock_cookies(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Vec<Value>>> {
        self.inner
            .cookies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The port of a live chromedriver: the running one, or a new one if it is gone.
    async fn driver_port(&self) -> Result<u16, Failure> {
        let mut driver = self.inner.driver.lock().await;
        if let Some(running) = driver.as_mut() {
            if running.alive() {
                return Ok(running.port);
            }
            tracing::warn!("chromedriver is gone; starting it again");
        }
        // Drop (and kill the group of) a dead one before starting another.
        *driver = None;
        let started = Driver::spawn(&self.inner.chromedriver, &self.inner.scratch)?;
        let port = started.port;
        self.inner.group.store(started.group(), Ordering::SeqCst);
        *driver = Some(started);
        self.inner.launches.fetch_add(1, Ordering::SeqCst);
        // Readiness, bounded: chromedriver accepts connections once it listens.
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if tokio::net::TcpStream::connect(address).await.is_ok() {
                return Ok(port);
            }
            let alive = driver.as_mut().is_some_and(Driver::alive);
            if !alive || tokio::time::Instant::now() >= deadline {
                *driver = None;
                return Err(Failure::Launch(format!(
                    "{} did not listen on {address} within 10 s",
                    self.inner.chromedriver.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A page for this attempt of a step: a fresh Chromium with its own profile, holding
    /// the run's cookies, downloading into the attempt's artifact directory. Close it with
    /// [`Page::close`] (which keeps its cookies for the run's next page); dropping it
    /// unclosed ends its Chromium.
    pub async fn page(&self, ctx: &StepContext) -> Result<Page, BrowserError> {
        let dir = attempt_dir(&self.inner.config.artifacts, ctx);
        let fail = |failure| BrowserError::new("page", failure);
        let downloads = dir.join("downloads");
        std::fs::create_dir_all(&downloads).map_err(|e| fail(e.into()))?;
        // Chromium does not finish downloads into a path with `..` in it, nor into a
        // relative one: it is given the canonical path. Everything the page reports and
        // the journal keeps (evidence, downloads) is under `dir` as configured.
        let chromium_downloads = std::fs::canonicalize(&downloads).map_err(|e| fail(e.into()))?;
        let n = self.inner.pages.fetch_add(1, Ordering::Relaxed);
        let profile = self.inner.scratch.join(format!("profile-{n}"));
        let capabilities = self.capabilities(&profile, &chromium_downloads);
        // A chromedriver that died since the last page is started again; one that dies
        // while the session is made is retried once.
        let mut tries = 0;
        let client = loop {
            tries += 1;
            let port = self.driver_port().await.map_err(fail)?;
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            let made = fantoccini::ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await;
            match made {
                Ok(client) => break client,
                Err(error) if tries < 2 => {
                    tracing::warn!(%error, "no session; trying once more");
                }
                Err(error) => {
                    process::kill(&pids(&profile));
                    return Err(fail(Failure::Crashed(format!(
                        "no WebDriver session: {error}"
                    ))));
                }
            }
        };
        let page = Page::new(self.clone(), client, ctx, dir, downloads, profile);
        let cookies: Vec<Value> = self.cookies(ctx.run_id).iter().map(cookie_param).collect();
        if !cookies.is_empty() {
            page.client()
                .issue_cmd(Cdp {
                    cmd: "Network.setCookies",
                    params: json!({ "cookies": cookies }),
                })
                .await
                .map_err(|e| fail(classify(&e)))?;
        }
        Ok(page)
    }

    fn capabilities(&self, profile: &Path, downloads: &Path) -> Capabilities {
        let config = &self.inner.config;
        let (width, height) = config.window;
        let mut options = json!({
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-crash-reporter",
                "--disable-background-networking",
                "--disable-extensions",
                "--no-first-run",
                "--no-default-browser-check",
                format!("--window-size={width},{height}"),
                format!("--user-data-dir={}", profile.display()),
            ],
            "prefs": {
                "download.default_directory": downloads.display().to_string(),
                "download.prompt_for_download": false,
                "download.directory_upgrade": true,
                "safebrowsing.enabled": false,
            },
        });
        if let Some(binary) = config.chromium.clone().or_else(process::find_chromium) {
            options["binary"] = Value::from(binary.display().to_string());
        }
        let mut capabilities = Capabilities::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), options);
        capabilities.insert(
            "timeouts".into(),
            json!({
                "pageLoad": config.navigation_timeout.as_millis() as u64,
                "script": config.action_timeout.as_millis() as u64,
                "implicit": 0,
            }),
        );
        capabilities
    }
}

/// The live processes in `group` or mentioning `scratch`.
pub(crate) fn owned_processes(group: u32, scratch: &Path) -> Vec<process::ProcessInfo> {
    let marker = scratch.display().to_string();
    process::processes()
        .into_iter()
        .filter(|p| p.group == group || p.command.contains(&marker))
        .collect()
}

/// The pids of a page's processes.
pub(crate) fn pids(profile: &Path) -> Vec<u32> {
    process::processes_of(profile)
        .iter()
        .map(|p| p.pid)
        .collect()
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Chromium's browser processes first, gently, so their crash handlers end with
        // them; then chromedriver's process group and whatever mentions the scratch
        // directory (a crash handler whose Chromium was killed).
        let browsers: Vec<u32> = process::processes_mentioning(&self.scratch)
            .iter()
            .filter(|p| p.command.contains("--user-data-dir=") && !p.command.contains(" --type="))
            .map(|p| p.pid)
            .collect();
        process::terminate(&browsers);
        let started = std::time::Instant::now();
        while started.elapsed() < SHUTDOWN_GRACE
            && process::processes()
                .iter()
                .any(|p| browsers.contains(&p.pid))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.driver.get_mut().take();
        let left: Vec<u32> = process::processes_mentioning(&self.scratch)
            .iter()
            .map(|p| p.pid)
            .collect();
        process::kill(&left);
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// How long the browsers of a dropped [`Browser`] may take to shut down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The directory of a step attempt's artifacts: `<artifacts>/run-<id>/<step>/attempt-<n>`,
/// under `artifacts` as configured, so a relative directory gives relative paths (the
/// journal keeps them as written, and they stay valid when the store moves with its
/// working directory).
pub(crate) fn attempt_dir(artifacts: &Path, ctx: &StepContext) -> PathBuf {
    artifacts
        .join(format!("run-{}", ctx.run_id.0))
        .join(ctx.step)
        .join(format!("attempt-{}", ctx.attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(run: u64, step: &'static str, attempt: u32) -> StepContext {
        StepContext {
            workflow: "Test",
            run_id: RunId(run),
            step,
            attempt,
            idempotency_key: format!("Test/{run}/{step}"),
            deadline: None,
            dry_run: false,
            trace_id: "t".into(),
            fence: 1,
            cancel: Default::default(),
            valid_until: Default::default(),
        }
    }

    #[test]
    fn an_attempts_directory_keeps_the_artifacts_directory_as_configured() {
        let relative = attempt_dir(Path::new("artifacts"), &ctx(7, "report", 2));
        assert_eq!(relative, Path::new("artifacts/run-7/report/attempt-2"));
        assert!(relative.is_relative());
        let dotted = attempt_dir(Path::new("../shared/evidence"), &ctx(7, "report", 1));
        assert_eq!(
            dotted,
            Path::new("../shared/evidence/run-7/report/attempt-1")
        );
        let absolute = attempt_dir(Path::new("/var/lib/flows"), &ctx(1, "login", 3));
        assert_eq!(absolute, Path::new("/var/lib/flows/run-1/login/attempt-3"));
    }
}
