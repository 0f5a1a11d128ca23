//! Two versions of one workflow: the old one renamed and pinned to the journaled name with
//! `#[workflow(name = "...")]`, the new one under its own type. The old version keeps the
//! fingerprint its runs were recorded with (a doc comment and a prompt changed nothing);
//! the new one behaves differently and says so.

use workflow_core::prelude::*;

async fn create() -> Result<u32, StepError> {
    Ok(1)
}

async fn welcome(user: u32) -> Result<(), StepError> {
    let _ = user;
    Ok(())
}

workflow! {
    /// The first version, as it was released.
    workflow Onboarding() {
        step create_account -> u32 {
            action: create(),
        }
        human review -> Approval {
            assignee: "support",
            prompt: "Is the account fine?",
            depends_on: [create_account],
            timeout: 1h,
            on_timeout: abort,
        }
    }
}

workflow! {
    /// The first version, renamed: runs started on it drain on it.
    #[workflow(name = "Onboarding")]
    workflow OnboardingV1() {
        /// Creates the account.
        step create_account -> u32 {
            action: create(),
        }
        human review -> Approval {
            assignee: "support",
            prompt: "Does the account look fine?",
            depends_on: [create_account],
            timeout: 1h,
            on_timeout: abort,
        }
    }
}

workflow! {
    /// The second version: new runs start on it.
    #[workflow(name = "Onboarding")]
    workflow OnboardingV2() {
        step create_account -> u32 {
            action: create(),
        }
        step send_welcome -> () {
            action: welcome(create_account),
        }
        human review -> Approval {
            assignee: "support",
            depends_on: [create_account],
            timeout: 1h,
            on_timeout: abort,
        }
    }
}

fn main() {
    assert_eq!(<Onboarding as Workflow>::NAME, "Onboarding");
    assert_eq!(<OnboardingV1 as Workflow>::NAME, "Onboarding");
    assert_eq!(<OnboardingV2 as Workflow>::NAME, "Onboarding");
    assert_eq!(OnboardingV1::spec().name, "OnboardingV1");
    assert_eq!(OnboardingV1::spec().journaled_name(), "Onboarding");
    assert_eq!(OnboardingV1::FINGERPRINT, Onboarding::FINGERPRINT);
    assert_ne!(OnboardingV2::FINGERPRINT, Onboarding::FINGERPRINT);
    assert_eq!(OnboardingV1::FINGERPRINT, OnboardingV1::spec().fingerprint());
}
