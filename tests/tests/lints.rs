//! The expansion of a full-featured spec is lint-clean: this file denies rustc's warnings,
//! missing docs and unused code, and `cargo clippy --all-targets -- -D warnings` holds it
//! to `clippy::all` as well. (`ui/pass/lint-clean.rs` checks the same as a binary crate.)
#![deny(warnings, missing_docs, unused, nonstandard_style, rust_2018_idioms)]
#![deny(unreachable_pub, unused_qualifications, unused_results)]
#![deny(clippy::all)]

use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

/// What the user signed up with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Signup {
    email: String,
}

/// An account.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct User {
    id: u64,
}

/// The decision of the plan review: a custom decision type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    approved: bool,
    seats: u32,
}

impl From<Approval> for Plan {
    fn from(approval: Approval) -> Self {
        Plan {
            approved: approval.approved,
            seats: 1,
        }
    }
}

/// The clients the steps use.
#[derive(Debug, Default)]
pub struct Services {
    region: &'static str,
}

mod steps {
    use super::*;

    pub(crate) async fn create(env: &Services, signup: Signup) -> Result<User, StepError> {
        let _ = (env.region, signup.email);
        Ok(User { id: 7 })
    }

    pub(crate) async fn delete(env: &Services, user: User) -> Result<(), StepError> {
        let _ = (env.region, user.id);
        Ok(())
    }

    pub(crate) async fn welcome(
        ctx: &StepContext,
        user: User,
        subject: &str,
        copies: u32,
    ) -> Result<u64, StepError> {
        let _ = (&ctx.idempotency_key, user.id, subject, copies);
        Ok(1)
    }

    pub(crate) async fn find_welcome(ctx: &StepContext) -> Result<Option<u64>, StepError> {
        let _ = &ctx.idempotency_key;
        Ok(None)
    }

    pub(crate) async fn activate(
        user: User,
        mail: Option<u64>,
        plan: Plan,
    ) -> Result<u32, StepError> {
        let _ = (user.id, mail);
        Ok(plan.seats)
    }
}

workflow! {
    /// Onboards a user, with every kind of step.
    pub workflow Onboarding(signup: Signup) env Services {
        /// Creates the account.
        step create_account -> User {
            action: steps::create(env, signup),
            compensate: steps::delete(env, create_account),
            timeout: 10s,
            retry: {
                max_attempts: 3,
                backoff: exponential,
                initial: 1s,
                max: 30s,
                multiplier: 2,
                jitter: full,
                deadline: 2m,
                retry_on: [timeout, unavailable],
            },
        }
        /// Sends the welcome mail.
        step send_welcome -> u64 {
            action: steps::welcome(ctx, create_account, "Welcome", 1),
            effect: external,
            reconcile: steps::find_welcome(ctx),
            retry: { max_attempts: 5 },
            on_failure: continue,
        }
        /// A person checks the account.
        human review -> Approval {
            assignee: "trust_and_safety_team",
            prompt: "Activate this account?",
            depends_on: [create_account],
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
        /// Sales picks a plan; nobody answering means the default plan.
        human plan -> Plan {
            assignee: "sales",
            depends_on: [review],
            timeout: 1h,
            on_timeout: approve,
        }
        /// Activates the account once approved.
        step activate -> u32 {
            action: steps::activate(create_account, send_welcome, plan),
            condition: review.approved && plan.approved && signup.email.contains('@'),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_lint_clean_workflow_runs() {
    let engine = Engine::builder().seed(3).build();
    engine
        .register::<Onboarding>(Services::default())
        .expect("registers");
    let run = engine
        .start::<Onboarding>(OnboardingInput {
            signup: Signup {
                email: "ada@example.com".into(),
            },
        })
        .await
        .expect("starts");
    while run.review().info().await.is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    run.review()
        .approve("ana@trust_and_safety_team", None)
        .await
        .expect("approves");
    // Nobody picks a plan: after an hour `on_timeout: approve` decides it.
    let outputs = run.outputs().await.expect("completes");
    assert_eq!(outputs.create_account, User { id: 7 });
    assert_eq!(outputs.send_welcome, Some(1));
    assert!(outputs.review.approved);
    assert!(outputs.plan.approved);
    assert_eq!(outputs.activate, Some(1));
    assert!(Onboarding::MERMAID.contains("review"));
    assert!(!Onboarding::DOT.is_empty());
    assert_eq!(Onboarding::spec().steps.len(), 5);
    assert_eq!(OnboardingStep::ALL.len(), 5);
}

mod from_file {
    use super::{Plan, Services, Signup, User};
    use workflow_core::prelude::*;

    workflow_file!(
        "specs/lint-clean.yaml",
        actions: crate::steps,
        env: Services
    );
}

#[tokio::test(start_paused = true)]
async fn the_lint_clean_workflow_from_a_file_runs() {
    use from_file::{FileOnboarding, FileOnboardingInput};
    let engine = Engine::builder().seed(3).build();
    engine
        .register::<FileOnboarding>(Services::default())
        .expect("registers");
    let run = engine
        .start::<FileOnboarding>(FileOnboardingInput {
            signup: Signup {
                email: "ada@example.com".into(),
            },
        })
        .await
        .expect("starts");
    while run.review().info().await.is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    run.review()
        .approve("ana@trust_and_safety_team", None)
        .await
        .expect("approves");
    let outputs = run.outputs().await.expect("completes");
    assert_eq!(outputs.create_account, User { id: 7 });
    assert_eq!(outputs.send_welcome, Some(1));
    assert_eq!(outputs.activate, Some(1));
}

/// Reads the tick a scheduled run was given.
async fn tick_time(tick: workflow_core::Tick) -> Result<u64, StepError> {
    Ok(tick.scheduled)
}

workflow! {
    /// A scheduled workflow: its schedule and `Tick` input expand lint-clean too.
    pub workflow Nightly(tick: workflow_core::Tick) {
        schedule: {
            cron: "30 2 * * *",
            tz: "America/New_York",
            overlap: buffer_one,
            catchup: all(max: 2),
            window: 12h,
            dst_gap: skip,
            jitter: 10s,
        },
        step read -> u64 { action: tick_time(tick) }
    }
}

#[test]
fn a_scheduled_workflow_expands_lint_clean() {
    let schedule = Nightly::schedule().expect("declared");
    assert_eq!(schedule.tz, "America/New_York");
    assert_eq!(Nightly::spec().steps.len(), 1);
}
