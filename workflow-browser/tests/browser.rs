//! Browser steps in headless Chromium (Debian's `chromium` through `chromedriver`) against
//! a site served on loopback by axum ([`site`]): the actions, each classification of
//! their failures with its evidence, retries that keep the run's login, a crashed browser
//! relaunched, process hygiene, and dry runs.
//!
//! Without chromedriver the tests install Debian's packages when they run as root with
//! apt-get (`ensure_installed`), and otherwise fail: they never skip.

mod site;

use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};
use site::{Site, REPORT_CSV};
use workflow_browser::{
    css, ensure_installed, processes, test_id, Browser, BrowserConfig, BrowserError, Failure, Page,
};
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::{ErrorKind, RunError, RunId, StartOptions};

/// A browser whose artifacts go to a directory of this test's own.
async fn browser(test: &str, config: impl FnOnce(BrowserConfig) -> BrowserConfig) -> Browser {
    ensure_installed().expect("chromedriver and chromium");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("browser-artifacts")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    Browser::launch(config(BrowserConfig::new(dir)))
        .await
        .expect("chromedriver starts")
}

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

/// Signs in on the login page the dashboard redirected to.
async fn log_in(page: &Page) -> Result<(), BrowserError> {
    page.fill(test_id("user"), "robot").await?;
    page.fill(test_id("password"), "hunter2").await?;
    page.click(test_id("sign-in")).await?;
    page.wait_for_url("/dashboard").await?;
    Ok(())
}

/// The live processes of a browser, also after it was dropped: in chromedriver's group
/// or mentioning its scratch directory (Chromium's crash handlers).
fn owned(group: u32, scratch: &std::path::Path) -> usize {
    let marker = scratch.display().to_string();
    processes()
        .iter()
        .filter(|p| p.group == group || p.command.contains(&marker))
        .count()
}

/// Waits, bounded, until `done` holds (processes take a moment to start and exit, more
/// on a loaded machine).
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} did not happen within 30 s");
}

fn failures(events: &[Event]) -> Vec<(u32, ErrorKind, String)> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::AttemptFailed {
                attempt,
                kind,
                message,
                ..
            } => Some((*attempt, *kind, message.clone())),
            _ => None,
        })
        .collect()
}

/// The error of a run that should have failed.
fn failed<T>(outputs: Result<T, RunError>) -> RunError {
    match outputs {
        Ok(_) => panic!("the run should have failed"),
        Err(error) => error,
    }
}

/// The paths a failure message names as its evidence.
fn evidence_paths(message: &str) -> Vec<PathBuf> {
    let Some(start) = message.find("[evidence: ") else {
        return Vec::new();
    };
    message[start + 11..]
        .trim_end_matches(']')
        .split(", ")
        .map(PathBuf::from)
        .collect()
}

/// The steps of the workflows below.
mod steps {
    use super::*;

    /// Opens the dashboard, signing in only if the run's cookies hold no session, and
    /// rebuilds the figures with the button that fails twice.
    pub async fn rebuild(
        env: &Browser,
        ctx: &StepContext,
        site: String,
    ) -> Result<String, BrowserError> {
        let page = env.page(ctx).await?;
        page.goto(&format!("{site}/dashboard")).await?;
        if page.url().await?.ends_with("/login") {
            log_in(&page).await?;
        }
        page.click(test_id("flaky")).await?;
        let text = page.text(test_id("rebuilt")).await?;
        page.close().await?;
        Ok(text)
    }

    /// Opens the admin page (403).
    pub async fn admin(env: &Browser, ctx: &StepContext, site: String) -> Result<(), BrowserError> {
        let page = env.page(ctx).await?;
        page.goto(&format!("{site}/admin")).await?;
        page.close().await
    }

    /// Signs in and asserts a greeting the dashboard does not show.
    pub async fn greet(env: &Browser, ctx: &StepContext, site: String) -> Result<(), BrowserError> {
        let page = env.page(ctx).await?;
        page.goto(&format!("{site}/dashboard")).await?;
        log_in(&page).await?;
        page.assert_text(test_id("greeting"), "Hello, somebody else")
            .await?;
        page.close().await
    }

