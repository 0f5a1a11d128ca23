//! The upgrade check before a deploy: a store filled by version 1 (runs waiting on a
//! person), checked against builds of version 2 that only change a doc comment (the runs
//! continue), add a step (they would park) and rename a field of a step's output type
//! (their journal no longer decodes). The check changes nothing in the store.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::testing;
use workflow_core::upgrade::{self, Verdict};

const WAIT: Duration = Duration::from_secs(10);

mod v1 {
    use super::*;

    #[derive(Clone, Debug, Serialize, Deserialize)]
    pub struct Receipt {
        pub amount_cents: u64,
    }

    pub async fn charge(amount: u64) -> Result<Receipt, StepError> {
        Ok(Receipt {
            amount_cents: amount,
        })
    }

    workflow! {
        /// Charge, then a person approves the shipment.
        #[workflow(name = "Orders")]
        pub workflow Orders(amount: u64) {
            step charge -> Receipt { action: charge(amount) }
            human approve -> Approval {
                assignee: "ops",
                depends_on: [charge],
                timeout: 48h,
                on_timeout: abort,
            }
        }
    }
}

mod doc_only {
    pub use super::v1::{charge, Receipt};
    use super::*;

    workflow! {
        /// Charge, then a person approves the shipment (reworded: behaviour unchanged).
        #[workflow(name = "Orders")]
        pub workflow Orders(amount: u64) {
            /// Takes the money.
            step charge -> Receipt { action: charge(amount) }
            human approve -> Approval {
                assignee: "ops",
                depends_on: [charge],
                timeout: 48h,
                on_timeout: abort,
            }
        }
    }
}

mod added_step {
    pub use super::v1::{charge, Receipt};
    use super::*;

    pub async fn notify(receipt: Receipt) -> Result<String, StepError> {
        Ok(format!("charged {}", receipt.amount_cents))
    }

    workflow! {
        #[workflow(name = "Orders")]
        pub workflow Orders(amount: u64) {
            step charge -> Receipt { action: charge(amount) }
            step notify -> String { action: notify(charge) }
            human approve -> Approval {
                assignee: "ops",
                depends_on: [notify],
                timeout: 48h,
                on_timeout: abort,
            }
        }
    }
}

mod renamed_field {
    use super::*;

    /// The same type name (so the same fingerprint), a field renamed.
    #[derive(Clone, Debug, Serialize, Deserialize)]
    pub struct Receipt {
        pub cents: u64,
    }

    pub async fn charge(amount: u64) -> Result<Receipt, StepError> {
        Ok(Receipt { cents: amount })
    }

    workflow! {
        #[workflow(name = "Orders")]
        pub workflow Orders(amount: u64) {
            step charge -> Receipt { action: charge(amount) }
            human approve -> Approval {
                assignee: "ops",
                depends_on: [charge],
                timeout: 48h,
                on_timeout: abort,
            }
        }
    }
}

/// A store with two runs of version 1 waiting on a person.
async fn filled() -> (Arc<dyn Store>, Vec<workflow_core::RunId>) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = Engine::builder().shared_store(store.clone()).build();
    engine.register::<v1::Orders>(()).unwrap();
    let mut runs = Vec::new();
    for amount in [4200, 990] {
        let run = engine
            .start::<v1::Orders>(v1::OrdersInput { amount })
            .await
            .unwrap();
        testing::wait_for_task(&engine, run.id(), "approve", WAIT)
            .await
            .unwrap();
        runs.push(run.id());
    }
    // The old build stops as a deploy would; its runs stay in the store.
    engine.shutdown();
    (store, runs)
}

/// The new build's engine: its workflows registered, driving nothing.
fn new_build(store: &Arc<dyn Store>) -> Engine {
    Engine::builder()
        .shared_store(store.clone())
        .intake_only()
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_check_says_which_runs_continue_park_or_no_longer_decode() {
    let (store, runs) = filled().await;
    let before: Vec<_> = {
        let mut journals = Vec::new();
        for run in &runs {
            journals.push(store.load(*run).await.unwrap().unwrap().events.len());
        }
        journals
    };

    let same = new_build(&store);
    same.register::<doc_only::Orders>(()).unwrap();
    assert_eq!(doc_only::Orders::FINGERPRINT, v1::Orders::FINGERPRINT);
    let report = upgrade::check(&*store, &same).await.unwrap();
    assert_eq!(report.runs.len(), 2, "{report}");
    assert!(report.is_safe(), "{report}");
    assert_eq!(report.continuing().count(), 2);
    assert!(report.to_string().contains("2 continue"), "{report}");

    let grown = new_build(&store);
    grown.register::<added_step::Orders>(()).unwrap();
    let report = upgrade::check(&*store, &grown).await.unwrap();
    assert_eq!(report.parking().count(), 2, "{report}");
    for run in &report.runs {
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.fingerprint, v1::Orders::FINGERPRINT);
        assert_eq!(
            run.verdict,
            Verdict::Park {
                registered: vec![added_step::Orders::FINGERPRINT.to_owned()]
            }
        );
    }
    assert!(!report.is_safe());
    // Registering the old version beside the new one, as the guide's "Versions and upgrades" chapter shows, makes
    // them continue.
    let both = new_build(&store);
    both.register::<added_step::Orders>(()).unwrap();
    both.register::<doc_only::Orders>(()).unwrap();
    assert!(upgrade::check(&*store, &both).await.unwrap().is_safe());

    let renamed = new_build(&store);
    renamed.register::<renamed_field::Orders>(()).unwrap();
    assert_eq!(renamed_field::Orders::FINGERPRINT, v1::Orders::FINGERPRINT);
    let report = upgrade::check(&*store, &renamed).await.unwrap();
    assert_eq!(report.undecodable().count(), 2, "{report}");
    match &report.runs[0].verdict {
        Verdict::Undecodable { what, message, .. } => {
            assert_eq!(what, "output of step charge");
            assert!(message.contains("cents"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(report.to_string().contains("undecodable"), "{report}");

    // Nobody is registered at all: every run would park, naming no version.
    let none = new_build(&store);
    let report = upgrade::check(&*store, &none).await.unwrap();
    assert!(report
        .runs
        .iter()
        .all(|run| run.verdict == Verdict::Park { registered: vec![] }));

    // The check changed nothing.
    for (run, len) in runs.iter().zip(before) {
        let stored = store.load(*run).await.unwrap().unwrap();
        assert_eq!(stored.events.len(), len);
        assert_eq!(stored.record.status, RunStatus::Running);
    }
}
