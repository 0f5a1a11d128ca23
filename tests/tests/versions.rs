//! A deploy of a new version while runs of the old one wait on a person: both versions are
//! registered under one journaled name; waiting runs drain on the version they started on,
//! new runs start on the new one, and nothing is parked.

use std::time::Duration;

use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::testing::{self, Recorder};

#[derive(Clone, Default)]
pub struct Mail {
    sent: Recorder<u32>,
}

async fn create(id: u32) -> Result<u32, StepError> {
    Ok(id)
}

async fn welcome(mail: &Mail, user: u32) -> Result<(), StepError> {
    mail.sent.record(user);
    Ok(())
}

workflow! {
    /// The version in production: create, then a person reviews.
    #[workflow(name = "Onboarding")]
    pub workflow OnboardingV1(id: u32) env Mail {
        step create_account -> u32 { action: create(id) }
        human review -> Approval {
            assignee: "support",
            depends_on: [create_account],
            timeout: 48h,
            on_timeout: abort,
        }
    }
}

workflow! {
    /// The same version, as it reads after a doc and prompt edit: same behaviour.
    #[workflow(name = "Onboarding")]
    pub workflow OnboardingV1Edited(id: u32) env Mail {
        /// Creates the account (documented now).
        step create_account -> u32 { action: create(id) }
        human review -> Approval {
            assignee: "support",
            prompt: "Does the new account look right?",
            depends_on: [create_account],
            timeout: 48h,
            on_timeout: abort,
        }
    }
}

workflow! {
    /// The next version: it also sends a welcome mail.
    #[workflow(name = "Onboarding")]
    pub workflow OnboardingV2(id: u32) env Mail {
        step create_account -> u32 { action: create(id) }
        step send_welcome -> () { action: welcome(env, create_account) }
        human review -> Approval {
            assignee: "support",
            depends_on: [create_account],
            timeout: 48h,
            on_timeout: abort,
        }
    }
}

fn engine(store: &std::sync::Arc<dyn Store>) -> Engine {
    Engine::builder()
        .shared_store(store.clone())
        .clock(TokioClock::starting_at(0))
        .build()
}

#[tokio::test(start_paused = true)]
async fn a_deploy_of_v2_lets_waiting_v1_runs_drain_on_v1() {
    assert_eq!(
        OnboardingV1::FINGERPRINT,
        OnboardingV1Edited::FINGERPRINT,
        "docs and prompts are not behaviour"
    );
    assert_ne!(OnboardingV1::FINGERPRINT, OnboardingV2::FINGERPRINT);

    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(MemoryStore::new());
    let before = engine(&store);
    before.register::<OnboardingV1>(Mail::default()).unwrap();
    let old = before
        .start::<OnboardingV1>(OnboardingV1Input { id: 1 })
        .await
        .unwrap();
    testing::wait_for_task(&before, old.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    before.shutdown(); // the deploy

    let mail = Mail::default();
    let after = engine(&store);
    after.register::<OnboardingV1Edited>(mail.clone()).unwrap();
    after.register::<OnboardingV2>(mail.clone()).unwrap();
    assert_eq!(after.resume_all().await.unwrap(), 1, "resumed, not parked");
    let new = after
        .start::<OnboardingV2>(OnboardingV2Input { id: 2 })
        .await
        .unwrap();
    testing::wait_for_task(&after, new.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    let waiting = testing::wait_for_task(&after, old.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(waiting.workflow, "Onboarding");

    let old = after.handle::<OnboardingV1Edited>(old.id()).await.unwrap();
    old.review().approve("support", None).await.unwrap();
    new.review().approve("support", None).await.unwrap();
    let drained = old.outputs().await.unwrap();
    assert_eq!(drained.create_account, 1);
    let started = new.outputs().await.unwrap();
    assert_eq!(started.create_account, 2);
    assert_eq!(mail.sent.calls(), [2], "only the new version sends mail");

    for (run, fingerprint) in [
        (old.id(), OnboardingV1::FINGERPRINT),
        (new.id(), OnboardingV2::FINGERPRINT),
    ] {
        let record = store.load(run).await.unwrap().unwrap().record;
        assert_eq!(record.status, RunStatus::Completed);
        assert_eq!(record.workflow, "Onboarding");
        assert_eq!(record.fingerprint, fingerprint);
    }
    let registered = store.specs("Onboarding").await.unwrap();
    assert_eq!(registered.len(), 2, "both versions are recorded for tools");
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_version_is_no_longer_registered_is_parked() {
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(MemoryStore::new());
    let before = engine(&store);
    before.register::<OnboardingV1>(Mail::default()).unwrap();
    let old = before
        .start::<OnboardingV1>(OnboardingV1Input { id: 1 })
        .await
        .unwrap();
    testing::wait_for_task(&before, old.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    before.shutdown();

    let after = engine(&store);
    after.register::<OnboardingV2>(Mail::default()).unwrap();
    assert_eq!(after.resume_all().await.unwrap(), 0);
    let record = store.load(old.id()).await.unwrap().unwrap().record;
    assert_eq!(record.status, RunStatus::Parked);
    let note = record.note.unwrap();
    assert!(note.contains(OnboardingV1::FINGERPRINT), "{note}");
    assert!(note.contains(OnboardingV2::FINGERPRINT), "{note}");
    let restarted = after.restart_parked(old.id(), "ops").await.unwrap();
    let record = store.load(restarted).await.unwrap().unwrap().record;
    assert_eq!(record.fingerprint, OnboardingV2::FINGERPRINT);
}
