//! Flow control: gated runs wait for an admission that holds each key's limit, skips and
//! debounces are decided in the store, step slots and rate tokens are taken together or
//! not at all and count only under their run's current lease.

use std::collections::HashMap;

use super::*;
use workflow_core::store::limits::{
    Acquired, Admit, DebounceStart, Gate, OnLimit, RateLimit, RunLimit, SlotLimit, SlotRequest,
    ADMISSION_WINDOW, AGING_STEP_MS,
};

const WORKFLOW: &str = "charge";

async fn gated(store: &dyn Store, key: Option<&str>, priority: i64, at: Timestamp) -> RunId {
    let events = [started(WORKFLOW, at)];
    store
        .create_gated(
            NewRun {
                at,
                ..new_run(WORKFLOW, None, &events)
            },
            Gate {
                concurrency: key.map(|k| (WORKFLOW, k)),
                priority,
                debounce: None,
            },
        )
        .await
        .expect("create a gated run")
        .id()
}

fn admit<'a>(owner: &'a str, limits: &'a [RunLimit<'a>], room: usize) -> Admit<'a> {
    Admit {
        claimant: claimant(owner, 60_000),
        versions: &["fp1"],
        limits,
        room,
        aging_ms: AGING_STEP_MS,
    }
}

fn limit(n: u32, on_limit: OnLimit) -> [RunLimit<'static>; 1] {
    [RunLimit {
        workflow: WORKFLOW,
        limit: n,
        on_limit,
    }]
}

async fn admitted(store: &dyn Store, admit: Admit<'_>) -> Vec<RunId> {
    store
        .admit(admit)
        .await
        .expect("admit")
        .admitted
        .iter()
        .map(|a| a.lease.run)
        .collect()
}

async fn finish(store: &dyn Store, run: RunId, owner: &str) {
    let token = store
        .claim(Claim {
            run: Some(run),
            reclaim_own: true,
            ..claim(claimant(owner, 60_000), &[WORKFLOW])
        })
        .await
        .expect("claim")
        .first()
        .map(|l| l.token)
        .expect("the admitted run is its admitter's");
    store
        .commit(Commit {
            fence: Some(Fence { owner, token }),
            ..with_status(run, 1, RunStatus::Completed, None)
        })
        .await
        .expect("finish");
}

pub(super) async fn admission_holds_each_key_limit(store: Arc<dyn Store>) {
    let now = wall_clock();
    let a1 = gated(&*store, Some("customer-42"), 0, now).await;
    let a2 = gated(&*store, Some("customer-42"), 0, now).await;
    let a3 = gated(&*store, Some("customer-42"), 0, now).await;
    let b1 = gated(&*store, Some("customer-7"), 0, now).await;
    let claimed = store
        .claim(claim(claimant("w", 60_000), &[WORKFLOW]))
        .await
        .expect("claim");
    assert!(
        claimed.is_empty(),
        "no claim takes a gated run: {claimed:?}"
    );
    let limits = limit(1, OnLimit::Queue);
    // Room for two: one per key (round robin), never a second run of customer-42.
    assert_eq!(admitted(&*store, admit("w", &limits, 2)).await, [a1, b1]);
    assert!(admitted(&*store, admit("v", &limits, 10)).await.is_empty());
    let record = store.load(a1).await.expect("load").expect("run").record;
    assert_eq!(record.owner.as_deref(), Some("w"));
    let flow = store.flow_of(a2).await.expect("flow");
    let gate = flow.gate.expect("a gated run has a gate");
    assert!(!gate.admitted);
    assert_eq!(gate.usage.in_use, 1);
    assert_eq!(gate.usage.holders[0].0, a1, "the holder is named");
    assert_eq!(gate.ahead, 0);
    let behind = store.flow_of(a3).await.expect("flow").gate.expect("gate");
    assert_eq!(behind.ahead, 1, "a2 is ahead of a3");
    finish(&*store, a1, "w").await;
    assert_eq!(admitted(&*store, admit("v", &limits, 10)).await, [a2]);
    // A larger limit from the admitting worker's spec admits more, parking nothing.
    let two = limit(2, OnLimit::Queue);
    assert_eq!(admitted(&*store, admit("v", &two, 10)).await, [a3]);
}

pub(super) async fn priority_orders_admission_and_ages(store: Arc<dyn Store>) {
    let now = wall_clock();
    let old = gated(&*store, None, 0, now - 30 * AGING_STEP_MS).await;
    let low = gated(&*store, None, 0, now).await;
    let high = gated(&*store, None, 5, now).await;
    // The old run has aged 30 steps: it goes before the high-priority newcomer.
    assert_eq!(admitted(&*store, admit("w", &[], 1)).await, [old]);
    assert_eq!(admitted(&*store, admit("w", &[], 1)).await, [high]);
    assert_eq!(admitted(&*store, admit("w", &[], 1)).await, [low]);
}

