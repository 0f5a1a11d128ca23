//! B18: a browser step of five actions against a local site, its overhead over the same
//! actions written directly against the WebDriver client (fantoccini), and the memory of
//! an open page.
//!
//! The five actions: open the login page, fill the user, fill the password, click
//! "sign in", read the greeting of the page it leads to (waiting for it). Three ways:
//!
//! - `direct`: fantoccini alone, on a chromedriver of its own: a session with the same
//!   Chromium flags, the actions (find, clear, type; find, click; poll for the greeting),
//!   the session closed.
//! - `page`: `Browser::page` (a fresh Chromium per page), the actions through `Page`, closed.
//! - `step`: the same as a one-step workflow run on the engine (in memory), from start to
//!   outputs.
//!
//! Each is measured whole (page opened and closed, which is what a step costs) and as the
//! actions alone on a page already open. Rounds alternate the ways; medians are reported.
//! Memory: `PAGES` pages open at once on the dashboard; the proportional set size (PSS)
//! and resident size (RSS) of their processes, per page.
//!
//! Run with `cargo bench -p benches --bench browser`. Environment: `B18_ROUNDS` (default
//! 15), `B18_PAGES` (4). Needs Debian's `chromium` and `chromium-driver`.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use workflow_browser::{processes_of, test_id, Browser, BrowserConfig, BrowserError};
use workflow_core::prelude::*;
use workflow_core::RunId;

const LOGIN: &str = r#"<!doctype html><title>Sign in</title>
<form method="post" action="/login"><input name="user" data-testid="user">
<input name="password" type="password" data-testid="password">
<button data-testid="sign-in">Sign in</button></form>"#;

const DASHBOARD: &str = r#"<!doctype html><title>Dashboard</title>
<h1 data-testid="greeting">Hello, robot</h1><p>Revenue this week: 49 625</p>"#;

