//! What a run does before anything runs: the machine's plan (the events it decides and
//! the work they start), the state a driver starts from, and the creation of a run, whose
//! first starts are journaled in the same transaction as the run itself.

use std::sync::Arc;

use super::registry::{Shared, WorkflowHooks};
use super::Engine;
use crate::engine::workflow::Workflow;
use crate::error::{RunError, RunId};
use crate::journal::{Event, Timestamp, Value};
use crate::machine::{Command, Machine, Status};
use crate::store::{Created, NewRun};
use crate::trace::TraceParent;

/// Work to start once the commit that journals its start is durable.
pub(super) enum Start {
    Attempt {
        step: usize,
        item: Option<usize>,
        attempt: u32,
        reconcile: bool,
    },
    Compensation {
        step: usize,
        item: Option<usize>,
    },
    CancelChild {
        child: RunId,
    },
    /// The run was cancelled: drop the attempt in flight; with `reconcile`, ask the step's
    /// reconcile function whether the effect happened.
    Stop {
        step: usize,
        item: Option<usize>,
        attempt: u32,
        reconcile: bool,
    },
}

/// Asks the machine until it has nothing more to decide at `now`, applying each event it
/// decides (and the start of each attempt and compensation) as it goes: the events are
/// pushed to `events`, the work they start to `starts`. Returns the run's end, when it
/// reached one. `commands` is a buffer for the machine's answers, kept by the caller.
pub(super) fn plan<W: Workflow>(
    machine: &mut Machine<'static>,
    input: &W::Input,
    now: Timestamp,
    (events, starts): (&mut Vec<Event>, &mut Vec<Start>),
    commands: &mut Vec<Command>,
) -> Option<Status> {
    loop {
        machine.next_into(now, &WorkflowHooks::<W> { input }, commands);
        if commands.is_empty() {
            return None;
        }
        for command in commands.drain(..) {
            let event = match command {
                Command::Journal(event) => event,
                Command::Attempt {
                    step,
                    item,
                    attempt,
                    reconcile,
                } => {
                    starts.push(Start::Attempt {
                        step,
                        item,
                        attempt,
                        reconcile,
                    });
                    match item {
                        Some(item) => Event::ItemStarted {
                            step,
                            item,
                            attempt,
                            at: now,
                        },
                        None => Event::AttemptStarted {
                            step,
                            attempt,
                            at: now,
                        },
                    }
                }
                Command::Compensate { step, item } => {
                    starts.push(Start::Compensation { step, item });
                    Event::CompensationStarted {
                        step,
                        item,
                        at: now,
                    }
                }
                Command::CancelChild { step, child } => {
                    starts.push(Start::CancelChild { child });
                    Event::ChildCancelled {
                        step,
                        child,
                        at: now,
                    }
                }
                Command::Stop {
                    step,
                    item,
                    attempt,
                    settle,
                } => {
                    starts.push(Start::Stop {
                        step,
                        item,
                        attempt,
                        reconcile: settle.is_none(),
                    });
                    settle.unwrap_or(Event::AttemptStopped {
                        step,
                        item,
                        attempt,
                        at: now,
                    })
                }
                Command::Finish(status) => return Some(status),
            };
            machine.apply(&event);
            events.push(event);
        }
    }
}

/// The state a driver starts from.
pub(super) struct Launch<W: Workflow> {
    pub(super) machine: Machine<'static>,
    pub(super) input: Arc<W::Input>,
    /// The journal's committed length.
    pub(super) seq: u64,
    /// Journaled work to start now.
    pub(super) starts: Vec<Start>,
    pub(super) trace_id: String,
    /// The span the run's spans are children of, when journaled.
    pub(super) parent_span: Option<String>,
    /// The run was created just now: its inbox is looked at by its first commit.
    pub(super) fresh: bool,
}

impl<W: Workflow> Launch<W> {
    /// A run resumed from its journal. Fails (with the journal's length, to park the run)
    /// when its inputs no longer decode.
    pub(super) fn replay(
        engine: &Engine,
        run: RunId,
        events: &[Event],
    ) -> Result<Self, (RunError, u64)> {
        let seq = events.len() as u64;
        let machine = Machine::replay(W::spec(), events)
            .with_max_in_flight(engine.inner.max_in_flight)
            .with_fence_margin(engine.inner.lease.retry_wait_ms())
            .with_cancel_grace(engine.inner.cancel_grace_ms);
        let input = decode_input::<W>(run, machine.input().cloned()).map_err(|e| (e, seq))?;
        Ok(Launch {
            machine,
            input: Arc::new(input),
            seq,
            starts: Vec::new(),
            trace_id: trace_id(events),
            parent_span: parent_span(events),
            fresh: false,
        })
    }
}

pub(super) fn decode_input<W: Workflow>(
    run: RunId,
    input: Option<Value>,
) -> Result<W::Input, RunError> {
    serde_json::from_value(input.unwrap_or(Value::Null)).map_err(|error| RunError::Decode {
        run,
        step: "<input>".into(),
        message: error.to_string(),
    })
}

fn trace_id(events: &[Event]) -> String {
    match events.first() {
        Some(Event::RunStarted { trace_id, .. }) => trace_id.clone(),
        _ => String::new(),
    }
}

fn parent_span(events: &[Event]) -> Option<String> {
    match events.first() {
        Some(Event::RunStarted { parent_span, .. }) => parent_span.clone(),
        _ => None,
    }
}