pub(super) async fn skip_and_cancel_previous_are_decided_at_admission(store: Arc<dyn Store>) {
    let now = wall_clock();
    let holder = gated(&*store, Some("k"), 0, now).await;
    let limits = limit(1, OnLimit::Queue);
    assert_eq!(admitted(&*store, admit("w", &limits, 5)).await, [holder]);
    let skipped = gated(&*store, Some("k"), 0, now).await;
    let answer = store
        .admit(admit("w", &limit(1, OnLimit::Skip), 5))
        .await
        .expect("admit");
    assert!(answer.admitted.is_empty());
    assert_eq!(answer.skipped.len(), 1);
    let record = store
        .load(skipped)
        .await
        .expect("load")
        .expect("run")
        .record;
    assert_eq!(record.status, RunStatus::Cancelled);
    let note = record.note.unwrap_or_default();
    assert!(
        note.contains(&holder.to_string()),
        "the note names the holder: {note}"
    );
    let waiting = gated(&*store, Some("k"), 0, now).await;
    let answer = store
        .admit(admit("w", &limit(1, OnLimit::CancelPrevious), 5))
        .await
        .expect("admit");
    assert!(answer.admitted.is_empty(), "the new run waits for the slot");
    assert_eq!(answer.cancel, [(holder, waiting)]);
}

pub(super) async fn debounce_keeps_the_latest_start(store: Arc<dyn Store>) {
    let now = wall_clock();
    let debounce = DebounceStart {
        key: "cart-1",
        window_ms: 60_000,
        max_wait_ms: Some(90_000),
    };
    let mut runs = Vec::new();
    for (i, at) in [now - 80_000, now - 50_000, now].into_iter().enumerate() {
        let events = [started(WORKFLOW, at)];
        let created = store
            .create_gated(
                NewRun {
                    at,
                    ..new_run(WORKFLOW, None, &events)
                },
                Gate {
                    debounce: Some(debounce),
                    ..Gate::default()
                },
            )
            .await
            .expect("create");
        runs.push(created.id());
        if i > 0 {
            let record = store
                .load(runs[i - 1])
                .await
                .expect("load")
                .expect("run")
                .record;
            assert_eq!(record.status, RunStatus::Cancelled);
            assert_eq!(
                record.note.as_deref(),
                Some(workflow_core::store::limits::debounced_note(runs[i]).as_str())
            );
        }
    }
    let last = runs[2];
    let gate = store.flow_of(last).await.expect("flow").gate.expect("gate");
    // The burst began 80 s ago: max_wait (90 s) comes before the window (60 s from now).
    assert_eq!(gate.not_before, Some(now - 80_000 + 90_000));
    assert!(
        admitted(&*store, admit("w", &[], 5)).await.is_empty(),
        "not before its time"
    );
    let later = Admit {
        claimant: Claimant {
            now: now + 10_001,
            ..claimant("w", 60_000)
        },
        ..admit("w", &[], 5)
    };
    assert_eq!(admitted(&*store, later).await, [last]);
}

pub(super) async fn a_deep_queue_hides_no_other_key(store: Arc<dyn Store>) {
    let now = wall_clock();
    let limits = limit(1, OnLimit::Queue);
    // More runs wait for one key than an admission reads from a queue.
    let mut hot = Vec::new();
    for _ in 0..=ADMISSION_WINDOW {
        hot.push(gated(&*store, Some("hot"), 0, now).await);
    }
    let cold = gated(&*store, Some("cold"), 0, now).await;
    let keyless = gated(&*store, None, 0, now).await;
    assert_eq!(admitted(&*store, admit("w", &limits, 1)).await, [hot[0]]);
    // The hot key is at its limit: the runs queued behind all of its runs start, and
    // none of the hot key's.
    assert_eq!(
        admitted(&*store, admit("w", &limits, 10)).await,
        [cold, keyless]
    );
    assert!(admitted(&*store, admit("v", &limits, 10)).await.is_empty());
    let gate = store
        .flow_of(hot[2])
        .await
        .expect("flow")
        .gate
        .expect("gate");
    assert_eq!(gate.usage.holders.first().map(|h| h.0), Some(hot[0]));
    assert_eq!(gate.ahead, 1, "hot[1] is ahead of hot[2]");
    // When the holder finishes, the next of its key starts, in order.
    finish(&*store, hot[0], "w").await;
    assert_eq!(admitted(&*store, admit("v", &limits, 10)).await, [hot[1]]);
}

