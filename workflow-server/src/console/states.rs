//! A step's state as the console shows it, from the run's machine and its journal, with
//! a symbol and a word beside the colour (so no state is told by colour alone), and the
//! spec's diagram drawn with those states.

use workflow_core::journal::{Event, Timestamp};
use workflow_core::machine::StepState;
use workflow_core::spec::Spec;
use workflow_core::ErrorKind;

/// What a step is doing, in the console's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Not started, in a run that waits for a worker.
    Queued,
    /// Not started yet.
    NotStarted,
    /// An attempt (or a map's items, or a child run) is in flight.
    Running,
    /// An attempt failed; the next one is due.
    Retrying,
    /// A human task is open.
    WaitingForPerson,
    /// Waiting for an event from outside.
    WaitingForEvent,
    /// Done with an output.
    Succeeded,
    /// Failed for good.
    Failed,
    /// Stopped by a cancel of its run (its error kind is `cancelled`).
    Cancelled,
    /// Skipped.
    Skipped,
    /// Succeeded, then undone by its compensation.
    Compensated,
}

impl Shown {
    /// Every state, in the legend's order.
    pub(crate) const ALL: [Shown; 11] = [
        Shown::Queued,
        Shown::NotStarted,
        Shown::Running,
        Shown::Retrying,
        Shown::WaitingForPerson,
        Shown::WaitingForEvent,
        Shown::Succeeded,
        Shown::Failed,
        Shown::Cancelled,
        Shown::Skipped,
        Shown::Compensated,
    ];

    /// Its class name (`cs-<name>` in the diagram and the tables).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Shown::Queued => "queued",
            Shown::NotStarted => "not-started",
            Shown::Running => "running",
            Shown::Retrying => "retrying",
            Shown::WaitingForPerson => "waiting-person",
            Shown::WaitingForEvent => "waiting-event",
            Shown::Succeeded => "succeeded",
            Shown::Failed => "failed",
            Shown::Cancelled => "cancelled",
            Shown::Skipped => "skipped",
            Shown::Compensated => "compensated",
        }
    }

    /// Its symbol, shown before its words.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Shown::Queued => "◷",
            Shown::NotStarted => "○",
            Shown::Running => "▶",
            Shown::Retrying => "↻",
            Shown::WaitingForPerson => "☐",
            Shown::WaitingForEvent => "◌",
            Shown::Succeeded => "✓",
            Shown::Failed => "✗",
            Shown::Cancelled => "⊘",
            Shown::Skipped => "⤼",
            Shown::Compensated => "↶",
        }
    }

    /// Its words.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Shown::Queued => "queued",
            Shown::NotStarted => "not started",
            Shown::Running => "running",
            Shown::Retrying => "retrying",
            Shown::WaitingForPerson => "waiting for a person",
            Shown::WaitingForEvent => "waiting for an event",
            Shown::Succeeded => "succeeded",
            Shown::Failed => "failed",
            Shown::Cancelled => "cancelled",
            Shown::Skipped => "skipped",
            Shown::Compensated => "compensated",
        }
    }

    /// How an attempt that failed with an error of `kind` is shown: cancelled when a
    /// cancel stopped it, failed otherwise.
    pub(crate) fn of_error(kind: ErrorKind) -> Shown {
        if kind == ErrorKind::Cancelled {
            Shown::Cancelled
        } else {
            Shown::Failed
        }
    }
}

/// The state of step `step` (`state` in the run's machine) as shown: a compensated step
/// says so, a step that has not started in a queued run is queued, a step a cancel stopped
/// is cancelled.
pub(crate) fn shown(state: &StepState, step: usize, events: &[Event], queued: bool) -> Shown {
    let compensated = events.iter().any(
        |event| matches!(event, Event::Compensated { step: s, error: None, .. } if *s == step),
    );
    if compensated {
        return Shown::Compensated;
    }
    match state {
        StepState::Pending if queued => Shown::Queued,
        StepState::Pending => Shown::NotStarted,
        StepState::Running { .. } | StepState::Mapping { .. } => Shown::Running,
        StepState::RetryWait { .. } => Shown::Retrying,
        StepState::Waiting { .. } => Shown::WaitingForPerson,
        StepState::Awaiting { .. } => Shown::WaitingForEvent,
        StepState::Succeeded => Shown::Succeeded,
        StepState::Failed {
            kind: ErrorKind::Cancelled,
            ..
        } => Shown::Cancelled,
        StepState::Failed { .. } => Shown::Failed,
        StepState::Skipped { .. } => Shown::Skipped,
    }
}

