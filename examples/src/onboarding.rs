//! DESIGN.md's user-onboarding spec, exactly as written there, run end to end on a SQLite
//! file.
//!
//! `provision_workspace` fails with a transient 503 on its first attempt and succeeds on
//! the retry; the human review is approved by a clearly labelled simulated reviewer
//! through the same API a person's tool would use. Everything is journaled in the store,
//! so running [`run`] again on the same file resumes an interrupted run (through
//! [`Engine::resume_all`]) or, when the run is done, just reports it: the start carries
//! the signup email as its idempotency key, so a rerun never starts a second onboarding.

use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow::prelude::*;
use workflow::store::{RunFilter, RunStatus};

use crate::{wait_for_task, Log, Progress};

/// What a person signed up with: the workflow's journaled input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Signup {
    /// Their email; also the start's idempotency key.
    pub email: String,
    /// Their name.
    pub name: String,
    /// The plan they chose.
    pub plan: String,
}

/// The account `create_account` creates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// The account id.
    pub id: u64,
    /// The email.
    pub email: String,
}

/// The mail service's receipt for the welcome email.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The message id.
    pub message_id: String,
}

/// The workspace `provision_workspace` creates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    /// The workspace id.
    pub id: String,
}

/// The environment of the workflow: stand-ins for the account, mail and workspace services.
/// Not journaled; every process builds its own.
#[derive(Debug)]
pub struct Services {
    /// How long each simulated call takes.
    latency: Duration,
    /// The service calls this process made, in order.
    calls: Arc<Mutex<Vec<String>>>,
    log: Log,
}

impl Services {
    fn new(log: &Log, latency: Duration) -> Self {
        Services {
            latency,
            calls: Arc::default(),
            log: log.clone(),
        }
    }

    async fn call(&self, call: String) {
        tokio::time::sleep(self.latency).await;
        self.log.line(format!("      {call}"));
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }
}

/// The account service.
pub mod accounts {
    use super::*;

    /// Creates the user record; the id is derived from the email, so a re-run after a crash
    /// finds the same account instead of creating a second one.
    pub async fn create_user_record(env: &Services, signup: Signup) -> Result<User, StepError> {
        // FNV-1a: stable across processes and Rust versions.
        let hash = signup
            .email
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        let id = hash % 100_000;
        env.call(format!(
            "[accounts] created user {id} for {} ({}, plan {})",
            signup.email, signup.name, signup.plan
        ))
        .await;
        Ok(User {
            id,
            email: signup.email,
        })
    }

    /// Activates the account.
    pub async fn set_active(env: &Services, user: User) -> Result<(), StepError> {
        env.call(format!("[accounts] user {} is active", user.id))
            .await;
        Ok(())
    }
}

/// The mail service.
pub mod mail {
    use super::*;

    /// Sends the welcome email, keyed by the step's idempotency key (the mail service
    /// drops a second send with the same key).
    pub async fn send_welcome(
        env: &Services,
        ctx: &StepContext,
        user: User,
    ) -> Result<Receipt, StepError> {
        env.call(format!(
            "[mail] welcome email to {} (idempotency key {})",
            user.email, ctx.idempotency_key
        ))
        .await;
        Ok(Receipt {
            message_id: format!("msg-{}", user.id),
        })
    }
}

/// The workspace service.
pub mod workspaces {
    use super::*;

    /// Creates the user's workspace. The first attempt of every run meets a (simulated)
    /// 503 from the workspace service: a transient error, so the engine retries it.
    pub async fn create(
        env: &Services,
        ctx: &StepContext,
        user: User,
    ) -> Result<Workspace, StepError> {
        if ctx.attempt == 1 {
            env.call("[workspaces] 503 Service Unavailable (simulated)".to_owned())
                .await;
            return Err(StepError::unavailable(
                "workspace service returned 503 (simulated)",
            ));
        }
        let id = format!("ws-{}", user.id);
        env.call(format!(
            "[workspaces] created {id} on attempt {}",
            ctx.attempt
        ))
        .await;
        Ok(Workspace { id })
    }
}

