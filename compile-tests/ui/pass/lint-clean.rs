//! The expansion of a full-featured spec is lint-clean: no warning of rustc's default
//! set, no missing docs, nothing unused, idiomatic 2018 code, no unreachable `pub`.
#![deny(warnings)]
#![deny(missing_docs)]
#![deny(
    unused,
    nonstandard_style,
    rust_2018_idioms,
    unreachable_pub,
    unused_qualifications
)]

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

/// What the user signed up with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Signup {
    email: String,
}

/// An account.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct User {
    id: u64,
}

/// The clients the steps use.
#[derive(Debug)]
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
    ) -> Result<u64, StepError> {
        let _ = (&ctx.idempotency_key, user.id, subject);
        Ok(1)
    }

    pub(crate) async fn find_welcome(ctx: &StepContext) -> Result<Option<u64>, StepError> {
        let _ = &ctx.idempotency_key;
        Ok(None)
    }

    pub(crate) async fn activate(user: User, mail: Option<u64>) -> Result<(), StepError> {
        let _ = (user.id, mail);
        Ok(())
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
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 30s, multiplier: 2, jitter: full, deadline: 2m, retry_on: [timeout, unavailable] },
        }
        /// Sends the welcome mail.
        step send_welcome -> u64 {
            action: steps::welcome(ctx, create_account, "Welcome"),
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
        /// Activates the account once approved.
        step activate -> () {
            action: steps::activate(create_account, send_welcome),
            depends_on: [review],
            condition: review.approved && signup.email.contains('@'),
        }
    }
}

fn main() {
    let _ = (
        Onboarding::MERMAID,
        Onboarding::DOT,
        Onboarding::FINGERPRINT,
    );
}