/// When step `step` began (its first attempt, task, wait or map) and when it settled, from
/// the journal.
pub(crate) fn span(events: &[Event], step: usize) -> (Option<Timestamp>, Option<Timestamp>) {
    let mut began = None;
    let mut settled = None;
    for event in events {
        let (s, starts, ends) = match event {
            Event::AttemptStarted { step, .. }
            | Event::TaskOpened { step, .. }
            | Event::EventAwaited { step, .. }
            | Event::MapStarted { step, .. }
            | Event::ChildStarted { step, .. } => (*step, true, false),
            Event::StepSucceeded { step, .. }
            | Event::StepFailed { step, .. }
            | Event::StepSkipped { step, .. }
            | Event::TaskDecided { step, .. }
            | Event::TaskExpired { step, .. } => (*step, false, true),
            _ => continue,
        };
        if s != step {
            continue;
        }
        if starts && began.is_none() {
            began = Some(event.at());
        }
        if ends {
            settled = Some(event.at());
        }
    }
    (began, settled)
}

/// A duration in words: `850 ms`, `12.4 s`, `3 min 5 s`, `2 h 10 min`.
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{} h {} min", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// The spec's diagram (SVG) with each step's group in the class of its state
/// (`cs-<name>`), a `<title>` naming the state in words, and a link to the step's
/// details (`#detail-<id>`, so the keyboard reaches each step); the drawing is a group of
/// those links rather than one image. The stylesheet of the
/// pages colours and outlines each class; the diagram carries no style of its own, so the
/// pages' policy needs no exception for it.
pub(crate) fn diagram(spec: &Spec, states: &[Shown]) -> String {
    let plain = workflow_core::spec::render::svg(spec);
    let mut out = String::with_capacity(plain.len() + 160 * states.len());
    let mut step = 0;
    let mut linked = false;
    for line in plain.split_inclusive('\n') {
        if line.starts_with("    <g class=\"step\"") {
            if let (Some(state), Some(spec_step)) = (states.get(step), spec.steps.get(step)) {
                let label = crate::html::escape(&format!(
                    "{}: {} {}",
                    spec_step.id,
                    state.symbol(),
                    state.words()
                ));
                out.push_str(&format!(
                    "    <a href=\"#detail-{}\">\n",
                    crate::html::escape(&spec_step.id)
                ));
                linked = true;
                let class = format!("class=\"step cs-{}\"", state.name());
                out.push_str(&line.replacen("class=\"step\"", &class, 1));
                out.push_str(&format!("      <title>{label}</title>\n"));
            } else {
                out.push_str(line);
            }
            step += 1;
            continue;
        }
        if line.starts_with("<svg ") {
            // Its steps are links: a group of them, not one image.
            out.push_str(&line.replacen(" role=\"img\"", " role=\"group\"", 1));
            continue;
        }
        out.push_str(line);
        if linked && line == "    </g>\n" {
            out.push_str("    </a>\n");
            linked = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_its_own_symbol_words_and_class() {
        use std::collections::HashSet;
        let (mut symbols, mut words, mut names) = (HashSet::new(), HashSet::new(), HashSet::new());
        for state in Shown::ALL {
            assert!(symbols.insert(state.symbol()), "{state:?}");
            assert!(words.insert(state.words()), "{state:?}");
            assert!(names.insert(state.name()), "{state:?}");
        }
    }

    #[test]
    fn compensation_and_queues_show_over_the_machines_state() {
        let compensated = [Event::Compensated {
            step: 1,
            item: None,
            error: None,
            at: 5,
        }];
        assert_eq!(
            shown(&StepState::Succeeded, 1, &compensated, false),
            Shown::Compensated
        );
        assert_eq!(
            shown(&StepState::Succeeded, 0, &compensated, false),
            Shown::Succeeded
        );
        let stopped = |kind| StepState::Failed {
            attempts: 1,
            kind,
            message: "stopped".into(),
        };
        assert_eq!(
            shown(&stopped(ErrorKind::Cancelled), 0, &[], false),
            Shown::Cancelled
        );
        assert_eq!(
            shown(&stopped(ErrorKind::Internal), 0, &[], false),
            Shown::Failed
        );
        assert_eq!(Shown::of_error(ErrorKind::Cancelled), Shown::Cancelled);
        assert_eq!(Shown::of_error(ErrorKind::Timeout), Shown::Failed);
        assert_eq!(shown(&StepState::Pending, 0, &[], true), Shown::Queued);
        assert_eq!(shown(&StepState::Pending, 0, &[], false), Shown::NotStarted);
        assert_eq!(
            shown(
                &StepState::RetryWait {
                    attempt: 1,
                    until: 9
                },
                0,
                &[],
                false
            ),
            Shown::Retrying
        );
    }

    #[test]
    fn a_step_spans_from_its_first_attempt_to_its_settling() {
        let events = [
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 100,
            },
            Event::AttemptStarted {
                step: 1,
                attempt: 1,
                at: 150,
            },
            Event::AttemptStarted {
                step: 0,
                attempt: 2,
                at: 300,
            },
            Event::StepSucceeded {
                step: 0,
                output: serde_json::json!(1),
                at: 1_350,
            },
        ];
        assert_eq!(span(&events, 0), (Some(100), Some(1_350)));
        assert_eq!(span(&events, 1), (Some(150), None));
        assert_eq!(span(&events, 2), (None, None));
        assert_eq!(duration(1_250), "1.2 s");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(185_000), "3 min 5 s");
        assert_eq!(duration(7_800_000), "2 h 10 min");
    }
}