workflow! {
    /// Onboard a new user from signup to first value.
    pub workflow UserOnboarding(signup: Signup) env Services {
        step create_account -> User {
            action: accounts::create_user_record(env, signup),
            on_failure: abort,
        }
        step send_welcome_email -> Receipt {
            action: mail::send_welcome(env, ctx, create_account),
            effect: external,
            on_failure: continue,
        }
        step provision_workspace -> Workspace {
            action: workspaces::create(env, ctx, create_account),
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 60s, jitter: full },
            timeout: 2m,
        }
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            depends_on: [provision_workspace],
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
        step activate_account -> () {
            action: accounts::set_active(env, create_account),
            depends_on: [human_review],
            condition: human_review.approved,
        }
    }
}

/// Who decides the human review in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reviewer {
    /// A simulated reviewer approves, after `delay`, through `run.human_review().approve`.
    Simulated {
        /// How long the reviewer "reads" before deciding.
        delay: Duration,
    },
    /// Nobody: [`run`] returns as soon as the review task is open, as if the process were
    /// interrupted there. A later [`run`] on the same store resumes the run.
    StopAtReview,
}

/// How to run the example.
#[derive(Debug, Clone)]
pub struct Config {
    /// The SQLite file.
    pub db: PathBuf,
    /// Who signs up.
    pub signup: Signup,
    /// Who decides the review.
    pub reviewer: Reviewer,
    /// How long each simulated service call takes.
    pub latency: Duration,
}

impl Config {
    /// The example's defaults over `db`: Ada signs up, a simulated reviewer approves.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        Config {
            db: db.into(),
            signup: Signup {
                email: "ada@example.com".into(),
                name: "Ada Lovelace".into(),
                plan: "team".into(),
            },
            reviewer: Reviewer::Simulated {
                delay: Duration::from_millis(1500),
            },
            latency: Duration::from_millis(150),
        }
    }
}

/// How this invocation found the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// No run had the signup's key: a new run started.
    New,
    /// An unfinished run had it: `resume_all` picked it up from its journal.
    Resumed,
    /// A finished run had it: nothing ran, its journaled outputs are reported.
    Finished,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The store file.
    pub db: PathBuf,
    /// The run.
    pub run: RunId,
    /// New, resumed or already finished.
    pub found: Found,
    /// The run's status when [`run`] returned.
    pub status: RunStatus,
    /// The service calls this process made (empty when the run was already finished).
    pub calls: Vec<String>,
    /// Attempts `provision_workspace` made, over the run's whole journal.
    pub provision_attempts: u32,
    /// The account, once the run is done.
    pub user: Option<User>,
    /// Whether the welcome email went out (it may fail without failing the run).
    pub welcome_sent: bool,
    /// The workspace, once the run is done.
    pub workspace: Option<Workspace>,
    /// The review's decision, once made.
    pub review: Option<Approval>,
    /// Whether the account was activated.
    pub activated: bool,
}

