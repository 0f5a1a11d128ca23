//! The server's side of [`Permissions`]: the [`Caller`] extracted once per request (with
//! the cross-site checks of state changes), and the policy applied to runs: load, then
//! check; a run the caller may not view answers as one that does not exist.

use std::collections::HashMap;

use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use workflow_core::journal::Event;
use workflow_core::machine::Machine;
use workflow_core::spec::{OnTimeout, Spec, StepKind};
use workflow_core::store::{RunRecord, StoredRun};
use workflow_core::{admin, DecisionError, RunError, RunId};

use crate::auth::check_identity;
use crate::error::ApiError;
use crate::permissions::{Action, Caller, Credential, Target, Verdict};
use crate::view::{Loaded, Opened};
use crate::App;

/// Who is asking, or why nobody is: 401 `unauthenticated`, 400 `duplicate_identity_header`,
/// `duplicate_authorization`, `identity_too_long` or `invalid_identity` (whichever
/// authenticator named the caller). A state change (any method but GET, HEAD, OPTIONS) signed in by
/// an ambient credential must come from the server's own origin (403 `cross_site`).
pub(crate) fn caller(parts: &Parts, app: &App) -> Result<Caller, ApiError> {
    let authenticator = app
        .authenticator
        .as_ref()
        .ok_or_else(ApiError::unauthenticated)?;
    let caller = authenticator
        .caller(parts)?
        .ok_or_else(ApiError::unauthenticated)?;
    check_identity(caller.identity().name())?;
    if changes_state(&parts.method) && caller.credential() == Credential::Ambient {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .or_else(|| parts.uri.authority().map(|a| a.as_str()))
            .unwrap_or("");
        same_origin(&parts.headers, host, &app.origins)?;
    }
    Ok(caller)
}

/// Whether a method may change state.
pub(crate) fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Refuses a request a browser marks as coming from another site or origin: a
/// `Sec-Fetch-Site` other than `same-origin` or `none`, or an `Origin` that is neither this
/// server's (`host`, from `Host` or the URI's authority) nor one of `allowed`. A request
/// with neither header (curl, a script) passes: it carries no browser's ambient identity
/// by accident.
pub(crate) fn same_origin(
    headers: &HeaderMap,
    host: &str,
    allowed: &[String],
) -> Result<(), ApiError> {
    let refuse = |why: String| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            format!("a state change from another site is refused: {why}"),
        )
    };
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("");
        if site != "same-origin" && site != "none" {
            return Err(refuse(format!("Sec-Fetch-Site is `{site}`")));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("").trim_end_matches('/');
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        let own = authority.is_some_and(|a| !host.is_empty() && a.eq_ignore_ascii_case(host));
        if !own && !allowed.iter().any(|a| a.eq_ignore_ascii_case(origin)) {
            return Err(refuse(format!("Origin `{origin}` is not this server's")));
        }
    }
    Ok(())
}

/// A state change over the API must be sent as JSON (a browser cannot send that cross-site
/// without asking first) unless a bearer token signs it: 415 `json_required`.
pub(crate) fn json_required(parts: &Parts, caller: &Caller) -> Result<(), ApiError> {
    if !changes_state(&parts.method) || caller.credential() == Credential::Bearer {
        return Ok(());
    }
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split(';').next().unwrap_or("").trim();
            essence.eq_ignore_ascii_case("application/json")
        });
    if json {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "json_required",
            "a state change is sent with `content-type: application/json` (or a bearer token)",
        ))
    }
}

/// The answer for a run that does not exist, and for one the caller may not view.
pub(crate) fn unknown_run(run: RunId) -> ApiError {
    RunError::UnknownRun(run).into()
}

/// A run the caller may view, loaded.
pub(crate) struct Seen {
    /// Its record and journal.
    pub(crate) stored: StoredRun,
    /// Its recorded spec, if the store has one.
    pub(crate) spec: Option<Spec>,
    /// Whether the engine's authorizer admits the caller for one of its human steps.
    pub(crate) approver: bool,
}