async fn serve() -> SocketAddr {
    let router = Router::new()
        .route(
            "/login",
            get(|| async { Html(LOGIN) }).post(|| async {
                (
                    [(header::SET_COOKIE, "session=b18; Path=/")],
                    Redirect::to("/dashboard"),
                )
                    .into_response()
            }),
        )
        .route("/dashboard", get(|| async { Html(DASHBOARD) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// The five actions through a `Page`.
async fn five_actions(page: &workflow_browser::Page, site: &str) -> Result<String, BrowserError> {
    page.goto(&format!("{site}/login")).await?;
    page.fill(test_id("user"), "robot").await?;
    page.fill(test_id("password"), "hunter2").await?;
    page.click(test_id("sign-in")).await?;
    page.text(test_id("greeting")).await
}

/// The five actions written against fantoccini directly.
async fn five_direct(client: &Client, site: &str) -> Result<String, fantoccini::error::CmdError> {
    client.goto(&format!("{site}/login")).await?;
    let user = client.find(Locator::Css("[data-testid=\"user\"]")).await?;
    user.clear().await?;
    user.send_keys("robot").await?;
    let password = client
        .find(Locator::Css("[data-testid=\"password\"]"))
        .await?;
    password.clear().await?;
    password.send_keys("hunter2").await?;
    client
        .find(Locator::Css("[data-testid=\"sign-in\"]"))
        .await?
        .click()
        .await?;
    let greeting = client
        .wait()
        .at_most(Duration::from_secs(5))
        .every(Duration::from_millis(25))
        .for_element(Locator::Css("[data-testid=\"greeting\"]"))
        .await?;
    greeting.text().await
}

mod flow {
    use super::*;

    /// The step: a page, the five actions, closed.
    pub async fn sign_in(
        env: &Browser,
        ctx: &StepContext,
        site: String,
    ) -> Result<String, StepError> {
        let page = env.page(ctx).await?;
        let greeting = five_actions(&page, &site).await?;
        page.close().await?;
        Ok(greeting)
    }

    workflow! {
        /// One browser step of five actions.
        pub workflow SignIn(site: String) env Browser {
            step sign_in -> String { action: sign_in(env, ctx, site) }
        }
    }
}

/// A chromedriver of the direct client's own, with sessions like the `Browser`'s.
struct Direct {
    process: std::process::Child,
    port: u16,
    profiles: std::path::PathBuf,
    n: usize,
}

impl Direct {
    async fn start() -> Direct {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let profiles = std::env::temp_dir().join(format!("b18-direct-{}", std::process::id()));
        std::fs::create_dir_all(&profiles).unwrap();
        let process = std::process::Command::new(workflow_browser::find_chromedriver().unwrap())
            .arg(format!("--port={port}"))
            .env("XDG_CONFIG_HOME", profiles.join("config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..400 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Direct {
            process,
            port,
            profiles,
            n: 0,
        }
    }

    async fn session(&mut self) -> Client {
        self.n += 1;
        let profile = self.profiles.join(format!("p{}", self.n));
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": workflow_browser::find_chromium().unwrap().display().to_string(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--disable-crash-reporter",
                         "--disable-background-networking", "--disable-extensions",
                         "--no-first-run", "--no-default-browser-check",
                         "--window-size=1280,900",
                         format!("--user-data-dir={}", profile.display())],
            }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap()
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.profiles);
    }
}

fn ctx(run: u64) -> StepContext {
    StepContext {
        workflow: "B18",
        run_id: RunId(run),
        step: "sign_in",
        attempt: 1,
        idempotency_key: format!("B18/{run}/sign_in"),
        deadline: None,
        dry_run: false,
        trace_id: "b18".into(),
        fence: 1,
        cancel: Default::default(),
        valid_until: Default::default(),
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let rounds = env_usize("B18_ROUNDS", 15);
    let pages = env_usize("B18_PAGES", 4);
    let site = format!("http://{}", serve().await);
    let artifacts = std::env::temp_dir().join(format!("b18-artifacts-{}", std::process::id()));
    let browser = Browser::launch(BrowserConfig::new(&artifacts))
        .await
        .unwrap();
    let engine = Engine::builder().build();
    engine.register::<flow::SignIn>(browser.clone()).unwrap();
    let mut direct = Direct::start().await;

    // Warm-up: one of each.
    let client = direct.session().await;
    five_direct(&client, &site).await.unwrap();
    client.close().await.unwrap();
    let page = browser.page(&ctx(1_000_000)).await.unwrap();
    five_actions(&page, &site).await.unwrap();
    page.close().await.unwrap();

    // Whole: page opened, five actions, closed.
    let (mut whole_direct, mut whole_page, mut whole_step) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let started = Instant::now();
        let client = direct.session().await;
        assert_eq!(five_direct(&client, &site).await.unwrap(), "Hello, robot");
        client.close().await.unwrap();
        whole_direct.push(started.elapsed());

        let started = Instant::now();
        let page = browser.page(&ctx(round as u64)).await.unwrap();
        assert_eq!(five_actions(&page, &site).await.unwrap(), "Hello, robot");
        page.close().await.unwrap();
        whole_page.push(started.elapsed());

        let started = Instant::now();
        let run = engine
            .start::<flow::SignIn>(flow::SignInInput { site: site.clone() })
            .await
            .unwrap();
        assert_eq!(run.outputs().await.unwrap().sign_in, "Hello, robot");
        whole_step.push(started.elapsed());
    }

    // The actions alone, on a page (and a session) already open.
    let client = direct.session().await;
    let page = browser.page(&ctx(2_000_000)).await.unwrap();
    let (mut only_direct, mut only_page) = (vec![], vec![]);
    for _ in 0..rounds * 2 {
        let started = Instant::now();
        five_direct(&client, &site).await.unwrap();
        only_direct.push(started.elapsed());
        let started = Instant::now();
        five_actions(&page, &site).await.unwrap();
        only_page.push(started.elapsed());
    }
    client.close().await.unwrap();
    page.close().await.unwrap();

    // Memory: pages open at once on the dashboard.
    let mut open = Vec::new();
    for n in 0..pages {
        let page = browser.page(&ctx(3_000_000 + n as u64)).await.unwrap();
        five_actions(&page, &site).await.unwrap();
        open.push(page);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut pss, mut rss, mut procs) = (0u64, 0u64, 0usize);
    for page in &open {
        for process in processes_of(page.profile()) {
            pss += process.pss_kib.unwrap_or(0);
            rss += process.rss_kib;
            procs += 1;
        }
    }
    for page in open {
        page.close().await.unwrap();
    }

    let (wd, wp, ws) = (median(whole_direct), median(whole_page), median(whole_step));
    let (od, op) = (median(only_direct), median(only_page));
    println!("B18: a five-action browser step against a local site ({rounds} rounds, medians)");
    println!("  whole (open page, 5 actions, close):");
    println!("    direct fantoccini      {}", ms(wd));
    println!(
        "    Page                   {}  ({:.2}x direct)",
        ms(wp),
        wp.as_secs_f64() / wd.as_secs_f64()
    );
    println!(
        "    workflow step (engine) {}  ({:.2}x direct)",
        ms(ws),
        ws.as_secs_f64() / wd.as_secs_f64()
    );
    println!("  actions alone, page open ({} rounds):", rounds * 2);
    println!("    direct fantoccini      {}", ms(od));
    println!(
        "    Page                   {}  ({:.2}x direct)",
        ms(op),
        op.as_secs_f64() / od.as_secs_f64()
    );
    println!(
        "  memory per open page ({pages} pages, {} processes each):",
        procs / pages.max(1)
    );
    println!(
        "    PSS {:.1} MiB, RSS {:.1} MiB",
        pss as f64 / 1024.0 / pages as f64,
        rss as f64 / 1024.0 / pages as f64
    );
    drop(engine);
    drop(browser);
    let _ = std::fs::remove_dir_all(&artifacts);
}
