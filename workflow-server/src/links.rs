//! Signed single-use decision links, for approvals by email: a URL that lets whoever holds
//! it decide one task as one person, without signing in, until it expires.
//!
//! A link is `{base}/links/{token}`; the token carries the run, the human step, the
//! identity it decides as, the verdict (`approve`, `reject`, or `choose` for a page with
//! both) and an expiry, signed with HMAC-SHA256 under the server's link key
//! ([`DecisionLinks`]). Opening it (`GET`) only shows the task and a confirmation form, so
//! mail scanners that follow links decide nothing; the form's `POST` decides. The
//! decision is the engine's, journaled as made by the link's identity (its authorizer
//! admits that identity or refuses, as for any decision) and marked as made via a link
//! (`via: "link"` on the journal's event, shown as "via link" on the run page and by
//! `workflow runs show`).
//!
//! A link is refused (nothing journaled) when it does not parse (400 `link_malformed`),
//! its signature does not verify (403 `link_invalid`: tampered, or made under another key),
//! it expired (410 `link_expired`), its identity decided the task already (409
//! `link_used`), or the task is no longer open (409 `task_closed`). Single use is read
//! from the run's journal, which every process and restart shares: once the identity's
//! decision is journaled, the link is spent everywhere.

use std::fmt;

use axum::extract::rejection::FormRejection;
use axum::extract::{DefaultBodyLimit, Form, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use maud::html;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use workflow_core::journal::{Event, Timestamp};
use workflow_core::store::{Message, RunStatus};
use workflow_core::{admin, Approval, DecisionOptions, RunId, TaskInfo};

use crate::api::check_comment;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::html::{page, time, words};
use crate::inbox::MAX_FORM;
use crate::permissions::{Action, Caller, Credential};
use crate::present::{present, Presented};
use crate::{App, Shared};

/// The longest token accepted, in bytes.
const MAX_TOKEN: usize = 2048;

/// What a link decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkVerdict {
    /// Approves (an `Approval` step).
    Approve,
    /// Rejects (an `Approval` step).
    Reject,
    /// A page where the holder approves or rejects.
    Choose,
}

/// One decision link: which task, decided as whom, how, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionLink {
    /// The run.
    pub run: RunId,
    /// The human step's id.
    pub step: String,
    /// The identity the decision is made as (the engine's authorizer must admit it).
    pub by: String,
    /// What the link decides.
    pub verdict: LinkVerdict,
    /// When the link stops working (ms since the Unix epoch).
    pub expires_at: Timestamp,
}

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The token does not parse.
    #[error("the link is not a decision link (it was cut short or changed)")]
    Malformed,
    /// The signature does not verify: changed, or made under another key.
    #[error("the link's signature does not verify")]
    Invalid,
    /// Past its expiry.
    #[error("the link expired at {at}")]
    Expired {
        /// When it expired (RFC 3339).
        at: String,
    },
    /// Its identity decided the task already.
    #[error("the link was used: {by} decided task `{step}` of {run} already")]
    Used {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
        /// The identity.
        by: String,
    },
    /// The task is not open (decided by someone else, expired, or its run ended).
    #[error("task `{step}` of {run} is no longer open")]
    Closed {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
    },
}

impl LinkError {
    /// The stable code of the API's error.
    pub fn code(&self) -> &'static str {
        match self {
            LinkError::Malformed => "link_malformed",
            LinkError::Invalid => "link_invalid",
            LinkError::Expired { .. } => "link_expired",
            LinkError::Used { .. } => "link_used",
            LinkError::Closed { .. } => "task_closed",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            LinkError::Malformed => StatusCode::BAD_REQUEST,
            LinkError::Invalid => StatusCode::FORBIDDEN,
            LinkError::Expired { .. } => StatusCode::GONE,
            LinkError::Used { .. } | LinkError::Closed { .. } => StatusCode::CONFLICT,
        }
    }
}

impl From<LinkError> for ApiError {
    fn from(error: LinkError) -> Self {
        ApiError::new(error.status(), error.code(), error.to_string())
    }
}

/// Makes and verifies decision links under one 32-byte key. Give every replica (and
/// whatever sends the emails) the same key: a link verifies wherever the key is.
#[derive(Clone)]
pub struct DecisionLinks {
    key: [u8; 32],
}

impl fmt::Debug for DecisionLinks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DecisionLinks(..)")
    }
}

