//! A human step's `title` and `show`, filled in from a run's journal: what the inbox's
//! cards and `GET /api/tasks` show first.

use maud::{html, Markup};
use serde_json::{json, Map, Value};
use workflow_core::journal::Event;
use workflow_core::machine::Machine;
use workflow_core::spec::{title, HumanStep, Spec, StepKind};

use crate::view::REDACTED;

/// What a task shows first: its title, the values it lists, and its quorum so far.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Presented {
    /// The `title` with its placeholders filled in (`None` without a `title`).
    pub(crate) title: Option<String>,
    /// Each `show` path with its value (`None` when absent).
    pub(crate) shown: Vec<(String, Option<Value>)>,
    /// How many approvals the step needs.
    pub(crate) approvals: u32,
    /// Who approved so far, when it needs more than one.
    pub(crate) approved_by: Vec<String>,
}

impl Presented {
    /// The quorum so far in words (`1 of 2 (by bob@finance)`); `None` for a step that
    /// needs one approval.
    pub(crate) fn quorum(&self) -> Option<String> {
        if self.approvals <= 1 {
            return None;
        }
        let mut quorum = format!("{} of {}", self.approved_by.len(), self.approvals);
        if !self.approved_by.is_empty() {
            quorum.push_str(&format!(" (by {})", self.approved_by.join(", ")));
        }
        Some(quorum)
    }

    /// A table row per `show` value (`-` when absent).
    pub(crate) fn shown_rows(&self) -> Markup {
        html! {
            @for (path, value) in &self.shown {
                tr {
                    th { (path) }
                    td {
                        @match value {
                            Some(value) => (crate::html::value(value)),
                            None => "-",
                        }
                    }
                }
            }
        }
    }

    /// The quorum's table row, with `id` on its cell, when the step needs more than one
    /// approval.
    pub(crate) fn quorum_row(&self, id: &str) -> Markup {
        html! {
            @if let Some(quorum) = self.quorum() {
                tr { th { "Approvals" } td id=(id) { (quorum) } }
            }
        }
    }
}

/// What a title's placeholder reads when the caller may not see payloads.
pub(crate) const HIDDEN: &str = "…";

fn human<'s>(spec: &'s Spec, step: &str) -> Option<&'s HumanStep> {
    match &spec.steps.get(spec.step_index(step)?)?.kind {
        StepKind::Human(human) => Some(human),
        _ => None,
    }
}

/// Fills in the title and the shown values of human `step` from the run's `events`; with
/// `payloads` false (the caller may not see payloads), every value reads as redacted.
pub(crate) fn present(spec: &Spec, events: &[Event], step: &str, payloads: bool) -> Presented {
    let Some(human) = human(spec, step) else {
        return Presented {
            title: None,
            shown: Vec::new(),
            approvals: 1,
            approved_by: Vec::new(),
        };
    };
    let machine = Machine::replay(spec, events);
    let outputs = machine.outputs();
    let input = machine.input();
    let root = |name: &str| -> Option<&Value> {
        match spec.step_index(name) {
            Some(index) => outputs.get(index)?.as_ref(),
            None => input?.get(name),
        }
    };
    let redacted = Value::String(REDACTED.to_owned());
    let title = human.title.as_deref().map(|text| {
        if payloads {
            title::render(text, root)
        } else {
            match title::parse(text) {
                Ok(pieces) => pieces
                    .iter()
                    .map(|piece| match piece {
                        title::Piece::Text(text) => text.as_str(),
                        title::Piece::Value(_) => HIDDEN,
                    })
                    .collect(),
                Err(_) => text.to_owned(),
            }
        }
    });
    let shown = human
        .show
        .iter()
        .map(|path| {
            let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
            let value = if payloads {
                title::lookup(&parts, root).cloned()
            } else {
                Some(redacted.clone())
            };
            (path.clone(), value)
        })
        .collect();
    let index = spec.step_index(step).unwrap_or_default();
    Presented {
        title,
        shown,
        approvals: human.approvals,
        approved_by: machine.approvers(index).to_vec(),
    }
}

impl Presented {
    /// The fields `GET /api/tasks` adds to a task: `title`, `shown` (path → value, in
    /// order, as a list of pairs) and, for a quorum, `approvals` and `approved_by`.
    pub(crate) fn extend(&self, task: &mut Map<String, Value>) {
        task.insert("title".into(), json!(self.title));
        let shown: Vec<Value> = self
            .shown
            .iter()
            .map(|(path, value)| json!({ "path": path, "value": value }))
            .collect();
        task.insert("shown".into(), Value::Array(shown));
        task.insert("approvals".into(), json!(self.approvals));
        task.insert("approved_by".into(), json!(self.approved_by));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use workflow_core::{workflow, Approval, StepError};

    #[derive(Clone, Serialize, Deserialize)]
    pub(super) struct Refund {
        amount_cents: u64,
        customer: String,
    }

    #[derive(Clone, Serialize, Deserialize)]
    pub(super) struct Assessment {
        note: String,
    }

    async fn assess(refund: Refund) -> Result<Assessment, StepError> {
        Ok(Assessment {
            note: refund.customer,
        })
    }

    workflow! {
        workflow Refunds(refund: Refund) {
            step assess -> Assessment { action: assess(refund), on_failure: continue }
            human approve -> Approval {
                assignee: "finance",
                approvals: 2,
                title: "Refund {refund.amount_cents} for {refund.customer}: {assess.note}",
                show: [refund.amount_cents, assess.note],
                depends_on: [assess],
                timeout: 24h,
                on_timeout: reject,
            }
        }
    }

    #[test]
    fn a_title_and_shown_values_are_filled_in_from_inputs_and_upstream_outputs() {
        let spec = Refunds::spec();
        let mut events = vec![
            Event::RunStarted {
                workflow: "Refunds".into(),
                fingerprint: String::new(),
                input: json!({"refund": {"amount_cents": 4200, "customer": "Ada"}}),
                seed: 1,
                trace_id: String::new(),
                parent_span: None,
                dry_run: false,
                deadline: None,
                at: 0,
            },
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 0,
            },
            Event::StepSucceeded {
                step: 0,
                output: json!({"note": "regular customer"}),
                at: 1,
            },
        ];
        let presented = present(spec, &events, "approve", true);
        assert_eq!(
            presented.title.as_deref(),
            Some("Refund 4200 for Ada: regular customer")
        );
        assert_eq!(
            presented.shown,
            [
                ("refund.amount_cents".to_owned(), Some(json!(4200))),
                ("assess.note".to_owned(), Some(json!("regular customer"))),
            ]
        );
        let hidden = present(spec, &events, "approve", false);
        assert_eq!(
            hidden.title.as_deref(),
            Some(format!("Refund {HIDDEN} for {HIDDEN}: {HIDDEN}").as_str())
        );
        assert!(hidden
            .shown
            .iter()
            .all(|(_, value)| value.as_ref() == Some(&json!(REDACTED))));
        // A step that failed with `continue` has no output: its values read `-`.
        events.truncate(2);
        events.push(Event::StepFailed {
            step: 0,
            attempts: 1,
            kind: workflow_core::ErrorKind::Validation,
            message: "no".into(),
            at: 1,
        });
        let absent = present(spec, &events, "approve", true);
        assert_eq!(absent.title.as_deref(), Some("Refund 4200 for Ada: -"));
        assert_eq!(absent.shown[1], ("assess.note".to_owned(), None));
        assert_eq!(absent.approvals, 2);
    }
}
