//! Checks of `schedule: { ... }`, one function per rule. The values are judged by the same
//! functions the runtime validates a schedule with ([`crate::schedule`]).

use super::super::ast::WorkflowAst;
use super::super::ctxt::Ctxt;
use crate::schedule::{check_catchup_max, check_jitter, check_window, parse_cron, parse_zone};
use crate::schedule::{Catchup, ScheduleError};

/// Reports a schedule error at `span` with its help line.
fn report(cx: &Ctxt, span: proc_macro2::Span, error: &ScheduleError) {
    cx.error_help(span, error, error.help());
}

/// A schedule has a `cron`, and it parses: the error names the field that is wrong.
pub fn schedule_cron(cx: &Ctxt, ast: &WorkflowAst) {
    let Some(schedule) = &ast.schedule else {
        return;
    };
    match &schedule.cron {
        // A `cron` whose value was refused is reported at its value already.
        None if schedule.cron_written => {}
        None => cx.error(
            schedule.key.span(),
            "`schedule` needs a `cron` pattern\nhelp: add e.g. `cron: \"0 9 * * MON-FRI\"` (09:00 on weekdays)",
        ),
        Some(cron) => {
            if let Err(error) = parse_cron(&cron.value()) {
                report(cx, cron.span(), &error);
            }
        }
    }
}

/// A schedule's `tz` is a zone of the compiled-in IANA database.
pub fn schedule_zone(cx: &Ctxt, ast: &WorkflowAst) {
    let Some(tz) = ast.schedule.as_ref().and_then(|s| s.tz.as_ref()) else {
        return;
    };
    if let Err(error) = parse_zone(&tz.value()) {
        report(cx, tz.span(), &error);
    }
}

/// `catchup: all(max: N)` is bounded, `window` is not zero, `jitter` is at most an hour.
pub fn schedule_bounds(cx: &Ctxt, ast: &WorkflowAst) {
    let Some(schedule) = &ast.schedule else {
        return;
    };
    if let Some((Catchup::All { max }, span)) = schedule.catchup {
        if let Err(error) = check_catchup_max(max) {
            report(cx, span, &error);
        }
    }
    if let Some(window) = schedule.window {
        if let Err(error) = check_window(window.value) {
            report(cx, window.span, &error);
        }
    }
    if let Some(jitter) = schedule.jitter {
        if let Err(error) = check_jitter(jitter.value) {
            report(cx, jitter.span, &error);
        }
    }
}

/// A scheduled workflow has no inputs, or exactly one of type `Tick`: nobody else is there
/// to give it any when a tick starts it.
pub fn scheduled_inputs(cx: &Ctxt, ast: &WorkflowAst) {
    if ast.schedule.is_none() {
        return;
    }
    for (index, input) in ast.inputs.iter().enumerate() {
        let is_tick = match &input.ty {
            syn::Type::Path(path) => path
                .path
                .segments
                .last()
                .is_some_and(|segment| segment.ident == "Tick" && segment.arguments.is_empty()),
            _ => false,
        };
        if index > 0 {
            cx.error_spanned(
                &input.name,
                format!(
                    "a scheduled workflow takes no inputs or exactly one `Tick`, but `{}` is a second input\nhelp: a tick starts the run and has nothing else to give; read other values from `env`",
                    input.name
                ),
            );
        } else if !is_tick {
            cx.error_spanned(
                &input.ty,
                format!(
                    "a scheduled workflow's input must be `workflow_core::Tick`, but `{}` has another type\nhelp: write `{}: Tick` (schedule id, scheduled time, fire time), or no input at all",
                    input.name, input.name
                ),
            );
        }
    }
}
