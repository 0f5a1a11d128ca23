//! Map steps, child workflows and events, run by the engine under paused time: partial
//! failure and skip, the concurrency bound, per-item retries and keys, compensation per
//! item; a child's failure, cancellation and outputs; events sent before the wait, twice,
//! with the wrong type, to a finished run, and waits that time out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use workflow_core::clock::TokioClock;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::testing;
use workflow_core::EventError;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    sku: String,
    quantity: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    sku: String,
    key: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Payment {
    cents: u64,
}

#[derive(Default)]
pub struct Shop {
    released: Mutex<Vec<String>>,
    flaky_once: Mutex<Vec<String>>,
    shipped: AtomicUsize,
    ship_fails: std::sync::atomic::AtomicBool,
}

mod stock {
    use super::*;

    pub async fn reserve(shop: &Shop, ctx: &StepContext, line: Line) -> Result<Hold, StepError> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if line.sku == "broken" {
            return Err(StepError::validation("no such sku"));
        }
        if line.sku == "flaky" {
            let mut seen = shop.flaky_once.lock().unwrap();
            if !seen.contains(&ctx.idempotency_key) {
                seen.push(ctx.idempotency_key.clone());
                return Err(StepError::unavailable("stock service hiccup"));
            }
        }
        Ok(Hold {
            sku: line.sku,
            key: ctx.idempotency_key.clone(),
        })
    }

    pub async fn release(shop: &Shop, hold: Hold) -> Result<(), StepError> {
        shop.released.lock().unwrap().push(hold.sku);
        Ok(())
    }

    pub async fn fail(_shop: &Shop) -> Result<u32, StepError> {
        Err(StepError::validation("the order is void"))
    }
}

workflow! {
    /// Reserves every line (four at a time), or fails as a whole.
    pub workflow Reserve(lines: Vec<Line>, void: bool) env Shop {
        step holds -> Hold {
            for_each: line in lines,
            action: stock::reserve(env, ctx, line),
            compensate: stock::release(env, holds),
            concurrency: 2,
            retry: { max_attempts: 2, backoff: fixed, initial: 5s, max: 5s, jitter: none },
        }
        step check -> u32 {
            action: stock::fail(env),
            depends_on: [holds],
            condition: *void,
        }
    }
}

workflow! {
    /// Reserves what it can: a failed line is `None`.
    pub workflow ReserveSome(lines: Vec<Line>) env Shop {
        step holds -> Hold {
            for_each: line in lines,
            action: stock::reserve(env, ctx, line),
            on_item_failure: skip,
        }
    }
}

mod shipping {
    use super::*;

    pub async fn ship(shop: &Shop, holds: Vec<Hold>) -> Result<u32, StepError> {
        shop.shipped.fetch_add(1, Ordering::SeqCst);
        if shop.ship_fails.load(Ordering::SeqCst) {
            return Err(StepError::unauthorized("the carrier refused the parcel"));
        }
        Ok(holds.len() as u32)
    }
}

workflow! {
    /// Ships reserved lines, after a person signs the parcel off.
    pub workflow Ship(holds: Vec<Hold>) env Shop {
        human sign_off -> Approval { assignee: "warehouse", timeout: 1h, on_timeout: approve }
        step parcel -> u32 { action: shipping::ship(env, holds), depends_on: [sign_off] }
    }
}

workflow! {
    /// Reserves, then ships in a child run, then waits for the payment.
    pub workflow Order(lines: Vec<Line>) env Shop {
        step holds -> Hold {
            for_each: line in lines,
            action: stock::reserve(env, ctx, line),
        }
        step ship -> ShipOutputs {
            workflow: Ship(holds: holds),
        }
        event payment -> Payment {
            depends_on: [ship],
            timeout: 2h,
            on_timeout: abort,
        }
    }
}

workflow! {
    /// Waits for a payment that may never come.
    pub workflow Tip(amount: u64) env Shop {
        event tip -> Payment { timeout: 1h, on_timeout: continue }
        event payment -> Payment { timeout: 1d, on_timeout: abort }
    }
}

fn line(sku: &str) -> Line {
    Line {
        sku: sku.to_owned(),
        quantity: 1,
    }
}

