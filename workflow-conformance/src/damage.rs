//! Damage: what every store does with a journal entry a bad disk changed.

use super::*;

pub(super) async fn a_damaged_entry_is_reported(subject: Subject) {
    let store = &*subject.store;
    let run = create(store, "onboard", None).await.id();
    let more = [attempt(0, 1_100), attempt(1, 1_200)];
    store
        .commit(Commit::events(run, 1, &more, 1_100))
        .await
        .expect("append");
    let other = create(store, "onboard", None).await.id();
    assert!(store.verify().await.expect("verify").is_clean());

    (subject.damage)(run, 2).await;
    let damaged = StoreError::Corrupt { run, seq: 2 };
    assert_eq!(store.load(run).await.expect_err("damaged"), damaged);
    assert_eq!(
        store.load_many(&[other, run]).await.expect_err("damaged"),
        damaged,
        "a page holding the damaged run reports it"
    );
    // The failed read changed nothing: the damage is still there to be reported.
    assert_eq!(store.load(run).await.expect_err("still damaged"), damaged);
    assert_eq!(
        events_of(store, other).await.len(),
        1,
        "other runs still load"
    );
    assert_eq!(
        store.runs(RunFilter::default()).await.expect("runs").len(),
        2,
        "the damaged run is still listed"
    );

    let verification = store.verify().await.expect("verify");
    assert!(!verification.is_clean(), "{verification:?}");
    let found: Vec<(&str, Option<RunId>, &str)> = verification
        .damaged
        .iter()
        .map(|d| (d.table.as_str(), d.run, d.key.as_str()))
        .collect();
    let key = format!("run-{}/2", run.0);
    assert_eq!(
        found,
        [("journal", Some(run), key.as_str())],
        "{verification:?}"
    );
}
