//! Seed 003's user-onboarding spec as a file (`specs/user-onboarding.completed.yaml`),
//! compiled by `workflow_file!` and run end to end on a SQLite file.
//!
//! The seed's file verbatim (`specs/user-onboarding.yaml`) does not compile: it lacks
//! the types, the arguments, the escalation group and the template's place, and the
//! compiler says so line by line. The completed file beside it adds exactly those. Its
//! actions are the functions of [`actions`], named as the seed names them.

use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use workflow::prelude::*;

pub use crate::onboarding::{Receipt, User, Workspace};
use crate::{wait_for_task, Log};

workflow_file!(
    "specs/user-onboarding.completed.yaml",
    actions: crate::onboarding_file::actions,
    env: Services
);

/// The services the actions call: here a journal of what they did.
#[derive(Debug)]
pub struct Services {
    calls: Arc<Mutex<Vec<String>>>,
    log: Log,
}

impl Services {
    fn call(&self, call: String) {
        self.log.line(format!("      {call}"));
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }
}

/// The functions the file's `action:` names.
pub mod actions {
    use super::*;

    /// `create_user_record`: the account, from the three inputs.
    pub async fn create_user_record(
        env: &Services,
        email: String,
        name: String,
        plan: String,
    ) -> Result<User, StepError> {
        let id = email.len() as u64 * 1000 + name.len() as u64;
        env.call(format!(
            "[accounts] created user {id} for {email} ({name}, plan {plan})"
        ));
        Ok(User { id, email })
    }

    /// `send_email`: the template named by the file's `with:`.
    pub async fn send_email(
        env: &Services,
        ctx: &StepContext,
        user: User,
        template: &str,
    ) -> Result<Receipt, StepError> {
        env.call(format!(
            "[mail] `{template}` email to {} (idempotency key {})",
            user.email, ctx.idempotency_key
        ));
        Ok(Receipt {
            message_id: format!("{template}-{}", user.id),
        })
    }

    /// `create_workspace`: fails with a transient 503 on its first attempt.
    pub async fn create_workspace(
        env: &Services,
        ctx: &StepContext,
        user: User,
    ) -> Result<Workspace, StepError> {
        if ctx.attempt == 1 {
            env.call("[workspaces] 503 Service Unavailable (simulated)".to_owned());
            return Err(StepError::unavailable(
                "workspace service returned 503 (simulated)",
            ));
        }
        env.call(format!(
            "[workspaces] created ws-{} on attempt {}",
            user.id, ctx.attempt
        ));
        Ok(Workspace {
            id: format!("ws-{}", user.id),
        })
    }

    /// `set_account_active`.
    pub async fn set_account_active(env: &Services, user: User) -> Result<(), StepError> {
        env.call(format!("[accounts] user {} is active", user.id));
        Ok(())
    }
}

/// What a run of the file's workflow did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The run's final status.
    pub status: workflow::store::RunStatus,
    /// The account created.
    pub user: User,
    /// The welcome email's receipt, if it was sent.
    pub welcome: Option<Receipt>,
    /// The workspace provisioned.
    pub workspace: Workspace,
    /// Whether the review approved.
    pub approved: bool,
    /// Whether the account was activated.
    pub activated: bool,
    /// How many attempts `provision_workspace` made.
    pub provision_attempts: u32,
    /// What the actions did, in order.
    pub calls: Vec<String>,
}

/// Runs one onboarding on the SQLite file `db`: a simulated reviewer approves the human
/// review as soon as it opens.
pub async fn run(db: impl Into<PathBuf>, log: &Log) -> Result<Summary, Box<dyn Error>> {
    let db = db.into();
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let engine = Engine::builder().store(SqliteStore::open(&db)?).build();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let services = Services {
        calls: calls.clone(),
        log: log.clone(),
    };
    engine.register::<UserOnboarding>(services)?;
    let input = UserOnboardingInput {
        email: "ada@example.com".into(),
        name: "Ada Lovelace".into(),
        plan: "team".into(),
    };
    let run = engine.start::<UserOnboarding>(input).await?;
    log.line(format!("Started {} from the spec file.", run.id()));
    let task = wait_for_task(&engine, run.id(), "human_review", Duration::from_secs(60)).await?;
    let reviewer = "ana@trust_and_safety_team";
    log.line(format!(
        "[simulated reviewer] {reviewer} approves (task assigned to {})",
        task.assignee
    ));
    run.human_review()
        .approve(reviewer, Some("identity checked"))
        .await?;
    let outputs = run.outputs().await?;
    let view = run.inspect().await?;
    let provision_attempts = view
        .steps
        .iter()
        .find(|step| step.id == "provision_workspace")
        .map_or(0, |step| step.attempts);
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Summary {
        status: view.record.status,
        user: outputs.create_account,
        welcome: outputs.send_welcome_email,
        workspace: outputs.provision_workspace,
        approved: outputs.human_review.approved,
        activated: outputs.activate_account.is_some(),
        provision_attempts,
        calls,
    })
}
