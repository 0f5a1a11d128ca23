//! The internal tool the browser tests automate, served by axum on loopback: a login form
//! with `data-testid`s that redirects to a dashboard, an element that appears late, a
//! button whose call fails twice before it works, a CSV download, a 403 page and a page
//! that never answers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};

/// The report the dashboard exports.
pub const REPORT_CSV: &str = "region,revenue\nnorth,1200\nsouth,900\n";

/// The session cookie the login sets.
const SESSION: &str = "session=s3cr3t-session";

/// What the site saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// Every request.
    pub requests: AtomicUsize,
    /// Successful logins.
    pub logins: AtomicUsize,
    /// Calls of the flaky button.
    pub flaky: AtomicUsize,
}

/// The site, served until the test ends.
pub struct Site {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
}

impl Site {
    pub async fn serve() -> Site {
        let seen = Arc::new(Seen::default());
        let router = Router::new()
            .route("/login", get(login_page).post(login))
            .route("/dashboard", get(dashboard))
            .route("/flaky", post(flaky))
            .route("/report.csv", get(report))
            .route("/admin", get(admin))
            .route("/hang", get(hang))
            .layer(middleware::from_fn_with_state(seen.clone(), count))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        Site { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn logins(&self) -> usize {
        self.seen.logins.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> usize {
        self.seen.requests.load(Ordering::SeqCst)
    }
}

async fn count(State(seen): State<Arc<Seen>>, request: Request, next: Next) -> Response {
    seen.requests.fetch_add(1, Ordering::SeqCst);
    next.run(request).await
}

fn signed_in(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|cookies| cookies.split("; ").any(|cookie| cookie == SESSION))
}

async fn login_page() -> Html<&'static str> {
    Html(
        r#"<!doctype html><html><head><title>Sign in</title></head><body>
<form method="post" action="/login">
  <label>User <input name="user" data-testid="user"></label>
  <label>Password <input name="password" type="password" data-testid="password"></label>
  <button type="submit" class="btn btn-primary" data-testid="sign-in">Sign in</button>
</form></body></html>"#,
    )
}

#[derive(serde::Deserialize)]
struct Credentials {
    user: String,
    password: String,
}

async fn login(State(seen): State<Arc<Seen>>, Form(form): Form<Credentials>) -> Response {
    if form.user != "robot" || form.password != "hunter2" {
        return (StatusCode::UNAUTHORIZED, Html("<h1>Wrong password</h1>")).into_response();
    }
    seen.logins.fetch_add(1, Ordering::SeqCst);
    (
        [(header::SET_COOKIE, format!("{SESSION}; Path=/; HttpOnly"))],
        Redirect::to("/dashboard"),
    )
        .into_response()
}

async fn dashboard(headers: HeaderMap) -> Response {
    if !signed_in(&headers) {
        return Redirect::to("/login").into_response();
    }
    Html(
        r#"<!doctype html><html><head><title>Dashboard</title></head><body>
<h1 data-testid="greeting">Hello, robot</h1>
<div id="figures"></div>
<button data-testid="flaky" onclick="rebuild()">Rebuild</button>
<div id="outcome"></div>
<a data-testid="export" href="/report.csv">Export CSV</a>
<script>
setTimeout(() => {
  const p = document.createElement('p');
  p.dataset.testid = 'late';
  p.textContent = 'Figures ready';
  document.getElementById('figures').appendChild(p);
}, 600);
async function rebuild() {
  const answer = await fetch('/flaky', { method: 'POST' });
  const out = document.getElementById('outcome');
  out.innerHTML = answer.ok
    ? '<p data-testid="rebuilt">Rebuilt</p>'
    : '<p data-testid="rebuild-failed">Failed: ' + answer.status + '</p>';
}
</script></body></html>"#,
    )
    .into_response()
}

async fn flaky(State(seen): State<Arc<Seen>>, headers: HeaderMap) -> StatusCode {
    if !signed_in(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    if seen.flaky.fetch_add(1, Ordering::SeqCst) < 2 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

async fn report(headers: HeaderMap) -> Response {
    if !signed_in(&headers) {
        return Redirect::to("/login").into_response();
    }
    (
        [
            (header::CONTENT_TYPE, "text/csv"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"report.csv\"",
            ),
        ],
        REPORT_CSV,
    )
        .into_response()
}

async fn admin() -> Response {
    (
        StatusCode::FORBIDDEN,
        Html("<!doctype html><title>Forbidden</title><h1 data-testid=\"error\">Forbidden: admins only</h1>"),
    )
        .into_response()
}

/// Never answers.
async fn hang() -> Html<&'static str> {
    std::future::pending::<()>().await;
    Html("")
}