/// How a run is started.
pub(super) struct Options<'a> {
    pub(super) idempotency_key: Option<&'a str>,
    pub(super) dry_run: bool,
    pub(super) deadline: Option<Timestamp>,
    /// Who starts the run (journaled as `Initiated`), when known.
    pub(super) initiator: Option<&'a str>,
    /// The run whose child step starts this one.
    pub(super) parent: Option<RunId>,
    /// The trace context the run continues; `None` starts a trace.
    pub(super) trace: Option<TraceParent>,
}

/// A run ready to be created: what its creation writes, and what its driver starts from
/// once it exists.
pub(super) struct Prepared {
    workflow: &'static str,
    fingerprint: &'static str,
    events: Vec<Event>,
    search: Vec<(String, String)>,
    at: Timestamp,
    launch: LaunchFn,
}

/// Starts driving a created run (under its token) from its first entries.
type LaunchFn = Box<dyn FnOnce(&Engine, RunId, u64, Vec<Event>) + Send>;

impl Prepared {
    /// The run to create, owned by `engine`.
    pub(super) fn new_run<'a>(
        &'a self,
        engine: &'a Engine,
        idempotency_key: Option<&'a str>,
        parent: Option<RunId>,
    ) -> NewRun<'a> {
        NewRun {
            workflow: self.workflow,
            fingerprint: self.fingerprint,
            idempotency_key,
            events: &self.events,
            parent,
            owner: Some(engine.claimant()),
            supersedes: None,
            at: self.at,
            search: &self.search,
        }
    }

    /// Launches the run its creation (sent at `sent`, by the lease clock) created; a run
    /// its idempotency key named is driven by whoever created it.
    pub(super) fn launch(self, engine: &Engine, created: Created, sent: u64) {
        let Created::New { run, token } = created else {
            return;
        };
        engine.inner.lease.claimed(run, sent);
        tracing::info!(workflow = self.workflow, run = %run, "run started");
        (self.launch)(engine, run, token, self.events);
    }
}

/// Plans a run of `W` owned by this engine: its `RunStarted` event (a fresh jitter seed,
/// the trace it continues or a trace id derived from the seed) and whatever the machine
/// starts with, to be journaled in the transaction that creates it.
pub(super) fn prepare<W: Workflow>(
    engine: &Engine,
    shared: Shared<W>,
    input: Value,
    options: &Options<'_>,
) -> Result<Prepared, RunError> {
    let typed = decode_input::<W>(RunId(0), Some(input.clone()))?;
    let now = engine.now();
    let seed = engine.next_seed();
    let (trace_id, parent_span) = match &options.trace {
        Some(trace) => (trace.trace_id.clone(), Some(trace.span_id.clone())),
        None => (crate::trace::generate(seed), None),
    };
    let started = Event::RunStarted {
        workflow: W::NAME.to_owned(),
        fingerprint: W::FINGERPRINT.to_owned(),
        input,
        seed,
        trace_id: trace_id.clone(),
        parent_span: parent_span.clone(),
        dry_run: options.dry_run,
        deadline: options.deadline,
        at: now,
    };
    let mut machine = Machine::new(W::spec())
        .with_max_in_flight(engine.inner.max_in_flight)
        .with_fence_margin(engine.inner.lease.retry_wait_ms())
        .with_cancel_grace(engine.inner.cancel_grace_ms);
    machine.apply(&started);
    let mut events = vec![started];
    if let Some(by) = options.initiator {
        let initiated = Event::Initiated {
            by: by.to_owned(),
            at: now,
        };
        machine.apply(&initiated);
        events.push(initiated);
    }
    let mut starts = Vec::new();
    plan::<W>(
        &mut machine,
        &typed,
        now,
        (&mut events, &mut starts),
        &mut Vec::new(),
    );
    let search: Vec<(String, String)> = W::search(&typed)
        .into_iter()
        .filter_map(|(name, value)| Some((name.to_owned(), value?)))
        .collect();
    let launch = move |engine: &Engine, run: RunId, token: u64, events: Vec<Event>| {
        let launch = Launch::<W> {
            machine,
            input: Arc::new(typed),
            seq: events.len() as u64,
            starts,
            trace_id,
            parent_span,
            fresh: true,
        };
        if engine.inner.events.receiver_count() > 0 {
            for event in events {
                let _ = engine.inner.events.send((run, event));
            }
        }
        super::driver::launch::<W>(engine.clone(), shared, run, token, Ok(launch));
    };
    Ok(Prepared {
        workflow: W::NAME,
        fingerprint: W::FINGERPRINT,
        events,
        search,
        at: now,
        launch: Box::new(launch),
    })
}

/// Creates a run of `W` owned by this engine ([`prepare`]), its first entries in the
/// transaction that creates it, and launches it; or returns the run its idempotency key
/// names.
pub(super) async fn create<W: Workflow>(
    engine: &Engine,
    shared: Shared<W>,
    input: Value,
    options: Options<'_>,
) -> Result<Created, RunError> {
    let prepared = prepare::<W>(engine, shared, input, &options)?;
    let sent = engine.inner.lease.now_ms();
    let created = engine
        .inner
        .store
        .create_run(prepared.new_run(engine, options.idempotency_key, options.parent))
        .await?;
    prepared.launch(engine, created, sent);
    Ok(created)
}