pub(super) async fn racing_admissions_hold_each_key_limit(store: Arc<dyn Store>) {
    const WORKERS: usize = 4;
    let now = wall_clock();
    let mut waiting: HashMap<&str, Vec<RunId>> = HashMap::new();
    for i in 0..30 {
        let key = if i % 3 == 0 { "cold" } else { "hot" };
        waiting
            .entry(key)
            .or_default()
            .push(gated(&*store, Some(key), 0, now).await);
    }
    // The runs of each key in flight, with the worker that admitted each.
    let mut holders: HashMap<RunId, (&str, usize)> = HashMap::new();
    let mut seen = Vec::new();
    for round in 0..4 {
        // Every worker admits at once, each with room for more than the keys have.
        let mut racing = tokio::task::JoinSet::new();
        for worker in 0..WORKERS {
            let store = Arc::clone(&store);
            racing.spawn(async move {
                let limits = limit(3, OnLimit::Queue);
                let owner = format!("w{worker}");
                (worker, admitted(&*store, admit(&owner, &limits, 4)).await)
            });
        }
        while let Some(done) = racing.join_next().await {
            let (worker, runs) = done.expect("an admission");
            for run in runs {
                let key = if waiting["hot"].contains(&run) {
                    "hot"
                } else {
                    "cold"
                };
                assert!(!seen.contains(&run), "{run} admitted twice");
                seen.push(run);
                holders.insert(run, (key, worker));
            }
        }
        for key in ["hot", "cold"] {
            let held = holders.values().filter(|h| h.0 == key).count();
            assert_eq!(held, 3, "round {round}: key {key} holds its limit, no more");
            let behind = waiting[key]
                .iter()
                .find(|run| !seen.contains(run))
                .expect("runs still wait");
            let gate = store
                .flow_of(*behind)
                .await
                .expect("flow")
                .gate
                .expect("gate");
            assert_eq!(
                gate.usage.in_use, 3,
                "round {round}: the store counts {key}'s holders"
            );
        }
        // Two of hot's holders and one of cold's finish: that many start next round.
        let mut done: Vec<(RunId, (&str, usize))> =
            holders.iter().map(|(run, h)| (*run, *h)).collect();
        done.sort();
        let hot: Vec<_> = done
            .iter()
            .filter(|d| d.1 .0 == "hot")
            .take(2)
            .copied()
            .collect();
        let cold: Vec<_> = done
            .iter()
            .filter(|d| d.1 .0 == "cold")
            .take(1)
            .copied()
            .collect();
        for (run, (_, worker)) in hot.into_iter().chain(cold) {
            finish(&*store, run, &format!("w{worker}")).await;
            holders.remove(&run);
        }
    }
}

fn slot<'a>(run: RunId, holder: &'a str, fence: Fence<'a>, key: &'a str) -> SlotRequest<'a> {
    SlotRequest {
        run,
        holder,
        fence,
        concurrency: Some(SlotLimit {
            name: "charge.pay",
            scope: "",
            key,
            limit: 1,
        }),
        rate: None,
        now: wall_clock(),
    }
}

async fn owned(store: &dyn Store, owner: &str, lease_ms: u64) -> (RunId, u64) {
    let run = create(store, WORKFLOW, None).await.id();
    let lease = store
        .claim(Claim {
            run: Some(run),
            ..claim(claimant(owner, lease_ms), &[WORKFLOW])
        })
        .await
        .expect("claim")[0];
    (run, lease.token)
}

pub(super) async fn slots_hold_their_limit_under_current_leases(store: Arc<dyn Store>) {
    let (a, ta) = owned(&*store, "a", 300).await;
    let (b, tb) = owned(&*store, "b", 60_000).await;
    let fa = Fence {
        owner: "a",
        token: ta,
    };
    let fb = Fence {
        owner: "b",
        token: tb,
    };
    let got = store
        .acquire_slot(slot(a, "pay", fa, "psp"))
        .await
        .expect("acquire");
    assert_eq!(got, Acquired::Granted);
    match store
        .acquire_slot(slot(b, "pay", fb, "psp"))
        .await
        .expect("acquire")
    {
        Acquired::Busy(usage) => {
            assert_eq!(usage.in_use, 1);
            assert_eq!(usage.holders, [(a, "pay".to_owned())]);
        }
        other => panic!("the key's one slot is held: {other:?}"),
    }
    let flow = store.flow_of(b).await.expect("flow");
    assert_eq!(flow.waits.len(), 1, "the waiting step is recorded");
    assert_eq!(flow.waits[0].usage.holders[0].0, a);
    assert_eq!(store.flow_of(a).await.expect("flow").held.len(), 1);
    // A fence that is not the run's lease takes nothing.
    let stale = Fence {
        owner: "a",
        token: ta + 7,
    };
    let refused = store.acquire_slot(slot(a, "other", stale, "x")).await;
    assert!(
        matches!(refused, Err(StoreError::Fenced { .. })),
        "{refused:?}"
    );
    // a's lease lapses and another worker takes its run over: a's slot counts no more.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let taken = store
        .claim(claim(claimant("c", 60_000), &[WORKFLOW]))
        .await
        .expect("claim");
    assert!(taken.iter().any(|l| l.run == a), "{taken:?}");
    let got = store
        .acquire_slot(slot(b, "pay", fb, "psp"))
        .await
        .expect("acquire");
    assert_eq!(got, Acquired::Granted, "a fenced worker holds no slot");
    assert!(store.flow_of(b).await.expect("flow").waits.is_empty());
    store.release_slot(b, "pay").await.expect("release");
    let tc = taken
        .iter()
        .find(|l| l.run == a)
        .map(|l| l.token)
        .unwrap_or(0);
    let fc = Fence {
        owner: "c",
        token: tc,
    };
    let got = store
        .acquire_slot(slot(a, "pay", fc, "psp"))
        .await
        .expect("acquire");
    assert_eq!(got, Acquired::Granted, "a released slot is free");
}