impl DecisionLinks {
    /// Links under `key`.
    pub fn new(key: [u8; 32]) -> Self {
        DecisionLinks { key }
    }

    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(b"workflow-server decision link\0");
        mac.update(payload);
        mac
    }

    /// The link's token: its fields as JSON, and their signature, base64url.
    pub fn token(&self, link: &DecisionLink) -> String {
        // A struct of strings and integers always serializes.
        let payload = serde_json::to_vec(link).unwrap_or_default();
        let signature = self.mac(&payload).finalize().into_bytes();
        format!(
            "{}.{}",
            BASE64URL.encode(&payload),
            BASE64URL.encode(signature)
        )
    }

    /// The link's URL under `base_url`, the address the server is reached at with its
    /// base path (`https://ops.example.com/workflow`).
    pub fn url(&self, base_url: &str, link: &DecisionLink) -> String {
        format!(
            "{}/links/{}",
            base_url.trim_end_matches('/'),
            self.token(link)
        )
    }

    /// The link a token carries, if it is signed under this key and not expired at `now`.
    pub fn verify(&self, token: &str, now: Timestamp) -> Result<DecisionLink, LinkError> {
        if token.len() > MAX_TOKEN {
            return Err(LinkError::Malformed);
        }
        let (payload, signature) = token.split_once('.').ok_or(LinkError::Malformed)?;
        let payload = BASE64URL
            .decode(payload)
            .map_err(|_| LinkError::Malformed)?;
        let signature = BASE64URL
            .decode(signature)
            .map_err(|_| LinkError::Malformed)?;
        self.mac(&payload)
            .verify_slice(&signature)
            .map_err(|_| LinkError::Invalid)?;
        let link: DecisionLink =
            serde_json::from_slice(&payload).map_err(|_| LinkError::Malformed)?;
        if now >= link.expires_at {
            return Err(LinkError::Expired {
                at: workflow_core::journal::rfc3339(link.expires_at),
            });
        }
        Ok(link)
    }
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new().route(
        "/links/{token}",
        get(show)
            .post(decide)
            .layer(DefaultBodyLimit::max(MAX_FORM)),
    )
}

/// The link's task, if the link may still decide it.
async fn open_task(app: &App, link: &DecisionLink) -> Result<TaskInfo, ApiError> {
    let store = &**app.engine.store();
    let closed = || LinkError::Closed {
        run: link.run,
        step: link.step.clone(),
    };
    let stored = store.load(link.run).await?.ok_or_else(closed)?;
    let spec = admin::stored_spec(store, &stored.record.fingerprint)
        .await?
        .ok_or_else(closed)?;
    let step = spec
        .steps
        .iter()
        .position(|s| s.id == link.step)
        .ok_or_else(closed)?;
    // A decision by the link's identity, or its approval towards a quorum, spends it.
    let used = stored.events.iter().any(|event| {
        matches!(event, Event::TaskDecided { step: s, by, .. }
            | Event::TaskApproved { step: s, by, .. } if *s == step && *by == link.by)
    });
    // A decision left in the run's inbox, not taken in yet, counts as a use too.
    let taken: std::collections::BTreeSet<u64> =
        stored.events.iter().filter_map(Event::inbox).collect();
    let pending = store
        .inbox(link.run, 0)
        .await?
        .into_iter()
        .filter(|item| !taken.contains(&item.id))
        .any(|item| {
            matches!(&item.message, Message::Decision { step, by, .. }
                if *step == link.step && *by == link.by)
        });
    if used || pending {
        return Err(LinkError::Used {
            run: link.run,
            step: link.step.clone(),
            by: link.by.clone(),
        }
        .into());
    }
    if stored.record.status != RunStatus::Running {
        return Err(closed().into());
    }
    admin::tasks_of(&spec, &stored)
        .into_iter()
        .find(|task| task.step == link.step)
        .ok_or_else(|| closed().into())
}

/// The link, verified, and its open task; an error page otherwise.
async fn checked(
    app: &App,
    token: &str,
) -> Result<(DecisionLinks, DecisionLink, TaskInfo), Response> {
    let fail = |error: ApiError| error_page(app, &error);
    let Some(links) = app.links.clone() else {
        return Err(fail(ApiError::not_found(
            "decision links are not enabled on this server",
        )));
    };
    let link = links
        .verify(token, app.engine.now())
        .map_err(|e| fail(e.into()))?;
    let task = open_task(app, &link).await.map_err(fail)?;
    Ok((links, link, task))
}

fn error_page(app: &App, error: &ApiError) -> Response {
    let body = html! {
        p class="error" id="error" { (error.status.as_u16()) " " (error.code) ": " (error.message) }
    };
    let html = page("This link cannot decide", None, &app.base, body);
    no_store((error.status, HtmlBody(html)).into_response())
}

fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

