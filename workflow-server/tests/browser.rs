//! The inbox in a real browser: headless Chromium driven through chromedriver (Debian's
//! `chromium` and `chromium-driver`), over the WebDriver JSON protocol with a small client.
//! An approver opens the inbox, sees the task, approves it with a comment and sees the run
//! complete; an outsider gets 404. Screenshots go to `target/browser/`.
//!
//! The identities come from a trusted header, as behind a reverse proxy: the same router
//! is served on two ports, each setting `X-Forwarded-User` for whoever connects there.
//!
//! Without chromedriver the test installs Debian's packages when it runs as root with
//! apt-get (as `.ci/run` does before it), and otherwise fails (it does not skip). The
//! console's pages are checked with axe-core, which the test installs from the npm
//! registry (and npm from Debian's packages, the same way, when it is missing).

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, Method};
use axum::middleware::map_request;
use base64::Engine as _;
use common::*;
use serde_json::{json, Value};
use workflow_core::store::RunStatus;

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn chromedriver() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMEDRIVER") {
        return PathBuf::from(path);
    }
    if let Some(path) = find_chromedriver() {
        return path;
    }
    install_chromium();
    find_chromedriver().unwrap_or_else(|| {
        panic!(
            "chromedriver is not installed and could not be installed here: the browser test \
             needs Debian's `chromium` and `chromium-driver` (apt-get install chromium \
             chromium-driver), or CHROMEDRIVER=/path/to/chromedriver"
        )
    })
}

fn find_chromedriver() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromedriver"))
            .find(|path| path.is_file())
    })
}

/// Installs Debian's `chromium` and `chromium-driver` when this runs as root on a machine
/// with apt-get, so that `cargo test --workspace` needs no set-up of its own; elsewhere it
/// leaves the machine alone and the test says what to install.
fn install_chromium() {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !root || !std::path::Path::new("/usr/bin/apt-get").is_file() {
        return;
    }
    eprintln!("browser test: installing chromium and chromium-driver with apt-get");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("apt-get update -qq && apt-get install -y -qq chromium chromium-driver")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status();
    if !status.as_ref().is_ok_and(|status| status.success()) {
        eprintln!("browser test: apt-get could not install chromium ({status:?})");
    }
}

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|path| path.is_file())
}

/// A WebDriver session on a chromedriver this test started (killed when dropped).
struct Browser {
    driver: SocketAddr,
    session: String,
    _process: tokio::process::Child,
}

