//! Browser steps for typed workflows: headless Chromium (Debian's `chromium`, driven
//! through its `chromedriver`) for the internal tools and dashboards that have no API.
//!
//! A [`Browser`] goes in the workflow's `env`; each step attempt takes a [`Page`] and
//! drives it with auto-waiting actions: [`Page::goto`], [`Page::fill`] and
//! [`Page::click`] by [`test_id`] (`data-testid`) or [`css`], [`Page::wait_for_url`],
//! [`Page::wait_for`], [`Page::text`], [`Page::assert_text`], [`Page::download`] (saved
//! under the artifacts directory, with its SHA-256) and [`Page::screenshot`].
//!
//! ```no_run
//! use workflow_browser::{test_id, Browser, BrowserError, Download};
//! use workflow_core::StepContext;
//!
//! /// Logs in (unless the run's cookies still hold a session) and downloads the report.
//! async fn fetch_report(browser: &Browser, ctx: &StepContext) -> Result<Download, BrowserError> {
//!     let page = browser.page(ctx).await?;
//!     page.goto("http://127.0.0.1:8080/reports").await?;
//!     if page.url().await?.contains("/login") {
//!         page.fill(test_id("user"), "robot").await?;
//!         page.fill(test_id("password"), "secret").await?;
//!         page.click(test_id("sign-in")).await?;
//!         page.wait_for_url("/reports").await?;
//!     }
//!     let report = page.download(test_id("export-csv")).await?;
//!     page.close().await?;
//!     Ok(report)
//! }
//! ```
//!
//! A failed action saves a screenshot and the page's HTML in the attempt's artifact
//! directory (`<artifacts>/run-<id>/<step>/attempt-<n>/failure-<k>.png|.html`) and
//! returns a [`BrowserError`] whose conversion into [`workflow_core::StepError`] is
//! classified ([`Failure::kind`]) and names those files, so they are journaled with the
//! failed attempt and shown by `workflow runs show`:
//!
//! | failure | kind | retried |
//! |---|---|---|
//! | element, URL, page load or download not ready in time | `timeout` | yes |
//! | 5xx page | `unavailable` | yes |
//! | browser or chromedriver crashed (relaunched by the next page) | `unavailable` | yes |
//! | 401 / 403 page | `unauthorized` | no |
//! | 404 / 410 page | `not_found` | no |
//! | other 4xx page, failed [`Page::assert_text`] | `validation` | no |
//!
//! No Chromium process outlives its page once the page is closed or dropped (a step that
//! timed out or was cancelled), nor chromedriver the [`Browser`].
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod browser;
mod cdp;
mod error;
mod page;
mod process;
mod selector;

pub use browser::{Browser, BrowserConfig};
pub use error::{BrowserError, Evidence, Failure};
pub use page::{Download, Page};
pub use process::{
    ensure_installed, find_chromedriver, find_chromium, processes, processes_in_group,
    processes_mentioning, processes_of, ProcessInfo,
};
pub use selector::{css, test_id, Selector};