async fn show(State(app): State<Shared>, Path(token): Path<String>) -> Response {
    let (_, link, task) = match checked(&app, &token).await {
        Ok(found) => found,
        Err(page) => return page,
    };
    let now = app.engine.now();
    let presented = presented(&app, &link).await;
    let buttons: &[(&str, &str)] = match link.verdict {
        LinkVerdict::Approve => &[("approve", "Approve")],
        LinkVerdict::Reject => &[("reject", "Reject")],
        LinkVerdict::Choose => &[("approve", "Approve"), ("reject", "Reject")],
    };
    let body = html! {
        section class="task" id="task" {
            p class="meta" { (task.workflow) " · " (task.run) " · due " (time(now, task.deadline)) }
            @if let Some(prompt) = &task.prompt {
                p { (prompt) }
            }
            @if let Some(presented) = &presented {
                table id="shown" {
                    (presented.shown_rows())
                    (presented.quorum_row("approvals"))
                }
            }
            p { "Deciding as " b id="as" { (link.by) } ", without signing in. This link works once." }
            form method="post" action={ (app.base) "/links/" (token) } {
                label { "Comment " textarea name="comment" maxlength="4096" {} }
                @for (verdict, label) in buttons {
                    button name="verdict" value=(verdict) id=(verdict) { (label) }
                }
            }
        }
    };
    let title = presented
        .and_then(|presented| presented.title)
        .unwrap_or_else(|| words(&task.step));
    no_store(HtmlBody(page(&title, None, &app.base, body)).into_response())
}

/// The link's task as a card shows it first (title, `show` values, approvals so far), its
/// values shown if the server shows payloads and the policy lets the link's identity, an
/// approver of the task, see them.
async fn presented(app: &App, link: &DecisionLink) -> Option<Presented> {
    let store = &**app.engine.store();
    let stored = store.load(link.run).await.ok()??;
    let spec = admin::stored_spec(store, &stored.record.fingerprint)
        .await
        .ok()??;
    let caller = Caller::new(Identity(link.by.clone()), Credential::Ambient);
    let show = app.show_payloads
        && app
            .allows(&caller, Action::ViewPayloads, &stored.record.workflow, true)
            .await
            .unwrap_or(false);
    Some(present(&spec, &stored.events, &link.step, show))
}

#[derive(Debug, Deserialize)]
struct LinkForm {
    verdict: Option<String>,
    comment: Option<String>,
}

async fn decide(
    State(app): State<Shared>,
    Path(token): Path<String>,
    form: Result<Form<LinkForm>, FormRejection>,
) -> Response {
    let fail = |error: ApiError| error_page(&app, &error);
    let (_, link, task) = match checked(&app, &token).await {
        Ok(found) => found,
        Err(page) => return page,
    };
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return fail(ApiError::too_large(MAX_FORM))
        }
        Err(rejection) => return fail(ApiError::bad_request(rejection.body_text())),
    };
    let approved = match (link.verdict, form.verdict.as_deref()) {
        (LinkVerdict::Approve, None | Some("approve")) => true,
        (LinkVerdict::Reject, None | Some("reject")) => false,
        (LinkVerdict::Choose, Some("approve")) => true,
        (LinkVerdict::Choose, Some("reject")) => false,
        (_, other) => {
            return fail(ApiError::bad_request(format!(
                "this link cannot decide `{}`",
                other.unwrap_or("")
            )))
        }
    };
    if let Err(error) = check_comment(form.comment.as_deref()) {
        return fail(error);
    }
    let comment = form.comment.filter(|c| !c.trim().is_empty());
    let approval = if approved {
        Approval::approve(comment)
    } else {
        Approval::reject(comment)
    };
    let decision = match serde_json::to_value(approval) {
        Ok(decision) => decision,
        Err(e) => return fail(ApiError::bad_request(e.to_string())),
    };
    if !app.engine.authorizes(&task.assignee, &link.by) {
        return fail(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_admitted",
            format!(
                "{} may not decide task `{}` of {}, assigned to {}",
                link.by, link.step, link.run, task.assignee
            ),
        ));
    }
    // The run's machine journals that the decision came through a link.
    if let Err(error) = app
        .engine
        .decide_with(
            link.run,
            &link.step,
            &link.by,
            decision,
            DecisionOptions::via_link(),
        )
        .await
    {
        return fail(error.into());
    }
    tracing::info!(run = %link.run, step = %link.step, by = %link.by, approved, "decided via link");
    let body = html! {
        p class="confirm" id="decided" {
            (if approved { "Approved" } else { "Rejected" }) " task `" (link.step) "` of "
            (link.run) " as " (link.by) " via this link."
        }
    };
    no_store(HtmlBody(page("Decision recorded", None, &app.base, body)).into_response())
}