/// Runs (or resumes, or reports) the onboarding of `config.signup` on the SQLite file
/// `config.db`, writing progress to `log`.
pub async fn run(config: &Config, log: &Log) -> Result<Summary, Box<dyn Error>> {
    if let Some(dir) = config.db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let store = SqliteStore::open(&config.db)?;
    let engine = Engine::builder().store(store).build();
    let services = Services::new(log, config.latency);
    let calls = services.calls.clone();
    engine.register::<UserOnboarding>(services)?;
    let progress = Progress::start(&engine, UserOnboarding::spec(), log);

    // Look the signup up by its idempotency key: a previous process may have finished
    // it, or been interrupted in the middle of it.
    let key = config.signup.email.clone();
    let existing = engine
        .store()
        .runs(RunFilter {
            workflow: Some(UserOnboarding::NAME.to_owned()),
            ..RunFilter::default()
        })
        .await?
        .into_iter()
        .find(|record| record.idempotency_key.as_deref() == Some(key.as_str()));
    if let Some(record) = existing.as_ref().filter(|r| r.status == RunStatus::Running) {
        let view = engine.inspect(record.id).await?;
        log.line(format!(
            "Found {} for {key}, interrupted. Its journal says:",
            record.id
        ));
        for step in &view.steps {
            let attempts = match step.attempts {
                0 | 1 => String::new(),
                n => format!(" ({n} attempts)"),
            };
            log.line(format!(
                "    {:<20} {}{attempts}",
                step.id,
                step.state.name()
            ));
        }
        log.line(
            "Steps that succeeded are not run again; an attempt without a journaled result \
             is re-run with the same idempotency key.",
        );
    }
    // Pick up every unfinished run where its journal ends.
    let resumed = engine.resume_all().await?;
    if resumed > 0 {
        log.line(format!(
            "Resumed {resumed} unfinished run(s) from {}.",
            config.db.display()
        ));
    }
    let found = match &existing {
        None => Found::New,
        Some(record) if record.status.is_finished() => Found::Finished,
        Some(record) => {
            // `resume_all` parks a run whose spec changed since it started.
            let now = engine.inspect(record.id).await?.record;
            if now.status == RunStatus::Parked {
                return Err(format!(
                    "{} is parked: {}",
                    record.id,
                    now.note.as_deref().unwrap_or("its spec changed")
                )
                .into());
            }
            Found::Resumed
        }
    };
    let input = UserOnboardingInput {
        signup: config.signup.clone(),
    };
    if found == Found::New {
        log.line(format!(
            "No run has the idempotency key {key}: starting one."
        ));
    }
    let run = engine
        .start_with::<UserOnboarding>(input, StartOptions::key(key.clone()))
        .await?;
    match found {
        Found::New => {}
        Found::Resumed => log.line(format!(
            "{} continues from its journal (the start with key {key} returned it).",
            run.id()
        )),
        Found::Finished => log.line(format!(
            "{} for {key} is already finished; nothing runs again.",
            run.id()
        )),
    }

    // An interrupted run may have been decided before the interruption.
    let decided = run
        .inspect()
        .await?
        .steps
        .iter()
        .any(|step| step.id == "human_review" && step.state.is_settled());
    let mut review_open = false;
    if found != Found::Finished && !decided {
        let task =
            wait_for_task(&engine, run.id(), "human_review", Duration::from_secs(60)).await?;
        review_open = true;
        match config.reviewer {
            Reviewer::Simulated { delay } => {
                tokio::time::sleep(delay).await;
                let reviewer = "ana@trust_and_safety_team";
                log.line(format!(
                    "[simulated reviewer] {reviewer} approves (task assigned to {})",
                    task.assignee
                ));
                run.human_review()
                    .approve(reviewer, Some("identity checked; looks fine"))
                    .await?;
                review_open = false;
            }
            Reviewer::StopAtReview => {
                log.line(format!(
                    "Stopping while {} waits for {} (run again to resume).",
                    run.id(),
                    task.assignee
                ));
            }
        }
    }

    let outputs = if review_open {
        None
    } else {
        Some(run.outputs().await?)
    };
    progress.finish().await;

    let view = run.inspect().await?;
    let provision_attempts = view
        .steps
        .iter()
        .find(|step| step.id == "provision_workspace")
        .map_or(0, |step| step.attempts);
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Summary {
        db: config.db.clone(),
        run: run.id(),
        found,
        status: view.record.status,
        calls,
        provision_attempts,
        user: outputs.as_ref().map(|o| o.create_account.clone()),
        welcome_sent: outputs
            .as_ref()
            .is_some_and(|o| o.send_welcome_email.is_some()),
        workspace: outputs.as_ref().map(|o| o.provision_workspace.clone()),
        review: outputs.as_ref().map(|o| o.human_review.clone()),
        activated: outputs
            .as_ref()
            .is_some_and(|o| o.activate_account.is_some()),
    })
}
