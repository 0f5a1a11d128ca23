//! `workflow_file!` against its inline twin: the same fingerprint, model and diagrams,
//! and the same generated API (the file's workflow is driven through the same calls).

use workflow_core::prelude::*;

pub use examples::onboarding::{
    accounts, mail, workspaces, Receipt, Services, Signup, User, Workspace,
};

mod from_file {
    use super::*;
    workflow_file!("specs/onboarding.yaml", env: Services);
}

mod inline {
    use super::*;
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
}

#[test]
fn a_file_and_its_inline_twin_have_one_fingerprint_model_and_diagram() {
    use from_file::UserOnboarding as File;
    use inline::UserOnboarding as Inline;
    assert_eq!(
        <File as Workflow>::FINGERPRINT,
        <Inline as Workflow>::FINGERPRINT
    );
    assert_eq!(File::spec(), Inline::spec());
    assert_eq!(File::MERMAID, Inline::MERMAID);
    assert_eq!(File::DOT, Inline::DOT);
    assert_eq!(<File as Workflow>::NAME, "UserOnboarding");
    // And the seed's file, the example's, is the seed's DESIGN.md workflow under its own
    // actions: its fingerprint differs from the inline one only by what it declares.
    assert_ne!(
        <examples::onboarding_file::UserOnboarding as Workflow>::FINGERPRINT,
        <Inline as Workflow>::FINGERPRINT
    );
}

#[test]
fn the_file_generates_the_same_typed_api() {
    // Each of these names exists only if the file generated it, with these types.
    let input = from_file::UserOnboardingInput {
        signup: Signup {
            email: "a@example.com".into(),
            name: "A".into(),
            plan: "team".into(),
        },
    };
    let twin = inline::UserOnboardingInput {
        signup: input.signup.clone(),
    };
    assert_eq!(
        serde_json::to_value(&input).unwrap(),
        serde_json::to_value(&twin).unwrap()
    );
    let steps: Vec<&str> = from_file::UserOnboarding::spec()
        .steps
        .iter()
        .map(|step| step.id.as_str())
        .collect();
    assert_eq!(
        steps,
        [
            "create_account",
            "send_welcome_email",
            "provision_workspace",
            "human_review",
            "activate_account"
        ]
    );
}

/// `workflow export --yaml` of two examples (committed; `workflow-cli`'s tests check they
/// are what export writes today), compiled back by the macro.
mod exported {
    pub mod saga {
        use examples::order_saga::{shop, Charge, Order, Reservation, Shop};
        workflow_core::workflow_file!("specs/order-saga.exported.yaml");
    }
    pub mod triage {
        use examples::ticket_triage::{triage, AlertId, Helpdesk, Ticket, Triage, Webhook};
        use workflow_core::Approval;
        workflow_core::workflow_file!("specs/ticket-triage.exported.yaml");
    }
}

#[test]
fn exported_examples_compile_back_to_their_fingerprints() {
    assert_eq!(
        <exported::saga::OrderSaga as Workflow>::FINGERPRINT,
        <examples::order_saga::OrderSaga as Workflow>::FINGERPRINT
    );
    assert_eq!(
        exported::saga::OrderSaga::spec(),
        examples::order_saga::OrderSaga::spec()
    );
    assert_eq!(
        <exported::triage::TicketTriage as Workflow>::FINGERPRINT,
        <examples::ticket_triage::TicketTriage as Workflow>::FINGERPRINT
    );
    assert_eq!(
        exported::triage::TicketTriage::MERMAID,
        examples::ticket_triage::TicketTriage::MERMAID
    );
}
