//! Who may do what: one [`Caller`] per request (who it is, its groups, how it proved it),
//! a typed [`Action`], and one policy, [`Permissions`], answering allow, deny or "cannot
//! answer" for every API route and inbox page. The default policy is [`Roles`]: per
//! workflow, a `viewer` sees runs and timelines, an `operator` also starts, cancels,
//! retries and sends events, and `payloads` (separate) shows inputs and outputs; anyone
//! else is denied. Whether a person may *decide* a task stays the engine's authorizer's.
//!
//! How the server applies the answer: a run the caller may not view answers exactly as a
//! run that does not exist (404 `unknown_run`); an action refused on a run the caller may
//! view is a 403 `forbidden`; a policy that cannot answer (its directory is down) is a 503
//! `policy_unavailable`, never a deny and never an allow. Lists hold only what the caller
//! may view.

use std::fmt;

use crate::auth::Identity;

/// How a request proved who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token: sent on purpose by a client; a browser never attaches one to a
    /// cross-site request by itself.
    Bearer,
    /// Something a browser attaches by itself (a reverse proxy's trusted header from its
    /// session cookie, a cookie): state changes are checked for cross-site origins.
    Ambient,
}

/// Who is asking, extracted once per request by the server's
/// [`Authenticator`](crate::Authenticator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    identity: Identity,
    groups: Vec<String>,
    credential: Credential,
}

impl Caller {
    /// A caller with no groups.
    pub fn new(identity: Identity, credential: Credential) -> Self {
        Caller {
            identity,
            groups: Vec::new(),
            credential,
        }
    }

    /// The same caller, member of `groups` too.
    pub fn with_groups(mut self, groups: impl IntoIterator<Item = String>) -> Self {
        self.groups.extend(groups);
        self
    }

    /// Its identity, as the engine's authorizer and the audit trail name it.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The groups it belongs to (from the authenticator: a groups header, the tokens file).
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// How it proved who it is.
    pub fn credential(&self) -> Credential {
        self.credential
    }
}

/// What a caller asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Start a run (`POST /api/runs`).
    Start,
    /// See a run: its status, steps, timeline, audit trail, diagram, tasks; and find it in
    /// lists.
    View,
    /// See a run's payloads: its inputs, outputs and event payloads (only when the server
    /// shows payloads at all, [`Server::show_payloads`](crate::Server::show_payloads)).
    ViewPayloads,
    /// Cancel a run.
    Cancel,
    /// Retry a failed run (a dead letter).
    Retry,
    /// Send an event to a run's waiting step.
    SendEvent,
    /// Decide one of a run's tasks. Whether this person may decide *this* task is then the
    /// engine's authorizer's call.
    Decide,
    /// Read `/metrics`: figures over every workflow, so it is asked for the workflow `*`
    /// (a role granted on every workflow).
    ViewMetrics,
    /// Change a workflow's schedules: create, pause, resume, trigger, backfill, delete
    /// (seeing them is [`Action::View`]).
    Schedule,
}

impl Action {
    /// Every action, in a stable order.
    pub const ALL: [Action; 9] = [
        Action::Start,
        Action::View,
        Action::ViewPayloads,
        Action::Cancel,
        Action::Retry,
        Action::SendEvent,
        Action::Decide,
        Action::ViewMetrics,
        Action::Schedule,
    ];

    /// Its name in messages (`start`, `view_payloads`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::View => "view",
            Action::ViewPayloads => "view_payloads",
            Action::Cancel => "cancel",
            Action::Retry => "retry",
            Action::SendEvent => "send_event",
            Action::Decide => "decide",
            Action::ViewMetrics => "view_metrics",
            Action::Schedule => "schedule",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an action is about: a workflow, and for a run, whether the engine's authorizer
/// admits the caller for one of its human steps (an approver needs to see what they
/// decide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// The workflow's name, as journaled.
    pub workflow: &'a str,
    /// Whether the engine's authorizer admits the caller for an assignee or escalation
    /// target of one of the run's human steps (always `false` for [`Action::Start`]).
    pub approver: bool,
}

/// A policy's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
}

/// A policy could not answer (its directory is unreachable, ...): the server answers 503
/// `policy_unavailable` and does nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the permission policy cannot answer: {0}")]
pub struct PolicyError(pub String);

/// A boxed future, as [`Permissions::check`] returns it.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The one permission policy of a server: may `caller` do `action` on `target`? Asynchronous,
/// so a policy may ask a directory; it is asked once per run a list holds, so a remote
/// one should cache.
///
/// A plain function `Fn(&Caller, Action, &Target<'_>) -> Result<Verdict, PolicyError>` is a
/// policy too.
pub trait Permissions: Send + Sync + 'static {
    /// Allow or deny; an `Err` when the policy cannot tell.
    fn check<'a>(
        &'a self,
        caller: &'a Caller,
        action: Action,
        target: Target<'a>,
    ) -> BoxFuture<'a, Result<Verdict, PolicyError>>;
}