impl Browser {
    async fn start() -> Browser {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let path = chromedriver();
        let process = tokio::process::Command::new(&path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
        let driver: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // Readiness, bounded: chromedriver answers /status once it listens.
        let mut ready = false;
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(driver).await.is_ok() {
                let status = call(driver, Method::GET, "/status", None).await;
                if status["value"]["ready"] == true {
                    ready = true;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ready, "chromedriver did not become ready within 10 s");
        let mut options = json!({
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1200,1400"]
        });
        if let Some(binary) = chromium() {
            options["binary"] = Value::from(binary.display().to_string());
        }
        let created = call(
            driver,
            Method::POST,
            "/session",
            Some(json!({
                "capabilities": { "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": options,
                }}
            })),
        )
        .await;
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_owned();
        Browser {
            driver,
            session,
            _process: process,
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let answer = call(self.driver, method, &path, body).await;
        if answer["value"]["error"].is_string() {
            panic!("WebDriver {path}: {answer}");
        }
        answer["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.call(Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    async fn find(&self, css: &str) -> String {
        let found = self
            .call(
                Method::POST,
                "/element",
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        found[ELEMENT].as_str().unwrap().to_owned()
    }

    async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        let text = self
            .call(Method::GET, &format!("/element/{element}/text"), None)
            .await;
        text.as_str().unwrap_or_default().to_owned()
    }

    async fn title(&self) -> String {
        self.call(Method::GET, "/title", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.call(Method::GET, "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let dir = target.join("browser");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    async fn quit(self) {
        call(
            self.driver,
            Method::DELETE,
            &format!("/session/{}", self.session),
            None,
        )
        .await;
    }
}

async fn call(driver: SocketAddr, method: Method, path: &str, body: Option<Value>) -> Value {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let answer = request(
        driver,
        method,
        path,
        &[("content-type", "application/json".to_owned())],
        bytes,
    )
    .await;
    serde_json::from_str(&answer.body).unwrap_or(Value::Null)
}

/// The router behind a "proxy" that signs everyone connecting to it in as `who`.
async fn serve_as(router: axum::Router, who: &'static str) -> SocketAddr {
    let signed_in = router.layer(map_request(move |mut request: Request| async move {
        request
            .headers_mut()
            .insert("x-forwarded-user", HeaderValue::from_static(who));
        request
    }));
    serve(signed_in).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_approves_in_the_browser_and_an_outsider_gets_404() {
    let (engine, desk) = engine(false);
    let router = server(&engine, standard()).router();
    let lead = serve_as(router.clone(), LEAD).await;
    let outsider = serve_as(router, OUTSIDER).await;

    // A signed ticket webhook starts the run.
    let config = standard();
    let body = body("evt_884", "T-91", "Maybe locked out; payroll closes today");
    let answer = deliver(
        lead,
        &config.sign("evt_884", now_secs(&engine), &body),
        body,
    )
    .await;
    let run = run_id(&answer);
    wait_for_task(&engine, run, "approve_alert").await;

    let browser = Browser::start().await;
    browser.open(&format!("http://{lead}/inbox")).await;
    assert_eq!(browser.title().await, "Your tasks");
    assert_eq!(browser.text("#who").await, LEAD);
    let card = format!("#task-{run}-approve_alert");
    assert_eq!(
        browser.text(&format!("{card} .title")).await,
        "Approve alert for support_leads"
    );
    let deadline = browser.text(&format!("{card} .deadline")).await;
    assert!(deadline == "in 1 h" || deadline == "in 2 h", "{deadline}");
    // The prompt's markup is shown as text, not run.
    assert_eq!(
        browser.text(&format!("{card} .prompt")).await,
        "Send the urgent alert? <script>alert('prompt')</script>"
    );
    let comment = browser
        .find(&format!("{card} textarea[name=comment]"))
        .await;
    browser
        .call(
            Method::POST,
            &format!("/element/{comment}/value"),
            Some(json!({ "text": "Confirmed with the customer <b>now</b>" })),
        )
        .await;
    let inbox_png = browser.screenshot("inbox.png").await;
    let approve = browser.find(&format!("{card} button[value=approve]")).await;
    browser
        .call(
            Method::POST,
            &format!("/element/{approve}/click"),
            Some(json!({})),
        )
        .await;

    // The decision asks once, saying what it will record, before anything is journaled.
    browser
        .wait_until("the question", async |b: &Browser| {
            b.title().await.starts_with("Approve ")
        })
        .await;
    assert_eq!(
        browser.title().await,
        "Approve “Approve alert” of ".to_owned() + &run.to_string() + "?"
    );
    assert!(browser
        .text("#recorded")
        .await
        .contains("Confirmed with the customer <b>now</b>"));
    let question_png = browser.screenshot("question.png").await;
    assert!(!engine
        .events(run)
        .await
        .unwrap()
        .iter()
        .any(|e| matches!(e, workflow_core::journal::Event::TaskDecided { .. })));
    let yes = browser.find("#yes").await;
    browser
        .call(
            Method::POST,
            &format!("/element/{yes}/click"),
            Some(json!({})),
        )
        .await;

    // The answer is the run page, confirming the decision.
    browser
        .wait_until("the confirmation", async |b: &Browser| {
            b.execute(
                "const c = document.getElementById('confirmation'); return c ? c.innerText : '';",
            )
            .await
            .as_str()
            .is_some_and(|text| text.starts_with("Done: you decided “Approve alert”: approved"))
        })
        .await;
    let confirmation_png = browser.screenshot("confirmation.png").await;
    // It shows the run complete once the engine has sent the alert.
    wait_for_status(&engine, run, RunStatus::Completed).await;
    let page = format!("http://{lead}/inbox/runs/{run}");
    browser.open(&page).await;
    assert_eq!(browser.title().await, run.to_string());
    assert_eq!(browser.text("#status").await, "completed");
    let audit = browser.text("#audit").await;
    assert!(audit.contains(LEAD), "{audit}");
    assert!(
        audit.contains("approved (\"Confirmed with the customer <b>now</b>\")"),
        "{audit}"
    );
    browser.find("#diagram svg").await;
    let run_png = browser.screenshot("run.png").await;
    assert_eq!(desk.alerts.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The outsider sees no task, and the run page does not exist for them.
    browser.open(&format!("http://{outsider}/inbox")).await;
    assert_eq!(browser.text("#empty").await, "No open tasks for you.");
    browser
        .open(&format!("http://{outsider}/inbox/runs/{run}"))
        .await;
    assert_eq!(browser.title().await, "Not found");
    assert!(browser.text("#error").await.starts_with("404 unknown_run"));
    browser.screenshot("outsider.png").await;
    browser.quit().await;

    for png in [inbox_png, question_png, confirmation_png, run_png] {
        assert!(
            std::fs::metadata(&png).unwrap().len() > 1000,
            "{}",
            png.display()
        );
    }
}

impl Browser {
    async fn execute(&self, script: &str) -> Value {
        self.call(
            Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    async fn url(&self) -> String {
        self.call(Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits (bounded) until `probe` holds for what the browser shows.
    async fn wait_until(&self, what: &str, probe: impl AsyncFn(&Browser) -> bool) {
        for _ in 0..200 {
            if probe(self).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let shown = self
            .execute(
                "return document.title + ' | ' + (document.body ? document.body.innerText : '');",
            )
            .await;
        panic!("the browser did not get to {what} within 10 s; it shows: {shown}");
    }
}

/// A page on another loopback origin that tries to change state on `target` three ways:
/// a `fetch` with `no-cors` and a text/plain body, and two auto-posted forms (one to the
/// API as text/plain, one to the inbox's decision route).
fn attacker_page(target: SocketAddr, run: workflow_core::RunId) -> String {
    format!(
        r#"<!doctype html><html><head><title>attacker</title></head><body>
<form id="api" method="post" enctype="text/plain" action="http://{target}/api/runs/{run}/cancel">
  <input name='{{"x":"' value='"}}'></form>
<form id="inbox" method="post" action="http://{target}/inbox/runs/{run}/tasks/approve_alert">
  <input name="verdict" value="approve"><input name="csrf" value="guessed"></form>
<script>
fetch("http://{target}/api/runs/{run}/cancel", {{
  method: "POST", mode: "no-cors", credentials: "include",
  headers: {{ "content-type": "text/plain" }}, body: "{{}}"
}}).then(() => {{ document.title = "fetched"; }}, () => {{ document.title = "fetch failed"; }});
</script></body></html>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_origin_changes_nothing() {
    let (engine, _) = engine(false);
    let router = server(&engine, standard()).router();
    // The lead may cancel and decide: only the origin checks stand in the way.
    let lead = serve_as(router, LEAD).await;
    let run = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-13".into(),
                text: "locked out".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_task(&engine, run, "approve_alert").await;
    let page = attacker_page(lead, run);
    let framing = format!(
        r#"<!doctype html><html><head><title>framing</title></head><body>
<iframe src="http://{lead}/inbox/runs/{run}" style="opacity:.3" width="800" height="600"
  onload="document.title = 'framed'"></iframe></body></html>"#
    );
    let attacker = serve(
        axum::Router::new()
            .route(
                "/",
                axum::routing::get(move || {
                    let page = page.clone();
                    async move { axum::response::Html(page) }
                }),
            )
            .route(
                "/frame",
                axum::routing::get(move || {
                    let page = framing.clone();
                    async move { axum::response::Html(page) }
                }),
            ),
    )
    .await;

    let browser = Browser::start().await;
    browser.open(&format!("http://{attacker}/")).await;
    browser
        .wait_until("the fetch's end", async |b: &Browser| {
            b.title().await.starts_with("fetch")
        })
        .await;
    for (form, code) in [("api", "cross_site"), ("inbox", "cross_site")] {
        browser.open(&format!("http://{attacker}/")).await;
        browser
            .execute(&format!("document.getElementById('{form}').submit();"))
            .await;
        browser
            .wait_until("the target's answer", async |b: &Browser| {
                b.url().await.starts_with(&format!("http://{lead}/"))
            })
            .await;
        browser
            .wait_until("the answer's text", async |b: &Browser| {
                b.execute("return document.body ? document.body.innerText : '';")
                    .await
                    .as_str()
                    .is_some_and(|text| text.contains(code))
            })
            .await;
        browser.screenshot(&format!("cross-site-{form}.png")).await;
    }
    // Framed by the other origin (to trick a click), the run page does not render.
    browser.open(&format!("http://{attacker}/frame")).await;
    browser
        .wait_until("the frame's load", async |b: &Browser| {
            b.title().await == "framed"
        })
        .await;
    browser.screenshot("framed.png").await;
    browser
        .call(Method::POST, "/frame", Some(json!({ "id": 0 })))
        .await;
    let inside = browser
        .execute(
            "return [document.getElementById('status') ? 'rendered' : 'blocked', \
             location.href];",
        )
        .await;
    assert_eq!(
        inside[0], "blocked",
        "the run page rendered in a frame: {inside}"
    );
    browser.quit().await;

    assert_eq!(
        engine.inspect(run).await.unwrap().record.status,
        RunStatus::Running
    );
    let events = engine.events(run).await.unwrap();
    assert!(!events.iter().any(|e| matches!(
        e,
        workflow_core::journal::Event::TaskDecided { .. }
            | workflow_core::journal::Event::Cancelled { .. }
    )));
}

/// Installs Debian's `npm` when this runs as root on a machine with apt-get and has no
/// npm, as [`install_chromium`] does for the browser.
fn install_npm() {
    let found = std::process::Command::new("npm")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if found || !root || !std::path::Path::new("/usr/bin/apt-get").is_file() {
        return;
    }
    eprintln!("browser test: installing npm with apt-get");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("apt-get update -qq && apt-get install -y -qq npm")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status();
    if !status.as_ref().is_ok_and(|status| status.success()) {
        eprintln!("browser test: apt-get could not install npm ({status:?})");
    }
}

/// axe-core's script, installed from the npm registry into the target directory once
/// (with npm itself from Debian's packages when it is missing and this may install it).
fn axe_source() -> String {
    // The tests of this file run at once: one installs, the others wait for it.
    static AXE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    AXE.get_or_init(install_axe).clone()
}

fn install_axe() -> String {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("axe");
    let script = dir.join("node_modules/axe-core/axe.min.js");
    if !script.is_file() {
        install_npm();
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir)
            .arg("axe-core@4")
            .stdout(Stdio::null())
            .status();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "the accessibility check needs axe-core from the npm registry (npm install axe-core): {status:?}"
        );
    }
    std::fs::read_to_string(&script).unwrap()
}

impl Browser {
    /// The serious and critical accessibility violations axe-core finds on the page.
    async fn violations(&self, axe: &str) -> Vec<String> {
        self.execute(axe).await;
        let found = self
            .call(
                Method::POST,
                "/execute/async",
                Some(json!({
                    "script": "const done = arguments[arguments.length - 1];\
                        axe.run(document).then(r => done({passes: r.passes.length, found: r.violations\
                          .filter(v => v.impact === 'serious' || v.impact === 'critical')\
                          .map(v => v.id + ': ' + v.help + ' at ' +\
                               v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))}),\
                          e => done({passes: 0, found: ['axe failed: ' + e]}));",
                    "args": []
                })),
            )
            .await;
        // The check ran: it passed rules on the page.
        assert!(
            found["passes"].as_u64().is_some_and(|n| n > 0),
            "axe answered {found}"
        );
        found["found"]
            .as_array()
            .unwrap_or_else(|| panic!("axe answered {found}"))
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Presses Tab.
    async fn tab(&self) {
        let key = |kind: &str| json!({ "type": kind, "value": "\u{E004}" });
        self.call(
            Method::POST,
            "/actions",
            Some(json!({ "actions": [{
                "type": "key", "id": "keyboard",
                "actions": [key("keyDown"), key("keyUp")]
            }]})),
        )
        .await;
    }

    async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.call(
            Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_the_browser_lists_follows_and_retries_runs() {
    let (engine, desk) = engine(false);
    let router = server(&engine, standard()).router();
    let lead = serve_as(router, LEAD).await;
    let start = |id: &'static str| {
        let engine = engine.clone();
        async move {
            let run = engine
                .start::<Triage>(TriageInput {
                    ticket: Ticket {
                        ticket_id: id.into(),
                        text: "locked out".into(),
                    },
                })
                .await
                .unwrap()
                .id();
            wait_for_task(&engine, run, "approve_alert").await;
            run
        }
    };
    let approve = serde_json::to_value(workflow_core::Approval::approve(None)).unwrap();
    // Two runs failed at their alert (dead letters), one waits for its lead.
    desk.broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut broken = Vec::new();
    for id in ["T-1", "T-2"] {
        let run = start(id).await;
        engine
            .decide(run, "approve_alert", LEAD, approve.clone())
            .await
            .unwrap();
        wait_for_status(&engine, run, RunStatus::Failed).await;
        broken.push(run);
    }
    desk.broken
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let waiting = start("T-3").await;
    let axe = axe_source();

    let browser = Browser::start().await;
    let mut accessibility = Vec::new();

    // The runs page, with its counts; every page of the console passes the check.
    browser.open(&format!("http://{lead}/console/runs")).await;
    assert_eq!(browser.title().await, "Runs");
    let runs = browser.text("#runs").await;
    for run in broken.iter().chain([&waiting]) {
        assert!(runs.contains(&run.to_string()), "{runs}");
    }
    assert!(browser.text("#counts").await.contains("failed 2"));
    browser.screenshot("console-runs.png").await;
    accessibility.push(("runs", browser.violations(&axe).await));
    // The keyboard reaches the navigation, then the filter, in reading order.
    let mut focused = Vec::new();
    for _ in 0..8 {
        browser.tab().await;
        let text = browser
            .execute(
                "const e = document.activeElement; \
                 return e ? (e.innerText || e.name || e.tagName) : '';",
            )
            .await;
        focused.push(text.as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(
        &focused[..7],
        [
            "Inbox",
            "Runs",
            "Dead letters",
            "Schedules",
            "Flow control",
            "Workers",
            "workflow"
        ],
        "{focused:?}"
    );
    engine
        .schedules()
        .create(
            "nightly-report",
            "Nightly",
            workflow_core::schedule::Schedule::new("0 0 * * *"),
        )
        .await
        .unwrap();
    // Two workers as their heartbeats record them, one draining, for the workers page.
    for (owner, draining) in [
        (engine.owner().to_owned(), None),
        ("w2".to_owned(), Some(engine.now())),
    ] {
        let beat = workflow_core::store::Heartbeat {
            claimant: workflow_core::store::Claimant {
                owner: &owner,
                lease_ms: 30_000,
                now: engine.now(),
            },
            started: engine.now(),
            draining,
        };
        engine.store().heartbeat(beat).await.unwrap();
    }
    let ask = format!("runs/{}/retry", broken[0]);
    let backfill = "schedules/nightly-report/backfill?from=2026-01-01&to=2026-01-02";
    for page in [
        "dead-letters",
        "schedules",
        "flow",
        "workers",
        ask.as_str(),
        backfill,
    ] {
        browser.open(&format!("http://{lead}/console/{page}")).await;
        browser
            .screenshot(&format!(
                "console-{}.png",
                page.split('?').next().unwrap_or(page).replace('/', "-")
            ))
            .await;
        accessibility.push((page, browser.violations(&axe).await));
    }

    // The waiting run's page, then its live update when the lead decides elsewhere: the
    // page is not reloaded (a mark set on it stays), its live part is.
    // The inbox and its run page, a card's question, in the same shell and the same check.
    browser.open(&format!("http://{lead}/inbox")).await;
    browser
        .find(&format!("#task-{waiting}-approve_alert"))
        .await;
    accessibility.push(("inbox", browser.violations(&axe).await));
    browser
        .click(&format!(
            "#task-{waiting}-approve_alert button[value=reject]"
        ))
        .await;
    browser
        .wait_until("the question", async |b: &Browser| {
            b.title().await.starts_with("Reject ")
        })
        .await;
    accessibility.push(("inbox question", browser.violations(&axe).await));
    browser
        .open(&format!("http://{lead}/inbox/runs/{waiting}"))
        .await;
    accessibility.push(("inbox run", browser.violations(&axe).await));

    browser
        .open(&format!("http://{lead}/console/runs/{waiting}"))
        .await;
    browser.find("#diagram svg").await;
    assert!(browser
        .text("#row-approve_alert")
        .await
        .contains("waiting for a person"));
    browser.screenshot("console-run-waiting.png").await;
    accessibility.push(("run", browser.violations(&axe).await));
    browser.execute("window.stayed = 'yes';").await;
    engine
        .decide(waiting, "approve_alert", LEAD, approve.clone())
        .await
        .unwrap();
    wait_for_status(&engine, waiting, RunStatus::Completed).await;
    browser
        .wait_until("the live update", async |b: &Browser| {
            b.execute(
                "const s = document.getElementById('status'); \
                 return s ? s.innerText : '';",
            )
            .await
            .as_str()
            .is_some_and(|text| text.contains("completed"))
        })
        .await;
    assert_eq!(browser.execute("return window.stayed;").await, "yes");
    assert!(browser.text("#row-send_alert").await.contains("succeeded"));
    // The rest of the page followed too: a finished run offers no cancel.
    assert_eq!(
        browser
            .execute("return document.getElementById('cancel') === null;")
            .await,
        true
    );
    browser.screenshot("console-run-live.png").await;

    // A bulk retry of the failed runs: the preview names them, the confirmation does it.
    browser
        .open(&format!("http://{lead}/console/runs?status=failed"))
        .await;
    browser.click("#bulk form:nth-of-type(2) button").await;
    browser
        .wait_until("the preview", async |b: &Browser| {
            b.title().await == "Retry 2 failed runs?"
        })
        .await;
    let taken = browser.text("#taken").await;
    for run in &broken {
        assert!(taken.contains(&run.to_string()), "{taken}");
    }
    browser.screenshot("console-bulk-preview.png").await;
    accessibility.push(("bulk preview", browser.violations(&axe).await));
    for run in &broken {
        assert!(!engine
            .events(*run)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(e, workflow_core::journal::Event::Retried { .. })));
    }
    browser.click("#yes").await;
    browser
        .wait_until("the outcome", async |b: &Browser| {
            b.title().await == "Retried 2 runs"
        })
        .await;
    browser.screenshot("console-bulk-done.png").await;
    for run in &broken {
        wait_for_status(&engine, *run, RunStatus::Completed).await;
    }
    browser.quit().await;

    let failing: Vec<String> = accessibility
        .into_iter()
        .filter(|(_, found)| !found.is_empty())
        .map(|(page, found)| format!("{page}: {}", found.join("; ")))
        .collect();
    assert!(
        failing.is_empty(),
        "serious or critical accessibility violations:\n{}",
        failing.join("\n")
    );
}

/// Where the evidence test's browser step saves its artifacts.
static ARTIFACTS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// A one-pixel PNG, the "screenshot" the step leaves.
const PIXEL: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xd0, 0xce, 0xd9, 0x00,
    0x00, 0x02, 0x0d, 0x01, 0x48, 0x07, 0x9a, 0x3c, 0x74, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

mod shots {
    use super::*;
    use workflow_core::prelude::*;

    /// Fails as a browser step does, saving a screenshot and the page's HTML first.
    pub async fn shoot(_env: &Desk, ctx: &StepContext, ticket: Ticket) -> Result<(), StepError> {
        let dir = ARTIFACTS
            .get()
            .expect("set by the test")
            .join(ctx.run_id.to_string())
            .join(ctx.step)
            .join(format!("attempt-{}", ctx.attempt));
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("failure-1.png");
        let html = dir.join("failure-1.html");
        std::fs::write(&png, PIXEL).unwrap();
        std::fs::write(
            &html,
            format!(
                "<html><body><script>document.title='ran'</script>{}</body></html>",
                ticket.text
            ),
        )
        .unwrap();
        Err(StepError::permanent(format!(
            "click: no element `#pay` [evidence: {}, {}]",
            png.display(),
            html.display()
        )))
    }
}

workflow_core::workflow! {
    /// A browser step that fails, leaving its evidence.
    pub workflow Shot(ticket: Ticket) env Desk {
        step shoot -> () {
            action: shots::shoot(env, ctx, ticket),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_failed_browser_steps_evidence() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("browser").join("evidence");
    let _ = std::fs::remove_dir_all(&dir);
    ARTIFACTS.set(dir.clone()).unwrap();
    let (engine, desk) = engine(false);
    engine.register::<Shot>(desk.clone()).unwrap();
    let router = server(&engine, standard()).evidence_dir(&dir).router();
    let lead = serve_as(router, LEAD).await;
    let run = engine
        .start::<Shot>(ShotInput {
            ticket: Ticket {
                ticket_id: "T-7".into(),
                text: "checkout".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_status(&engine, run, RunStatus::Failed).await;
    let axe = axe_source();

    let browser = Browser::start().await;
    browser
        .open(&format!("http://{lead}/console/runs/{run}"))
        .await;
    assert!(browser.text("#row-shoot").await.contains("failed"));
    let evidence = browser.text("#detail-shoot .evidence").await;
    assert!(evidence.contains("failure-1.png"), "{evidence}");
    browser.screenshot("console-run-evidence.png").await;
    let violations = browser.violations(&axe).await;
    assert!(violations.is_empty(), "{violations:?}");
    // The screenshot opens as an image; the page's HTML as its text, not run.
    browser
        .click("#detail-shoot .evidence a[href$='.png']")
        .await;
    browser
        .wait_until("the screenshot", async |b: &Browser| {
            b.execute("return document.images.length ? document.images[0].naturalWidth : 0;")
                .await
                == 1
        })
        .await;
    browser
        .open(&format!("http://{lead}/console/runs/{run}"))
        .await;
    browser
        .click("#detail-shoot .evidence a[href$='.html']")
        .await;
    browser
        .wait_until("the page's source", async |b: &Browser| {
            b.execute("return document.body ? document.body.innerText : '';")
                .await
                .as_str()
                .is_some_and(|text| text.contains("<script>document.title='ran'</script>"))
        })
        .await;
    assert_ne!(browser.title().await, "ran");
    browser.quit().await;
    let _ = std::fs::remove_dir_all(&dir);
}