impl App {
    /// The policy's answer; 503 `policy_unavailable` when it has none.
    pub(crate) async fn allows(
        &self,
        caller: &Caller,
        action: Action,
        workflow: &str,
        approver: bool,
    ) -> Result<bool, ApiError> {
        let target = Target { workflow, approver };
        match self.permissions.check(caller, action, target).await {
            Ok(verdict) => Ok(verdict == Verdict::Allow),
            Err(error) => {
                tracing::warn!(%action, workflow, %error, "permission policy unavailable");
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "policy_unavailable",
                    error.to_string(),
                ))
            }
        }
    }

    /// The run's machine's word on `who` deciding (or delegating) `step` of `run` now, with
    /// the engine's authorizer: open, in time, admitted, not the initiator of a
    /// `self_approval: false` step, not a second approval. The pre-check of every decision
    /// and delegation, and what the inbox's cards show; the engine that drives the run
    /// asks the same machine again.
    pub(crate) fn machine_admits(
        &self,
        spec: &Spec,
        events: &[Event],
        run: RunId,
        step: &str,
        who: &str,
    ) -> Result<usize, DecisionError> {
        let authorize = |assignee: &str, by: &str| self.engine.authorizes(assignee, by);
        Machine::replay(spec, events).admit(run, step, who, self.engine.now(), Some(&authorize))
    }

    /// Whether `name` may act on a task assigned to `assignee` as far as the server can
    /// tell: the engine's authorizer admits them, or the task was handed to them by name
    /// (the run's machine, which knows whether it was delegated, has the last word).
    pub(crate) fn admitted(&self, assignee: &str, name: &str) -> bool {
        assignee == name || self.engine.authorizes(assignee, name)
    }

    /// Whether `caller` is entitled to the payloads of every run of `workflow` (not only as
    /// an approver of one): the policy allows [`Action::ViewPayloads`]. Failure messages,
    /// key values and searches by input go by it, whether or not the server displays
    /// inputs and outputs.
    pub(crate) async fn entitled(&self, caller: &Caller, workflow: &str) -> Result<bool, ApiError> {
        self.allows(caller, Action::ViewPayloads, workflow, false)
            .await
    }

    /// 403 `forbidden` unless the policy allows `action`.
    pub(crate) async fn require(
        &self,
        caller: &Caller,
        action: Action,
        workflow: &str,
        approver: bool,
    ) -> Result<(), ApiError> {
        if self.allows(caller, action, workflow, approver).await? {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("{} may not {action} runs of {workflow}", caller.identity()),
            ))
        }
    }

    /// Whether the engine's authorizer admits `caller` for an assignee or escalation target
    /// of one of `spec`'s human steps.
    pub(crate) fn approver(&self, caller: &Caller, spec: &Spec) -> bool {
        spec.steps.iter().any(|step| match &step.kind {
            StepKind::Human(human) => {
                let escalation = match &human.on_timeout {
                    OnTimeout::Escalate(to) => Some(to.as_str()),
                    _ => None,
                };
                std::iter::once(human.assignee.as_str())
                    .chain(escalation)
                    .any(|who| self.engine.authorizes(who, caller.identity().name()))
            }
            _ => false,
        })
    }

    /// Whether `caller` may view a run of `workflow` recorded with `spec`.
    pub(crate) async fn may_view(
        &self,
        caller: &Caller,
        workflow: &str,
        spec: Option<&Spec>,
    ) -> Result<bool, ApiError> {
        if self.allows(caller, Action::View, workflow, false).await? {
            return Ok(true);
        }
        let approver = spec.is_some_and(|spec| self.approver(caller, spec));
        Ok(approver && self.allows(caller, Action::View, workflow, true).await?)
    }

    /// `run`, if `caller` may view it; 404 `unknown_run` otherwise, as for a run that does
    /// not exist.
    pub(crate) async fn visible_run(&self, caller: &Caller, run: RunId) -> Result<Seen, ApiError> {
        let store = &**self.engine.store();
        let stored = store.load(run).await?.ok_or_else(|| unknown_run(run))?;
        let spec = admin::stored_spec(store, &stored.record.fingerprint).await?;
        // An approver of the workflow, or of an open task of this run (a task delegated
        // to someone the spec does not name).
        let approver = spec.as_ref().is_some_and(|spec| {
            self.approver(caller, spec)
                || admin::tasks_of(spec, &stored)
                    .iter()
                    .any(|task| self.admitted(&task.assignee, caller.identity().name()))
        });
        let workflow = &stored.record.workflow;
        let viewer = self
            .allows(caller, Action::View, workflow, approver)
            .await?;
        if !viewer {
            return Err(unknown_run(run));
        }
        Ok(Seen {
            stored,
            spec,
            approver,
        })
    }

    /// `run`, if `caller` may view it (404 otherwise) and do `action` on it (403
    /// `forbidden` otherwise).
    pub(crate) async fn permitted_run(
        &self,
        caller: &Caller,
        run: RunId,
        action: Action,
    ) -> Result<Seen, ApiError> {
        let seen = self.visible_run(caller, run).await?;
        self.require(caller, action, &seen.stored.record.workflow, seen.approver)
            .await?;
        Ok(seen)
    }

    /// The runs of `records` `caller` may view, each spec loaded once.
    pub(crate) async fn visible_records(
        &self,
        caller: &Caller,
        records: Vec<RunRecord>,
    ) -> Result<Vec<RunRecord>, ApiError> {
        let mut specs = SpecCache::default();
        let mut visible = Vec::with_capacity(records.len());
        for record in records {
            if self
                .allows(caller, Action::View, &record.workflow, false)
                .await?
            {
                visible.push(record);
                continue;
            }
            let spec = specs.get(self, &record.fingerprint).await?;
            if self.may_view(caller, &record.workflow, spec).await? {
                visible.push(record);
            }
        }
        Ok(visible)
    }
}