fn engine(store: &Arc<dyn Store>) -> Engine {
    Engine::builder()
        .shared_store(store.clone())
        .clock(TokioClock::starting_at(0))
        .seed(7)
        .build()
}

async fn timeline<W: Workflow>(engine: &Engine, run: RunId) -> Vec<String> {
    testing::timeline(W::spec(), &engine.events(run).await.unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_map_runs_items_in_order_two_at_a_time_with_keys_and_retries_of_their_own() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Reserve>(Shop::default()).unwrap();
    let lines = vec![line("a"), line("flaky"), line("c"), line("d"), line("e")];
    let run = engine
        .start::<Reserve>(ReserveInput {
            lines: lines.clone(),
            void: false,
        })
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    let skus: Vec<&str> = outputs.holds.iter().map(|h| h.sku.as_str()).collect();
    assert_eq!(skus, ["a", "flaky", "c", "d", "e"], "in the source's order");
    let id = run.id().0;
    let keys: Vec<String> = outputs.holds.iter().map(|h| h.key.clone()).collect();
    assert_eq!(
        keys,
        (0..5)
            .map(|i| format!("Reserve/{id}/holds/{i}"))
            .collect::<Vec<_>>(),
        "each item keyed on its own"
    );
    let timeline = timeline::<Reserve>(&engine, run.id()).await;
    assert!(
        timeline.contains(&"map_started holds 5".to_owned()),
        "{timeline:?}"
    );
    assert!(timeline.contains(&"item_failed holds[1] #1 unavailable".to_owned()));
    assert!(
        timeline.contains(&"item_started holds[1] #2".to_owned()),
        "retried alone"
    );
    assert_eq!(
        timeline
            .iter()
            .filter(|l| l.starts_with("item_succeeded"))
            .count(),
        5
    );
    let events = engine.events(run.id()).await.unwrap();
    let retry = events
        .iter()
        .find(|e| {
            matches!(
                e,
                Event::ItemStarted {
                    item: 1,
                    attempt: 2,
                    ..
                }
            )
        })
        .unwrap();
    let failed = events
        .iter()
        .find(|e| matches!(e, Event::ItemFailed { item: 1, .. }))
        .unwrap();
    assert_eq!(retry.at() - failed.at(), 5_000, "the item's own backoff");
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_bound_holds() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    let shop = Shop::default();
    engine.register::<Reserve>(shop).unwrap();
    let lines: Vec<Line> = (0..9).map(|i| line(&format!("sku-{i}"))).collect();
    let run = engine
        .start::<Reserve>(ReserveInput { lines, void: false })
        .await
        .unwrap();
    run.outputs().await.unwrap();
    let events = engine.events(run.id()).await.unwrap();
    // Replay the journal: never more than two items between their start and their end.
    let (mut now, mut most) = (0i32, 0i32);
    for event in &events {
        match event {
            Event::ItemStarted { .. } => now += 1,
            Event::ItemSucceeded { .. } | Event::ItemFailed { .. } => now -= 1,
            _ => {}
        }
        most = most.max(now);
    }
    assert_eq!(most, 2, "concurrency: 2");
}

#[tokio::test(start_paused = true)]
async fn a_failed_item_fails_the_map_and_completed_items_are_compensated_in_reverse() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Reserve>(Shop::default()).unwrap();
    let run = engine
        .start::<Reserve>(ReserveInput {
            lines: vec![line("a"), line("b"), line("broken"), line("d"), line("e")],
            void: false,
        })
        .await
        .unwrap();
    let Err(error) = run.outputs().await else {
        panic!("a broken line fails the map");
    };
    let RunError::Failed { step, error, .. } = error else {
        panic!("{error:?}");
    };
    assert_eq!(step, "holds");
    assert!(
        error.message().contains("item 2 failed: no such sku"),
        "{error}"
    );
    let timeline = timeline::<Reserve>(&engine, run.id()).await;
    let undone: Vec<&String> = timeline
        .iter()
        .filter(|l| l.starts_with("compensated"))
        .collect();
    // `d` was in flight beside the broken line and completed; `e` never started.
    assert_eq!(
        undone,
        [
            "compensated holds[3]",
            "compensated holds[1]",
            "compensated holds[0]"
        ],
        "only completed items, newest first: {timeline:?}"
    );
    assert!(
        !timeline
            .iter()
            .any(|l| l.starts_with("item_started holds[4]")),
        "no new item after a failure: {timeline:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn with_skip_a_failed_item_is_none_and_the_rest_go_on() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<ReserveSome>(Shop::default()).unwrap();
    let run = engine
        .start::<ReserveSome>(ReserveSomeInput {
            lines: vec![line("a"), line("broken"), line("c")],
        })
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    let skus: Vec<Option<&str>> = outputs
        .holds
        .iter()
        .map(|h| h.as_ref().map(|h| h.sku.as_str()))
        .collect();
    assert_eq!(skus, [Some("a"), None, Some("c")]);
}

#[tokio::test(start_paused = true)]
async fn an_empty_map_succeeds_with_no_items() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Reserve>(Shop::default()).unwrap();
    let run = engine
        .start::<Reserve>(ReserveInput {
            lines: vec![],
            void: false,
        })
        .await
        .unwrap();
    assert!(run.outputs().await.unwrap().holds.is_empty());
}