impl<F> Permissions for F
where
    F: Fn(&Caller, Action, &Target<'_>) -> Result<Verdict, PolicyError> + Send + Sync + 'static,
{
    fn check<'a>(
        &'a self,
        caller: &'a Caller,
        action: Action,
        target: Target<'a>,
    ) -> BoxFuture<'a, Result<Verdict, PolicyError>> {
        Box::pin(std::future::ready(self(caller, action, &target)))
    }
}

/// A role, granted per workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sees runs: status, steps, timeline, audit trail, diagram, tasks.
    Viewer,
    /// A viewer who also starts, cancels and retries runs, sends events and changes
    /// schedules.
    Operator,
    /// Sees payloads (inputs, outputs, event payloads) of the runs it may view.
    Payloads,
}

impl Role {
    /// Parses `viewer`, `operator` or `payloads`.
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "payloads" => Some(Role::Payloads),
            _ => None,
        }
    }

    fn allows(self, action: Action) -> bool {
        match self {
            Role::Viewer => matches!(action, Action::View | Action::Decide | Action::ViewMetrics),
            Role::Operator => !matches!(action, Action::ViewPayloads),
            Role::Payloads => matches!(action, Action::ViewPayloads),
        }
    }
}

/// Who a grant is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// One identity, as the authenticator names it.
    Identity(String),
    /// Every member of a group (the caller's [`Caller::groups`]).
    Group(String),
}

impl Principal {
    /// `group:NAME` is a group, anything else an identity.
    pub fn parse(text: &str) -> Principal {
        match text.strip_prefix("group:") {
            Some(group) => Principal::Group(group.to_owned()),
            None => Principal::Identity(text.to_owned()),
        }
    }

    fn matches(&self, caller: &Caller) -> bool {
        match self {
            Principal::Identity(name) => caller.identity.name() == name,
            Principal::Group(group) => caller.groups.iter().any(|g| g == group),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    principal: Principal,
    role: Role,
    /// `None`: every workflow.
    workflow: Option<String>,
}

/// A role grant that does not parse: `ROLE:WORKFLOW` with a known role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a role grant: write `viewer:WORKFLOW`, `operator:WORKFLOW` or `payloads:WORKFLOW` (`*` for every workflow)")]
pub struct GrantError(pub String);

/// A line of a roles text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct RolesError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// The default policy: roles per workflow, deny by default.
///
/// - `viewer` may view a run (and ask to decide its tasks);
/// - `operator` may also start, cancel, retry and send events;
/// - `payloads` may see the payloads of the runs it may view.
///
/// Someone the engine's authorizer admits for one of a run's human steps (an approver)
/// may view that run, its payloads (they are what is being decided) and ask to decide; the
/// engine's authorizer then rules on the task itself. Nobody else may do anything.
///
/// ```
/// use workflow_server::{Principal, Role, Roles};
///
/// let roles = Roles::new()
///     .grant(Principal::Identity("ana@ops".into()), Role::Operator, "Triage")
///     .grant(Principal::Group("auditors".into()), Role::Viewer, "*");
/// # let _ = roles;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles {
    grants: Vec<Grant>,
}

impl Roles {
    /// No grants: only approvers see their runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants `role` on `workflow` (`*`: every workflow) to `principal`.
    pub fn grant(mut self, principal: Principal, role: Role, workflow: &str) -> Self {
        self.grants.push(Grant {
            principal,
            role,
            workflow: (workflow != "*").then(|| workflow.to_owned()),
        });
        self
    }

    /// Grants `ROLE:WORKFLOW` (`operator:Triage`, `viewer:*`) to `principal`.
    pub fn grant_text(self, principal: Principal, grant: &str) -> Result<Self, GrantError> {
        let (role, workflow) = grant
            .split_once(':')
            .and_then(|(role, workflow)| Some((Role::parse(role)?, workflow)))
            .filter(|(_, workflow)| !workflow.is_empty())
            .ok_or_else(|| GrantError(grant.to_owned()))?;
        Ok(self.grant(principal, role, workflow))
    }