pub(super) async fn rate_tokens_and_slots_are_taken_together(store: Arc<dyn Store>) {
    let (a, ta) = owned(&*store, "a", 60_000).await;
    let (b, tb) = owned(&*store, "b", 60_000).await;
    let rate = RateLimit {
        name: "charge.pay.rate",
        scope: "",
        key: "merchant-1",
        limit: 1,
        per_ms: 3_600_000,
        burst: 1,
    };
    let with_rate = |run, fence, key| SlotRequest {
        rate: Some(rate),
        ..slot(run, "pay", fence, key)
    };
    let fa = Fence {
        owner: "a",
        token: ta,
    };
    let fb = Fence {
        owner: "b",
        token: tb,
    };
    assert_eq!(
        store
            .acquire_slot(with_rate(a, fa, "k1"))
            .await
            .expect("acquire"),
        Acquired::Granted
    );
    match store
        .acquire_slot(with_rate(b, fb, "k2"))
        .await
        .expect("acquire")
    {
        Acquired::Throttled { wait_ms } => assert!(wait_ms > 0),
        other => panic!("the bucket is empty: {other:?}"),
    }
    // The throttled request took no slot of k2: another run takes it at once.
    assert_eq!(
        store
            .acquire_slot(slot(a, "other", fa, "k2"))
            .await
            .expect("acquire"),
        Acquired::Granted
    );
    let flow = store.flow_of(b).await.expect("flow");
    assert_eq!(flow.waits.len(), 1);
    assert_eq!(flow.waits[0].kind, "rate");
    assert!(
        flow.held.is_empty(),
        "a step waiting for a token holds no slot"
    );
}

pub(super) async fn rate_buckets_are_listed_by_scope_and_key(store: Arc<dyn Store>) {
    assert!(store.rate_buckets(10).await.expect("buckets").is_empty());
    let (run, token) = owned(&*store, "a", 60_000).await;
    let fence = Fence { owner: "a", token };
    // An hour a token, two at most: the buckets barely refill while the check runs.
    let path = |key| RateLimit {
        name: "charge.pay.rate",
        scope: "charge.pay.rate",
        key,
        limit: 1,
        per_ms: 3_600_000,
        burst: 2,
    };
    let shared = RateLimit {
        name: "refund.pay.rate",
        scope: "",
        key: "psp",
        ..path("psp")
    };
    for (holder, rate) in [
        ("pay-1", path("k2")),
        ("pay-2", path("k1")),
        ("pay-3", path("k2")),
        ("pay-4", shared),
    ] {
        let request = SlotRequest {
            run,
            holder,
            fence,
            concurrency: None,
            rate: Some(rate),
            now: wall_clock(),
        };
        assert_eq!(
            store.acquire_slot(request).await.expect("acquire"),
            Acquired::Granted
        );
    }
    let buckets = store.rate_buckets(10).await.expect("buckets");
    let keys: Vec<(&str, &str)> = buckets
        .iter()
        .map(|b| (b.scope.as_str(), b.key.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("", "psp"),
            ("charge.pay.rate", "k1"),
            ("charge.pay.rate", "k2")
        ]
    );
    // What is left in each, as of its last take: one token, one, none.
    let left: Vec<u64> = buckets
        .iter()
        .map(|b| b.bucket.level(&path("k1"), b.bucket.at).0)
        .collect();
    assert_eq!(left, [1, 1, 0]);
    assert!(buckets.iter().all(|b| b.bucket.at > 0));
    let first = store.rate_buckets(2).await.expect("buckets");
    assert_eq!(first, buckets[..2]);
}
