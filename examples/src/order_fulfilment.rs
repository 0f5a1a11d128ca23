//! An order, fulfilled: one stock reservation per order line (a map step, four lines at
//! a time, each reservation keyed on its own), a shipment run as a child workflow of its
//! own, and a payment confirmation sent into the run from outside (an event the run waits
//! for, kept if it arrives early). On a SQLite file, like a real deployment.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow::prelude::*;

use workflow::journal::Event;

use crate::{journal, Log};

/// One line of an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// What.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

/// An order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// Its id.
    pub id: String,
    /// Its lines.
    pub lines: Vec<Line>,
}

/// Stock held for one line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    /// What.
    pub sku: String,
    /// How many.
    pub quantity: u32,
    /// The warehouse's reference: the reservation's idempotency key.
    pub reference: String,
}

/// A packed parcel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parcel {
    /// The tracking number.
    pub tracking: String,
    /// Items in it.
    pub items: u32,
}

/// The payment provider's confirmation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaymentConfirmed {
    /// The amount paid, in cents.
    pub amount_cents: u64,
}

/// The (simulated) warehouse: it records each reservation by its key, so a repeated
/// reservation with the same key holds nothing twice.
#[derive(Debug, Default)]
pub struct Warehouse {
    reservations: Mutex<Vec<String>>,
}

impl Warehouse {
    /// The keys reserved, in the order they were reserved.
    pub fn reservations(&self) -> Vec<String> {
        self.reservations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

mod stock {
    use super::*;

    pub(super) async fn reserve(
        warehouse: &Warehouse,
        ctx: &StepContext,
        line: Line,
    ) -> Result<Hold, StepError> {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let mut reserved = warehouse
            .reservations
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !reserved.contains(&ctx.idempotency_key) {
            reserved.push(ctx.idempotency_key.clone());
        }
        Ok(Hold {
            sku: line.sku,
            quantity: line.quantity,
            reference: ctx.idempotency_key.clone(),
        })
    }
}

mod shipping {
    use super::*;

    pub(super) async fn pack(order: Order, holds: Vec<Hold>) -> Result<Parcel, StepError> {
        tokio::time::sleep(Duration::from_millis(60)).await;
        Ok(Parcel {
            tracking: format!("TRK-{}", order.id),
            items: holds.iter().map(|h| h.quantity).sum(),
        })
    }
}

workflow! {
    /// Packs and ships an order whose lines are reserved.
    pub workflow Shipping(order: Order, holds: Vec<Hold>) env Warehouse {
        step pack -> Parcel {
            action: shipping::pack(order, holds),
        }
    }
}

workflow! {
    /// Fulfils an order: reserve every line, ship, and wait for the payment.
    pub workflow Fulfil(order: Order) env Warehouse {
        step reserve_lines -> Hold {
            for_each: line in order.lines,
            action: stock::reserve(env, ctx, line),
            concurrency: 4,
            retry: { max_attempts: 3 },
            on_item_failure: abort,
        }
        step ship -> ShippingOutputs {
            workflow: Shipping(order: order, holds: reserve_lines),
        }
        event payment -> PaymentConfirmed {
            depends_on: [reserve_lines],
            timeout: 1h,
            on_timeout: abort,
        }
    }
}

/// What the example did.
pub struct Summary {
    /// The run.
    pub run: RunId,
    /// Its outputs.
    pub outputs: FulfilOutputs,
    /// The reservations the warehouse holds, by key.
    pub reservations: Vec<String>,
    /// The store file.
    pub store: PathBuf,
}

/// An order of `lines` lines.
pub fn order(lines: usize) -> Order {
    Order {
        id: "A-1001".into(),
        lines: (0..lines)
            .map(|i| Line {
                sku: format!("SKU-{i:02}"),
                quantity: 1 + (i as u32 % 3),
            })
            .collect(),
    }
}

/// Runs the example on the SQLite file at `store`: the payment is confirmed as soon as the
/// run starts, before the run waits for it, and is kept in the run's inbox until it does.
pub async fn run(store: PathBuf, lines: usize, log: &Log) -> Result<Summary, Box<dyn Error>> {
    let engine = Engine::builder().store(SqliteStore::open(&store)?).build();
    engine.register::<Fulfil>(Warehouse::default())?;
    engine.register::<Shipping>(Warehouse::default())?;
    let order = order(lines);
    log.line(format!(
        "order {} with {} lines, on {}",
        order.id,
        order.lines.len(),
        store.display()
    ));
    let run = engine
        .start_with::<Fulfil>(
            FulfilInput {
                order: order.clone(),
            },
            StartOptions::key(order.id.clone()),
        )
        .await?;
    log.line(format!(
        "payment provider: confirmation for {} sent to {} (event `payment`)",
        order.id,
        run.id()
    ));
    let confirmation = PaymentConfirmed {
        amount_cents: 12_900,
    };
    match run.payment().send("pay-A-1001", confirmation).await {
        // Sent again after a restart: the same event id is taken once.
        Ok(()) => {}
        // The order was fulfilled by an earlier run of the example.
        Err(workflow::EventError::Finished(_)) => {
            log.line(format!("{} was fulfilled before", run.id()));
        }
        Err(error) => return Err(error.into()),
    }
    let outputs = run.outputs().await?;
    let events = journal(&engine, run.id()).await?;
    let start = events.first().map_or(0, Event::at);
    for event in &events {
        if let Some(line) = describe(event) {
            log.line(format!("  [+{:>4} ms] {line}", event.at() - start));
        }
    }
    log.line(format!(
        "{} finished: {} holds, parcel {} ({} items), paid {} cents; {} journal entries",
        run.id(),
        outputs.reserve_lines.len(),
        outputs.ship.pack.tracking,
        outputs.ship.pack.items,
        outputs.payment.amount_cents,
        events.len()
    ));
    let reservations = outputs
        .reserve_lines
        .iter()
        .map(|hold| hold.reference.clone())
        .collect();
    Ok(Summary {
        run: run.id(),
        outputs,
        reservations,
        store,
    })
}

impl std::fmt::Debug for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summary")
            .field("run", &self.run)
            .field("reservations", &self.reservations)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// A journal entry of the order's run, for people.
fn describe(event: &Event) -> Option<String> {
    let spec = Fulfil::spec();
    let step = |index: &usize| spec.steps.get(*index).map_or("?", |s| s.id.as_str());
    Some(match event {
        Event::RunStarted { .. } => "run started".to_owned(),
        Event::MapStarted { step: s, count, .. } => {
            format!("{}: {count} items, 4 at a time", step(s))
        }
        Event::ItemStarted { step: s, item, .. } => format!("{}[{item}]: started", step(s)),
        Event::ItemSucceeded { step: s, item, .. } => format!("{}[{item}]: held", step(s)),
        Event::StepSucceeded { step: s, .. } => format!("{}: done", step(s)),
        Event::ChildStarted { step: s, child, .. } => {
            format!("{}: child run {child} (Shipping) started", step(s))
        }
        Event::EventBuffered {
            step: s, event_id, ..
        } => format!(
            "{}: event {event_id} arrived early, kept until the run waits for it",
            step(s)
        ),
        Event::EventReceived {
            step: s, event_id, ..
        } => {
            format!("{}: event {event_id} taken", step(s))
        }
        _ => return None,
    })
}
