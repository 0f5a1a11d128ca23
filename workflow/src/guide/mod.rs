//! The guide: how to write, run and operate workflows, in chapters.
//!
//! Every Rust example in these chapters is a doctest: `cargo test` compiles it and runs its
//! assertions, so what the guide shows is what the code does. An example that needs
//! something a test machine lacks (a PostgreSQL server, Chromium, a network address) is
//! compiled but not run, and says so. Examples of the `postgres`, `server` and `browser`
//! features are compiled when the feature is on (as `cargo test --workspace` turns them
//! on).
//!
//! Read the first two chapters in order; the others stand alone.
//!
//! | chapter | what it covers |
//! |---|---|
//! | [`getting_started`] | a workflow end to end: the crate, a spec, an engine, a run, its outputs |
//! | [`spec_language`] | every key of `workflow!`: steps, retries, timeouts, conditions, effects, compensation, what the compiler rejects |
//! | [`human_steps`] | human checkpoints: deadlines and escalation, deciding, decision forms, quorums, four eyes, delegation |
//! | [`maps_children_events`] | fanning out over data, child workflows, waiting for events from outside |
//! | [`spec_files`] | specs in YAML files with `workflow_file!`, their errors, `workflow lint` and the JSON Schema |
//! | [`schedules`] | cron schedules checked at compile time: daylight saving, downtime, overlap, schedules made at run time |
//! | [`flow_control`] | concurrency keys, priorities, debouncing, rate limits, queued starts |
//! | [`browser_steps`] | steps that drive headless Chromium (feature `browser`) |
//! | [`front_door`] | webhooks, the JSON API, the approval inbox, decision links and permissions (feature `server`) |
//! | [`many_workers`] | PostgreSQL, leases, fencing, and what cancel, drain and shutdown do |
//! | [`operating`] | finding and purging runs, integrity, logs, metrics, traces, health |
//! | [`testing`] | testing workflows under paused time with `workflow::testing` |
//! | [`versions`] | fingerprints, running two versions side by side, checking a deploy with `upgrade::check` |
//! | [`writing_a_store`] | the `Store` trait and the conformance suite |

#[doc = include_str!("getting_started.md")]
pub mod getting_started {}

#[doc = include_str!("spec_language.md")]
pub mod spec_language {}

#[doc = include_str!("human_steps.md")]
pub mod human_steps {}

#[doc = include_str!("maps_children_events.md")]
pub mod maps_children_events {}

#[doc = include_str!("spec_files.md")]
pub mod spec_files {}

#[doc = include_str!("schedules.md")]
pub mod schedules {}

#[doc = include_str!("flow_control.md")]
pub mod flow_control {}

#[doc = include_str!("browser_steps.md")]
pub mod browser_steps {}

#[doc = include_str!("front_door.md")]
pub mod front_door {}

#[doc = include_str!("many_workers.md")]
pub mod many_workers {}

#[doc = include_str!("operating.md")]
pub mod operating {}

#[doc = include_str!("testing.md")]
pub mod testing {}

#[doc = include_str!("versions.md")]
pub mod versions {}

#[doc = include_str!("writing_a_store.md")]
pub mod writing_a_store {}