    /// On its first attempt, kills the whole browser (chromedriver and every Chromium)
    /// between two actions; later attempts work.
    pub async fn crash_once(
        env: &Browser,
        ctx: &StepContext,
        site: String,
    ) -> Result<String, BrowserError> {
        let page = env.page(ctx).await?;
        page.goto(&format!("{site}/login")).await?;
        if ctx.attempt == 1 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", env.process_group())])
                .status();
        }
        page.fill(test_id("user"), "robot").await?;
        let url = page.url().await?;
        page.close().await?;
        Ok(url)
    }

    /// Opens a page that never answers.
    pub async fn hang(env: &Browser, ctx: &StepContext, site: String) -> Result<(), BrowserError> {
        let page = env.page(ctx).await?;
        page.goto(&format!("{site}/hang")).await?;
        page.close().await
    }
}

workflow! {
    /// A button that fails twice: retried, and the retries keep the login.
    pub workflow Rebuild(site: String) env Browser {
        step rebuild -> String {
            action: steps::rebuild(env, ctx, site),
            retry: { max_attempts: 3, backoff: fixed, initial: 10ms, max: 10ms, jitter: none },
        }
    }
}

workflow! {
    /// A 403 page: permanent.
    pub workflow Admin(site: String) env Browser {
        step admin -> () {
            action: steps::admin(env, ctx, site),
            retry: { max_attempts: 3, backoff: fixed, initial: 10ms, max: 10ms, jitter: none },
        }
    }
}

workflow! {
    /// An assertion that does not hold: permanent.
    pub workflow Greet(site: String) env Browser {
        step greet -> () {
            action: steps::greet(env, ctx, site),
            retry: { max_attempts: 3, backoff: fixed, initial: 10ms, max: 10ms, jitter: none },
        }
    }
}

workflow! {
    /// A crashed browser: transient, relaunched.
    pub workflow Crash(site: String) env Browser {
        step crash_once -> String {
            action: steps::crash_once(env, ctx, site),
            retry: { max_attempts: 2, backoff: fixed, initial: 10ms, max: 10ms, jitter: none },
        }
    }
}

workflow! {
    /// A hung page, bounded by the step's timeout.
    pub workflow Hang(site: String) env Browser {
        step hang -> () {
            action: steps::hang(env, ctx, site),
            timeout: 3s,
        }
    }
}

workflow! {
    /// A hung page that outlasts any test: it ends by cancellation or shutdown, never by
    /// its timeout, however slow the machine.
    pub workflow LongHang(site: String) env Browser {
        step hang -> () {
            action: steps::hang(env, ctx, site),
            timeout: 10m,
        }
    }
}

