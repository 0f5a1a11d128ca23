//! The onboarding spec of DESIGN.md, exactly as written there, compiled and run.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Signup {
    email: String,
}
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct User {
    id: u64,
    email: String,
}
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Receipt(String);
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workspace(u64);

#[derive(Default)]
pub struct Services {
    provision_failures: AtomicU32,
    calls: Mutex<Vec<String>>,
}

impl Services {
    fn record(&self, call: &str) {
        self.calls.lock().unwrap().push(call.to_owned());
    }
}

mod accounts {
    use super::*;
    pub async fn create_user_record(env: &Services, signup: Signup) -> Result<User, StepError> {
        env.record("create_user_record");
        Ok(User {
            id: 7,
            email: signup.email,
        })
    }
    pub async fn set_active(env: &Services, user: User) -> Result<(), StepError> {
        env.record(&format!("set_active {}", user.id));
        Ok(())
    }
}

mod mail {
    use super::*;
    pub async fn send_welcome(
        env: &Services,
        ctx: &StepContext,
        user: User,
    ) -> Result<Receipt, StepError> {
        env.record(&format!(
            "send_welcome {} key={}",
            user.email, ctx.idempotency_key
        ));
        Ok(Receipt("sent".into()))
    }
}

mod workspaces {
    use super::*;
    pub async fn create(
        env: &Services,
        ctx: &StepContext,
        user: User,
    ) -> Result<Workspace, StepError> {
        env.record(&format!("create_workspace attempt {}", ctx.attempt));
        if env.provision_failures.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(StepError::unavailable("workspace service returned 503"));
        }
        Ok(Workspace(user.id * 10))
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

#[tokio::test(start_paused = true)]
async fn onboarding_runs_end_to_end_with_retries_and_an_approval() {
    let engine = Engine::builder().seed(1).build();
    engine
        .register::<UserOnboarding>(Services::default())
        .unwrap();
    let run = engine
        .start::<UserOnboarding>(UserOnboardingInput {
            signup: Signup {
                email: "ada@example.com".into(),
            },
        })
        .await
        .unwrap();
    // Wait until the review task is open (the workspace needed three attempts).
    let task = loop {
        if let Some(task) = run.human_review().info().await {
            break task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(task.assignee, "trust_and_safety_team");
    run.human_review()
        .approve("ana@trust_and_safety_team", Some("looks fine"))
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(
        outputs.create_account,
        User {
            id: 7,
            email: "ada@example.com".into()
        }
    );
    assert_eq!(outputs.provision_workspace, Workspace(70));
    assert!(outputs.human_review.approved);
    assert_eq!(outputs.human_review.by, "ana@trust_and_safety_team");
    assert_eq!(outputs.activate_account, Some(()));
    assert!(outputs.send_welcome_email.is_some());
    let view = run.inspect().await.unwrap();
    assert_eq!(view.steps[2].attempts, 3);
}