    /// Roles from text, one `PRINCIPAL ROLE:WORKFLOW...` a line (`ana@ops operator:Triage
    /// payloads:Triage`, `group:auditors viewer:*`); blank lines and `#` comments are
    /// skipped. Refuses the first line that does not parse.
    pub fn parse(text: &str) -> Result<Self, RolesError> {
        let mut roles = Roles::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let principal = words.next().map(Principal::parse);
            let Some(principal) = principal else { continue };
            let mut any = false;
            for word in words {
                roles = roles
                    .grant_text(principal.clone(), word)
                    .map_err(|error| RolesError {
                        line: number + 1,
                        message: error.to_string(),
                    })?;
                any = true;
            }
            if !any {
                return Err(RolesError {
                    line: number + 1,
                    message: "a principal without roles".to_owned(),
                });
            }
        }
        Ok(roles)
    }

    /// Adds every grant of `other`.
    pub fn merge(mut self, other: Roles) -> Self {
        self.grants.extend(other.grants);
        self
    }

    fn has(&self, caller: &Caller, action: Action, workflow: &str) -> bool {
        self.grants.iter().any(|grant| {
            grant.workflow.as_deref().is_none_or(|w| w == workflow)
                && grant.principal.matches(caller)
                && grant.role.allows(action)
        })
    }
}

impl Permissions for Roles {
    fn check<'a>(
        &'a self,
        caller: &'a Caller,
        action: Action,
        target: Target<'a>,
    ) -> BoxFuture<'a, Result<Verdict, PolicyError>> {
        Box::pin(std::future::ready(
            Ok(self.verdict(caller, action, &target)),
        ))
    }
}

impl Roles {
    /// The verdict of these roles (they always answer).
    pub fn verdict(&self, caller: &Caller, action: Action, target: &Target<'_>) -> Verdict {
        let approver = target.approver
            && matches!(action, Action::View | Action::ViewPayloads | Action::Decide);
        let allowed = approver || self.has(caller, action, target.workflow);
        if allowed {
            Verdict::Allow
        } else {
            Verdict::Deny
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str, groups: &[&str]) -> Caller {
        Caller::new(Identity(name.into()), Credential::Ambient)
            .with_groups(groups.iter().map(|g| (*g).to_owned()))
    }

    fn allowed(
        roles: &Roles,
        caller: &Caller,
        action: Action,
        workflow: &str,
        approver: bool,
    ) -> bool {
        roles.verdict(caller, action, &Target { workflow, approver }) == Verdict::Allow
    }

    #[test]
    fn roles_grant_per_workflow_and_deny_by_default() {
        let roles = Roles::parse(
            "# who\nana@ops operator:Triage\nvic viewer:Triage payloads:Triage\ngroup:audit viewer:*\n",
        )
        .unwrap();
        let ana = caller("ana@ops", &[]);
        let vic = caller("vic", &[]);
        let aud = caller("someone", &["audit"]);
        let nobody = caller("mallory", &["elsewhere"]);
        for action in [
            Action::Start,
            Action::View,
            Action::Cancel,
            Action::Retry,
            Action::SendEvent,
        ] {
            assert!(allowed(&roles, &ana, action, "Triage", false), "{action}");
            assert!(
                !allowed(&roles, &ana, action, "Shipment", false),
                "{action}"
            );
            assert!(
                !allowed(&roles, &nobody, action, "Triage", false),
                "{action}"
            );
        }
        assert!(!allowed(
            &roles,
            &ana,
            Action::ViewPayloads,
            "Triage",
            false
        ));
        assert!(allowed(&roles, &vic, Action::View, "Triage", false));
        assert!(allowed(&roles, &vic, Action::ViewPayloads, "Triage", false));
        assert!(!allowed(&roles, &vic, Action::Cancel, "Triage", false));
        assert!(allowed(&roles, &aud, Action::View, "Shipment", false));
        assert!(!allowed(&roles, &aud, Action::Start, "Shipment", false));
        // An approver sees the run and its payloads, and nothing more.
        assert!(allowed(&roles, &nobody, Action::View, "Triage", true));
        assert!(allowed(
            &roles,
            &nobody,
            Action::ViewPayloads,
            "Triage",
            true
        ));
        assert!(allowed(&roles, &nobody, Action::Decide, "Triage", true));
        assert!(!allowed(&roles, &nobody, Action::Cancel, "Triage", true));
        assert!(!allowed(&roles, &nobody, Action::Start, "Triage", true));
    }

    #[test]
    fn role_files_refuse_what_they_do_not_know() {
        assert_eq!(Roles::parse("ana admin:Triage").unwrap_err().line, 1);
        assert_eq!(Roles::parse("\nana operator").unwrap_err().line, 2);
        assert_eq!(Roles::parse("ana operator:").unwrap_err().line, 1);
        assert_eq!(Roles::parse("ana").unwrap_err().line, 1);
        assert_eq!(
            Principal::parse("group:finance"),
            Principal::Group("finance".into())
        );
    }
}
