//! The onboarding spec of DESIGN.md ("The spec language (contract)"), copied verbatim,
//! with just enough support code to compile.

use workflow_core::prelude::*;

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

use serde::{Deserialize, Serialize};

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
pub struct Services;

mod accounts {
    use super::*;
    pub async fn create_user_record(_env: &Services, signup: Signup) -> Result<User, StepError> {
        Ok(User {
            id: 7,
            email: signup.email,
        })
    }
    pub async fn set_active(_env: &Services, _user: User) -> Result<(), StepError> {
        Ok(())
    }
}

mod mail {
    use super::*;
    pub async fn send_welcome(
        _env: &Services,
        ctx: &StepContext,
        user: User,
    ) -> Result<Receipt, StepError> {
        Ok(Receipt(format!("{} {}", user.email, ctx.idempotency_key)))
    }
}

mod workspaces {
    use super::*;
    pub async fn create(
        _env: &Services,
        _ctx: &StepContext,
        user: User,
    ) -> Result<Workspace, StepError> {
        Ok(Workspace(user.id * 10))
    }
}

fn main() {}
