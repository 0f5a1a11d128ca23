//! What a run waits for under flow control, as `runs show` says it: the store's account
//! ([`describe`]), with the one case it cannot tell apart said plainly: a queued run whose
//! key has a free slot waits for no other run, but for a worker to admit it.

use workflow_core::spec::Spec;
use workflow_core::store::limits::{describe, RunFlow};

/// The lines `runs show` prints under `waits:` for a run's flow state.
pub(super) fn waits(flow: &RunFlow, spec: &Spec) -> Vec<String> {
    let mut lines = describe(flow, Some(spec));
    let Some(gate) = flow.gate.as_ref().filter(|gate| !gate.admitted) else {
        return lines;
    };
    let (Some((_, key)), 0) = (&gate.key, gate.usage.in_use) else {
        return lines;
    };
    // Nothing holds a slot of its key: it is admitted by the next admission pass of a
    // worker that registers this version of the workflow, and only such a worker admits it.
    let name = spec.journaled_name();
    let limit = spec
        .concurrency
        .as_ref()
        .map_or_else(|| "?".to_owned(), |c| c.limit.to_string());
    let free = format!(
        "queued for key {key} ({name}): its slots are free (0 of {limit} in use), so it waits for a worker that registers this version of {name} to admit it"
    );
    let said = format!("queued for a slot of key {key} ({name})");
    match lines.iter_mut().find(|line| **line == said) {
        Some(line) => *line = free,
        None => lines.insert(usize::from(gate.not_before.is_some()), free),
    }
    lines
}

#[cfg(test)]
mod tests {
    use workflow_core::store::limits::{GateState, KeyUsage};
    use workflow_core::RunId;

    use super::*;

    fn spec() -> Spec {
        let parsed = workflow_spec::parse::parse_str(
            "workflow Review(customer: String) { concurrency: { key: customer, limit: 2 }, human review -> Approval { assignee: \"ops\", timeout: 48h, on_timeout: abort } }",
        );
        parsed.spec.expect("a valid spec")
    }

    fn queued(in_use: u32) -> RunFlow {
        RunFlow {
            gate: Some(GateState {
                key: Some(("Review".into(), "customer-42".into())),
                admitted: false,
                usage: KeyUsage {
                    in_use,
                    holders: (0..in_use)
                        .map(|n| (RunId(u64::from(n) + 7), String::new()))
                        .collect(),
                },
                ..GateState::default()
            }),
            ..RunFlow::default()
        }
    }

    #[test]
    fn a_queued_run_with_free_slots_waits_for_a_worker_not_a_slot() {
        assert_eq!(
            waits(&queued(0), &spec()),
            [
                "queued for key customer-42 (Review): its slots are free (0 of 2 in use), so it waits for a worker that registers this version of Review to admit it",
                "queued: priority 0, 0 queued ahead of it",
            ]
        );
    }

    #[test]
    fn a_queued_run_behind_holders_waits_for_a_slot() {
        let lines = waits(&queued(2), &spec());
        assert_eq!(
            lines[0],
            "waiting for a slot of key customer-42 (Review): 2 of 2 in use by run-7, run-8"
        );
    }
}