/// Specs by fingerprint, each read from the store once.
#[derive(Default)]
pub(crate) struct SpecCache {
    specs: HashMap<String, Option<Spec>>,
}

impl SpecCache {
    pub(crate) async fn get(
        &mut self,
        app: &App,
        fingerprint: &str,
    ) -> Result<Option<&Spec>, ApiError> {
        if !self.specs.contains_key(fingerprint) {
            let spec = admin::stored_spec(&**app.engine.store(), fingerprint).await?;
            self.specs.insert(fingerprint.to_owned(), spec);
        }
        Ok(self.specs.get(fingerprint).and_then(Option::as_ref))
    }
}

impl App {
    /// `run` explained for `caller`: 404 `unknown_run` unless it may view the run; its
    /// payloads shown if the server shows payloads and the policy allows
    /// [`Action::ViewPayloads`].
    pub(crate) async fn view_run(&self, caller: &Caller, run: RunId) -> Result<Loaded, ApiError> {
        let opened = Opened::open(&self.engine, run).await?;
        // An approver of the workflow, or of an open task of this run (delegated to
        // someone the spec does not name), as for every other route.
        let approver = opened.spec().is_some_and(|spec| {
            self.approver(caller, spec)
                || opened
                    .open_assignees()
                    .any(|assignee| self.admitted(assignee, caller.identity().name()))
        });
        let workflow = opened.record().workflow.clone();
        if !self
            .allows(caller, Action::View, &workflow, approver)
            .await?
        {
            return Err(unknown_run(run));
        }
        let entitled = self
            .allows(caller, Action::ViewPayloads, &workflow, approver)
            .await?;
        let show = self.show_payloads && entitled;
        let mut loaded = opened.load(&self.engine, show, entitled).await?;
        if !show {
            loaded.detail.redacted = Some(crate::view::redaction_reason(entitled));
        }
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn only_the_servers_own_origin_may_change_state() {
        let host = "app.example:8080";
        let allowed = vec!["https://ops.example".to_owned()];
        let pass = |pairs: &[(&'static str, &str)]| same_origin(&headers(pairs), host, &allowed);
        assert!(pass(&[]).is_ok());
        assert!(pass(&[("origin", "http://app.example:8080")]).is_ok());
        assert!(pass(&[("origin", "https://APP.example:8080/")]).is_ok());
        assert!(pass(&[("origin", "https://ops.example")]).is_ok());
        assert!(pass(&[("sec-fetch-site", "same-origin")]).is_ok());
        assert!(pass(&[("sec-fetch-site", "none")]).is_ok());
        for bad in [
            vec![("origin", "http://app.example:8081")],
            vec![("origin", "http://app.example")],
            vec![("origin", "null")],
            vec![("origin", "app.example:8080")],
            vec![("sec-fetch-site", "same-site")],
            vec![("sec-fetch-site", "cross-site")],
            vec![
                ("origin", "http://app.example:8080"),
                ("sec-fetch-site", "cross-site"),
            ],
        ] {
            let error = pass(&bad).unwrap_err();
            assert_eq!(
                (error.status, error.code),
                (StatusCode::FORBIDDEN, "cross_site"),
                "{bad:?}"
            );
        }
        assert!(same_origin(&headers(&[("origin", "http://x")]), "", &[]).is_err());
    }
}
