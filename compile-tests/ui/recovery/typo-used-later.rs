use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Signup {
    email: String,
}
#[derive(Clone, Serialize, Deserialize)]
pub struct User {
    id: u64,
}
#[derive(Clone, Serialize, Deserialize)]
pub struct Workspace(u64);

pub struct Services;

mod accounts {
    use super::*;
    pub async fn create_user_record(_env: &Services, _signup: Signup) -> Result<User, StepError> {
        Ok(User { id: 7 })
    }
}

mod workspaces {
    use super::*;
    pub async fn create(
        _env: &Services,
        _ctx: &StepContext,
        user: User,
    ) -> Result<Workspace, StepError> {
        Ok(Workspace(user.id))
    }
}

workflow! {
    pub workflow UserOnboarding(signup: Signup) env Services {
        step create_account -> User {
            action: accounts::create_user_record(env, signup),
        }
        step provision_workspace -> Workspace {
            action: workspaces::create(env, ctx, create_account),
        }
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            depends_on: [provison_workspace],
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
    }
}

async fn use_it(engine: Engine) -> Result<(), RunError> {
    engine.register::<UserOnboarding>(Services)?;
    let run = engine
        .start::<UserOnboarding>(UserOnboardingInput {
            signup: Signup {
                email: "ada@example.com".into(),
            },
        })
        .await?;
    run.human_review().approve("ana", None).await.ok();
    let outputs = run.outputs().await?;
    let _: User = outputs.create_account;
    let _: Workspace = outputs.provision_workspace;
    let _: bool = outputs.human_review.approved;
    let _: &str = UserOnboarding::MERMAID;
    let _ = UserOnboardingStep::HumanReview.id();
    Ok(())
}

fn main() {
    let _ = use_it;
}