/// An engine with the order, its child workflow and a shop.
fn orders(store: &Arc<dyn Store>, fails: bool) -> Engine {
    let engine = engine(store);
    engine.register::<Order>(Shop::default()).unwrap();
    let shop = Shop::default();
    shop.ship_fails.store(fails, Ordering::SeqCst);
    engine.register::<Ship>(shop).unwrap();
    engine
}

#[tokio::test(start_paused = true)]
async fn a_child_run_is_linked_to_its_parent_and_its_outputs_are_the_steps() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = orders(&store, false);
    let run = engine
        .start::<Order>(OrderInput {
            lines: vec![line("a"), line("b")],
        })
        .await
        .unwrap();
    // Sent before the run waits: kept in its inbox.
    run.payment()
        .send("pay-1", Payment { cents: 900 })
        .await
        .unwrap();
    let outputs = tokio::time::timeout(Duration::from_secs(7200), run.outputs())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outputs.ship.parcel, 2);
    assert!(
        outputs.ship.sign_off.approved,
        "on_timeout: approve, in the child"
    );
    assert_eq!(outputs.payment, Payment { cents: 900 });
    let events = engine.events(run.id()).await.unwrap();
    let child = events
        .iter()
        .find_map(|e| match e {
            Event::ChildStarted { child, .. } => Some(*child),
            _ => None,
        })
        .expect("the child is journaled in the parent");
    let record = store.load(child).await.unwrap().unwrap().record;
    assert_eq!(record.parent, Some(run.id()));
    assert_eq!(record.workflow, "Ship");
    assert_eq!(record.status, RunStatus::Completed);
    let timeline = timeline::<Order>(&engine, run.id()).await;
    assert!(
        timeline.contains(&"event_buffered payment pay-1".to_owned()),
        "{timeline:?}"
    );
    assert!(timeline.contains(&"event_received payment pay-1".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_childs_failure_is_its_steps_failure() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = orders(&store, true);
    let run = engine
        .start::<Order>(OrderInput {
            lines: vec![line("a")],
        })
        .await
        .unwrap();
    let Err(RunError::Failed { step, error, .. }) =
        tokio::time::timeout(Duration::from_secs(7200), run.outputs())
            .await
            .unwrap()
    else {
        panic!("the child failed");
    };
    assert_eq!(step, "ship");
    assert_eq!(error.kind(), ErrorKind::Unauthorized);
    assert!(error.message().contains("the carrier refused"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_parent_cancels_its_child() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = orders(&store, false);
    let run = engine
        .start::<Order>(OrderInput {
            lines: vec![line("a")],
        })
        .await
        .unwrap();
    // The child waits on a person.
    let child = loop {
        let events = engine.events(run.id()).await.unwrap();
        if let Some(child) = events.iter().find_map(|e| match e {
            Event::ChildStarted { child, .. } => Some(*child),
            _ => None,
        }) {
            break child;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    testing::wait_for_task(&engine, child, "sign_off", Duration::from_secs(60))
        .await
        .unwrap();
    run.cancel("ops").await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    let child_status = loop {
        let status = store.load(child).await.unwrap().unwrap().record.status;
        if status.is_finished() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(child_status, RunStatus::Cancelled);
    let timeline = timeline::<Order>(&engine, run.id()).await;
    assert!(
        timeline
            .iter()
            .any(|l| l.starts_with("child_cancelled ship")),
        "{timeline:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_event_is_taken_once_checked_for_type_and_refused_when_finished() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Tip>(Shop::default()).unwrap();
    let run = engine.start::<Tip>(TipInput { amount: 5 }).await.unwrap();
    let wrong = engine
        .send_event(run.id(), "payment", "p-0", json!({ "cents": "lots" }))
        .await;
    assert!(
        matches!(wrong, Err(EventError::WrongType { .. })),
        "{wrong:?}"
    );
    let unknown = engine
        .send_event(run.id(), "refund", "r-1", json!({ "cents": 1 }))
        .await;
    assert!(
        matches!(unknown, Err(EventError::UnknownEvent { .. })),
        "{unknown:?}"
    );
    run.payment()
        .send("p-1", Payment { cents: 100 })
        .await
        .unwrap();
    run.payment()
        .send("p-1", Payment { cents: 100 })
        .await
        .expect("the same event again is accepted, and taken once");
    let other = run.payment().send("p-2", Payment { cents: 200 }).await;
    assert!(
        matches!(other, Err(EventError::NotWaiting { .. })),
        "{other:?}"
    );
    let outputs = tokio::time::timeout(Duration::from_secs(86_400 * 2), run.outputs())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outputs.payment, Payment { cents: 100 });
    assert_eq!(outputs.tip, None, "no tip in the hour: continue");
    let events = engine.events(run.id()).await.unwrap();
    let received = events
        .iter()
        .filter(|e| matches!(e, Event::EventReceived { .. }))
        .count();
    assert_eq!(received, 1);
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::EventExpired { step: 0, .. })));
    let late = run.tip().send("t-1", Payment { cents: 1 }).await;
    assert!(matches!(late, Err(EventError::Finished(_))), "{late:?}");
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_times_out_under_abort_fails_the_run() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Tip>(Shop::default()).unwrap();
    let run = engine.start::<Tip>(TipInput { amount: 5 }).await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(86_400 * 2), run.outputs())
        .await
        .unwrap();
    let Err(RunError::Failed { step, error, .. }) = result else {
        panic!("the payment never came");
    };
    assert_eq!(step, "payment");
    assert_eq!(error.kind(), ErrorKind::Timeout);
    let events = engine.events(run.id()).await.unwrap();
    let awaited = events
        .iter()
        .find(|e| matches!(e, Event::EventAwaited { step: 1, .. }))
        .unwrap();
    let expired = events
        .iter()
        .find(|e| matches!(e, Event::EventExpired { step: 1, .. }))
        .unwrap();
    assert_eq!(
        expired.at() - awaited.at(),
        86_400_000,
        "a durable one-day timer"
    );
}

mod notify {
    use super::*;

    pub async fn send(shop: &Shop, ctx: &StepContext, line: Line) -> Result<String, StepError> {
        shop.released.lock().unwrap().push(line.sku.clone());
        Ok(ctx.idempotency_key.clone())
    }
}

workflow! {
    /// Tells every line's supplier: an external effect per item.
    pub workflow Notify(lines: Vec<Line>) env Shop {
        step told -> String {
            for_each: line in lines,
            action: notify::send(env, ctx, line),
            effect: external,
            idempotent: true,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_proposes_each_items_effect_and_runs_none() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Notify>(Shop::default()).unwrap();
    let run = engine
        .start_with::<Notify>(
            NotifyInput {
                lines: vec![line("a"), line("b")],
            },
            StartOptions {
                dry_run: true,
                ..StartOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Absent { .. })));
    let proposals = run.proposals().await.unwrap();
    assert_eq!(proposals.len(), 2, "{proposals:?}");
    assert!(proposals.iter().all(|(step, _)| step == "told"));
    assert_eq!(proposals[0].1["line"]["sku"], "a", "{proposals:?}");
    assert_eq!(proposals[1].1["line"]["sku"], "b");
    let timeline = timeline::<Notify>(&engine, run.id()).await;
    assert!(
        !timeline.iter().any(|l| l.starts_with("item_started")),
        "{timeline:?}"
    );
}