workflow! {
    /// A browser step with an external effect.
    pub workflow Publish(site: String) env Browser {
        step publish -> () {
            action: steps::admin(env, ctx, site),
            effect: external,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_logs_in_follows_the_redirect_waits_for_a_late_element_and_downloads_a_csv() {
    let site = Site::serve().await;
    let browser = browser("actions", |c| c).await;
    let page = browser.page(&ctx(1, "report", 1)).await.unwrap();
    assert_eq!(page.goto(&site.url("/dashboard")).await.unwrap(), 200);
    // Not signed in: the dashboard redirected to the login form.
    assert_eq!(page.url().await.unwrap(), site.url("/login"));
    log_in(&page).await.unwrap();
    assert_eq!(site.logins(), 1);
    assert_eq!(
        page.text(test_id("greeting")).await.unwrap(),
        "Hello, robot"
    );
    // Shown 600 ms after the page loaded: the action waits for it.
    page.wait_for(test_id("late")).await.unwrap();
    assert_eq!(page.text(css("#figures p")).await.unwrap(), "Figures ready");
    page.assert_text(test_id("greeting"), "Hello, robot")
        .await
        .unwrap();

    let report = page.download(test_id("export")).await.unwrap();
    assert_eq!(report.file_name, "report.csv");
    assert_eq!(report.bytes, REPORT_CSV.len() as u64);
    assert_eq!(
        report.sha256,
        format!("{:x}", Sha256::digest(REPORT_CSV.as_bytes()))
    );
    assert_eq!(std::fs::read_to_string(&report.path).unwrap(), REPORT_CSV);
    assert!(report.path.starts_with(
        browser
            .config()
            .artifacts
            .join("run-1/report/attempt-1/downloads")
    ));

    let shot = page.screenshot("dashboard").await.unwrap();
    assert!(std::fs::read(&shot).unwrap().starts_with(b"\x89PNG"));
    assert!(page
        .html()
        .await
        .unwrap()
        .contains("data-testid=\"export\""));
    page.close().await.unwrap();

    // The run's next page holds the session: no second login.
    let next = browser.page(&ctx(1, "report", 2)).await.unwrap();
    next.goto(&site.url("/dashboard")).await.unwrap();
    assert_eq!(next.url().await.unwrap(), site.url("/dashboard"));
    next.close().await.unwrap();
    // Another run's page does not.
    let other = browser.page(&ctx(2, "report", 1)).await.unwrap();
    other.goto(&site.url("/dashboard")).await.unwrap();
    assert_eq!(other.url().await.unwrap(), site.url("/login"));
    other.close().await.unwrap();
    assert_eq!(site.logins(), 1);
}

/// `path` relative to `base`, both absolute: `../..` up to their common part, then down.
fn relative_to(base: &std::path::Path, path: &std::path::Path) -> PathBuf {
    let base: Vec<_> = base.components().collect();
    let path: Vec<_> = path.components().collect();
    let common = base.iter().zip(&path).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in common..base.len() {
        relative.push("..");
    }
    for part in &path[common..] {
        relative.push(part);
    }
    relative
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_and_downloads_under_a_relative_artifacts_directory_stay_relative() {
    ensure_installed().expect("chromedriver and chromium");
    let site = Site::serve().await;
    let absolute = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("browser-artifacts")
        .join("relative");
    let _ = std::fs::remove_dir_all(&absolute);
    let artifacts = relative_to(&std::env::current_dir().unwrap(), &absolute);
    assert!(artifacts.is_relative(), "{}", artifacts.display());
    let browser = Browser::launch(BrowserConfig::new(&artifacts))
        .await
        .expect("chromedriver starts");
    let page = browser.page(&ctx(3, "report", 1)).await.unwrap();
    let dir = artifacts.join("run-3/report/attempt-1");
    assert_eq!(page.artifacts(), dir);
    page.goto(&site.url("/dashboard")).await.unwrap();
    log_in(&page).await.unwrap();
    // Downloaded into the configured directory (Chromium itself is given its canonical
    // path), and named as configured.
    let report = page.download(test_id("export")).await.unwrap();
    assert_eq!(report.path, dir.join("downloads/report.csv"));
    assert_eq!(std::fs::read_to_string(&report.path).unwrap(), REPORT_CSV);
    assert_eq!(
        page.screenshot("dashboard").await.unwrap(),
        dir.join("dashboard.png")
    );
    // A failure's evidence is named as configured, in the error and in the step error
    // the journal keeps.
    let error = page
        .fail(
            "check",
            Failure::Assertion {
                selector: "test_id(\"greeting\")".into(),
                actual: "Hello, robot".into(),
                expected: "Hello".into(),
            },
        )
        .await;
    assert_eq!(
        error.evidence().screenshot.as_deref(),
        Some(dir.join("failure-1.png").as_path())
    );
    assert_eq!(
        error.evidence().html.as_deref(),
        Some(dir.join("failure-1.html").as_path())
    );
    let journaled = StepError::from(error);
    assert_eq!(
        evidence_paths(journaled.message()),
        vec![dir.join("failure-1.png"), dir.join("failure-1.html")]
    );
    assert!(std::fs::read(dir.join("failure-1.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_timeout_is_transient_and_the_retries_keep_the_login() {
    let site = Site::serve().await;
    let browser = browser("flaky", |c| c.action_timeout(Duration::from_millis(2500))).await;
    let artifacts = browser.config().artifacts.clone();
    let engine = Engine::builder().build();
    engine.register::<Rebuild>(browser).unwrap();
    let run = engine
        .start::<Rebuild>(RebuildInput { site: site.url("") })
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.rebuild, "Rebuilt");
    assert_eq!(site.seen.flaky.load(std::sync::atomic::Ordering::SeqCst), 3);
    // Logged in on the first attempt only: the retries had the run's cookies.
    assert_eq!(site.logins(), 1);

    let failed = failures(&engine.events(run.id()).await.unwrap());
    assert_eq!(failed.len(), 2, "{failed:?}");
    for (n, (attempt, kind, message)) in failed.iter().enumerate() {
        assert_eq!(*attempt, n as u32 + 1);
        assert_eq!(*kind, ErrorKind::Timeout);
        assert!(
            message.starts_with("text: test_id(\"rebuilt\") was not ready within 2500 ms"),
            "{message}"
        );
        // The evidence is journaled with the attempt and on disk under its directory.
        let paths = evidence_paths(message);
        let dir = artifacts.join(format!("run-{}/rebuild/attempt-{attempt}", run.id().0));
        assert_eq!(
            paths,
            vec![dir.join("failure-1.png"), dir.join("failure-1.html")]
        );
        assert!(std::fs::read(&paths[0]).unwrap().starts_with(b"\x89PNG"));
        let html = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(html.contains("Failed: 503"), "{html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_page_fails_permanently_after_one_attempt_with_its_evidence() {
    let site = Site::serve().await;
    let browser = browser("forbidden", |c| c).await;
    let engine = Engine::builder().build();
    engine.register::<Admin>(browser).unwrap();
    let run = engine
        .start::<Admin>(AdminInput { site: site.url("") })
        .await
        .unwrap();
    let error = failed(run.outputs().await);
    let RunError::Failed {
        attempts, error, ..
    } = error
    else {
        panic!("{error}")
    };
    assert_eq!(attempts, 1);
    assert_eq!(error.kind(), ErrorKind::Unauthorized);
    assert!(
        error
            .message()
            .starts_with(&format!("goto: {} answered HTTP 403", site.url("/admin"))),
        "{}",
        error.message()
    );
    let paths = evidence_paths(error.message());
    assert_eq!(paths.len(), 2);
    let html = std::fs::read_to_string(&paths[1]).unwrap();
    assert!(html.contains("Forbidden: admins only"), "{html}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assertion_that_does_not_hold_fails_permanently() {
    let site = Site::serve().await;
    let browser = browser("assertion", |c| {
        c.action_timeout(Duration::from_millis(2000))
    })
    .await;
    let engine = Engine::builder().build();
    engine.register::<Greet>(browser).unwrap();
    let run = engine
        .start::<Greet>(GreetInput { site: site.url("") })
        .await
        .unwrap();
    let RunError::Failed {
        attempts, error, ..
    } = failed(run.outputs().await)
    else {
        panic!("the run should fail")
    };
    assert_eq!(attempts, 1);
    assert_eq!(error.kind(), ErrorKind::Validation);
    assert!(
        error.message().starts_with(
            "assert_text: test_id(\"greeting\") shows \"Hello, robot\", expected \"Hello, somebody else\""
        ),
        "{}",
        error.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_navigation_timeout_is_transient() {
    let site = Site::serve().await;
    let browser = browser("navigation", |c| {
        c.navigation_timeout(Duration::from_millis(1000))
    })
    .await;
    let page = browser.page(&ctx(1, "open", 1)).await.unwrap();
    let error = page.goto(&site.url("/hang")).await.unwrap_err();
    assert!(
        matches!(error.failure(), Failure::NavigationTimeout { .. }),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Timeout);
    assert!(error.kind().is_transient());
    drop(page);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_browser_is_transient_and_relaunched_for_the_retry() {
    let site = Site::serve().await;
    let browser = browser("crash", |c| c).await;
    let first_group = browser.process_group();
    let scratch = browser.scratch_dir().to_owned();
    let engine = Engine::builder().build();
    engine.register::<Crash>(browser.clone()).unwrap();
    let run = engine
        .start::<Crash>(CrashInput { site: site.url("") })
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.crash_once, site.url("/login"));
    let failed = failures(&engine.events(run.id()).await.unwrap());
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].1, ErrorKind::Unavailable);
    assert!(
        failed[0].2.starts_with("fill: the browser went away"),
        "{}",
        failed[0].2
    );
    assert_eq!(browser.launches(), 2);
    assert_ne!(browser.process_group(), first_group);
    eventually("the killed browser's exit", || {
        processes().iter().all(|p| p.group != first_group)
    })
    .await;
    // Dropping the browser ends the new one, and the crash handler the killed one left.
    drop(engine);
    drop(browser);
    eventually("every browser process's exit", || {
        owned(first_group, &scratch) == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_browser_process_outlives_a_hung_step_a_cancelled_run_or_the_engine() {
    let site = Site::serve().await;
    let browser = browser("hygiene", |c| c.navigation_timeout(Duration::from_secs(60))).await;
    let group = browser.process_group();
    let scratch = browser.scratch_dir().to_owned();
    let owned = || owned(group, &scratch);
    assert_eq!(owned(), 1, "chromedriver alone");
    let engine = Engine::builder().build();
    engine.register::<Hang>(browser.clone()).unwrap();
    engine.register::<LongHang>(browser.clone()).unwrap();
    let input = || HangInput { site: site.url("") };
    let long = || LongHangInput { site: site.url("") };

    // A hung page is bounded by the step's timeout (3 s), not the navigation's (60 s);
    // its Chromium is gone with the attempt.
    let started = std::time::Instant::now();
    let run = engine.start::<Hang>(input()).await.unwrap();
    let RunError::Failed { error, .. } = failed(run.outputs().await) else {
        panic!("the hung step should fail")
    };
    assert_eq!(error.kind(), ErrorKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    eventually("the hung page's exit", || owned() == 1).await;
    drop(run);

    // A cancelled run: its page is gone once the run is.
    let run = engine.start::<LongHang>(long()).await.unwrap();
    eventually("the page opening", || owned() > 3).await;
    let cancelled = std::time::Instant::now();
    run.cancel("operator").await.unwrap();
    assert!(matches!(
        failed(run.outputs().await),
        RunError::Cancelled(_)
    ));
    eventually("the cancelled run's page exit", || owned() == 1).await;
    // The cancel dropped the attempt (an internal step) at once, and its page with it:
    // gone in moments, not at the step's ten-minute timeout.
    let gone = cancelled.elapsed();
    eprintln!("the cancelled run's Chromium was gone {gone:?} after the cancel");
    assert!(gone < Duration::from_secs(15), "{gone:?}");
    let view = run.inspect().await.unwrap();
    assert_eq!(view.steps[0].state.name(), "cancelled", "{view:?}");
    drop(run);

    // The engine: a run in flight, then shutdown; dropping the engine (whose env holds
    // the last browser) leaves no chromedriver and no Chromium.
    let run = engine.start::<LongHang>(long()).await.unwrap();
    eventually("the page opening", || owned() > 3).await;
    drop(browser);
    engine.shutdown();
    drop(run);
    drop(engine);
    for _ in 0..1200 {
        if owned() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let marker = scratch.display().to_string();
    let left: Vec<String> = processes()
        .into_iter()
        .filter(|p| p.group == group || p.command.contains(&marker))
        .map(|p| p.command.chars().take(150).collect())
        .collect();
    assert!(left.is_empty(), "{left:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_proposes_the_external_browser_step_instead_of_running_it() {
    let site = Site::serve().await;
    let browser = browser("dry-run", |c| c).await;
    let group = browser.process_group();
    let scratch = browser.scratch_dir().to_owned();
    let engine = Engine::builder().build();
    engine.register::<Publish>(browser).unwrap();
    let run = engine
        .start_with::<Publish>(
            PublishInput { site: site.url("") },
            StartOptions {
                dry_run: true,
                ..StartOptions::default()
            },
        )
        .await
        .unwrap();
    let _ = run.outputs().await;
    let proposals = run.proposals().await.unwrap();
    assert_eq!(proposals.len(), 1);
    assert_eq!(proposals[0].0, "publish");
    assert_eq!(site.requests(), 0, "the site saw nothing");
    assert_eq!(owned(group, &scratch), 1, "no page was opened");
}
