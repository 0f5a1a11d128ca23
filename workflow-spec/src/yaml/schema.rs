//! The JSON Schema of spec files, for editors (`workflow schema`).

use serde_json::{json, Value};

/// The JSON Schema (draft 2020-12) of a spec file: every key, its kind of value and its
/// documentation, so an editor completes keys and flags typos as you type. The compiler
/// and `workflow lint` check what a schema cannot (names, dependencies, durations, …).
pub fn schema() -> Value {
    let duration = json!({
        "type": "string",
        "pattern": "^[0-9]+(ms|s|m|h|d)$",
        "description": "A duration with its unit: `500ms`, `30s`, `2m`, `48h`, `7d`."
    });
    let names = json!({
        "type": "array",
        "items": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$" }
    });
    let literal = json!({ "type": ["string", "number", "boolean"] });
    let call = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["action"],
        "properties": {
            "action": { "type": "string", "description": "A function in the `actions` module." },
            "inputs": names.clone(),
            "with": { "type": "object", "additionalProperties": literal.clone() }
        }
    });
    let step = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["id"],
        "properties": {
            "id": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$" },
            "kind": { "enum": ["step", "human", "event"], "description": "Default `step`; `action: request_approval` makes a human step." },
            "description": { "type": "string" },
            "action": { "type": "string", "description": "A function in the `actions` module, or `request_approval` for a human step." },
            "inputs": { "description": "The action's arguments in order: workflow inputs, upstream steps, `env`, `ctx`, and names of `with` entries.", "oneOf": [names.clone(), { "type": "string" }] },
            "with": { "type": "object", "description": "Literal arguments, by name.", "additionalProperties": literal.clone() },
            "output": { "type": "string", "description": "The Rust type the step outputs (`()` for none); a human step defaults to `Approval`." },
            "depends_on": { "oneOf": [names.clone(), { "type": "string" }] },
            "on_failure": { "enum": ["abort", "continue"] },
            "retry": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "max_attempts": { "type": "integer", "minimum": 1 },
                    "backoff": { "enum": ["fixed", "exponential", "linear"] },
                    "initial": duration.clone(),
                    "max": duration.clone(),
                    "multiplier": { "type": "number", "minimum": 1 },
                    "jitter": { "type": "string", "pattern": "^(none|full|equal|[0-9]{1,3}%)$" },
                    "deadline": duration.clone(),
                    "retry_on": { "type": "array", "items": { "type": "string" } }
                }
            },
            "timeout": duration.clone(),
            "condition": { "type": "string", "description": "A Rust expression over upstream outputs; false skips the step." },
            "assignee": { "type": "string" },
            "on_timeout": { "enum": ["escalate", "abort", "approve", "reject", "continue"] },
            "escalate_to": { "type": "string", "description": "The group `on_timeout: escalate` hands the task to." },
            "prompt": { "type": "string" },
            "approvals": { "type": "integer", "minimum": 1, "maximum": 100, "description": "How many distinct people must approve (a rejection by anyone rejects); default 1." },
            "self_approval": { "type": "boolean", "description": "`false`: whoever started the run may not decide the task." },
            "title": { "type": "string", "description": "The task's title in the inbox; `{refund.amount_cents}` fills in an input or an upstream output." },
            "show": { "type": "array", "items": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$" }, "description": "Inputs and upstream outputs (and their fields) shown before the raw context." },
            "effect": { "enum": ["internal", "external"] },
            "idempotent": { "type": "boolean" },
            "compensate": { "oneOf": [{ "type": "string" }, call.clone()] },
            "reconcile": { "oneOf": [{ "type": "string" }, call] },
            "for_each": { "type": "string", "description": "`item in source`: run the action once per item." },
            "concurrency": { "type": "integer", "minimum": 1 },
            "on_item_failure": { "enum": ["abort", "skip"] },
            "workflow": {
                "type": "object",
                "additionalProperties": false,
                "required": ["type"],
                "properties": {
                    "type": { "type": "string", "description": "The child workflow's type." },
                    "inputs": { "type": "object", "additionalProperties": literal }
                }
            }
        }
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "workflow spec",
        "description": "A workflow spec for `workflow_file!`: seed 003's YAML with typed inputs and outputs.",
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "steps"],
        "properties": {
            "name": { "type": "string", "description": "The workflow's name; `user-onboarding` makes the type `UserOnboarding`." },
            "description": { "type": "string", "description": "What the workflow does (the type's doc comment)." },
            "journal_name": { "type": "string", "description": "The name runs are journaled under, when it differs from the type's." },
            "env": { "type": "string", "description": "The environment type (the macro's `env:` argument overrides it)." },
            "inputs": {
                "type": "object",
                "description": "The journaled inputs: `name: Type`, in order.",
                "additionalProperties": { "type": "string" }
            },
            "schedule": {
                "type": "object",
                "description": "When runs start on their own: `cron` and `tz` are text, the rest as in the inline spec (`overlap: skip`, `catchup: \"all(max: 10)\"`, `window: 6h`, `dst_gap`, `jitter`).",
                "additionalProperties": false,
                "required": ["cron"],
                "properties": {
                    "cron": { "type": "string", "description": "5 or 6 cron fields: `0 9 * * MON-FRI`." },
                    "tz": { "type": "string", "description": "An IANA time zone: `Europe/Berlin` (default UTC)." },
                    "overlap": { "enum": ["skip", "buffer_one", "allow", "cancel_previous"] },
                    "catchup": { "type": "string", "description": "`latest`, `none` or `all(max: N)`." },
                    "window": { "type": "string", "description": "A duration: `6h`." },
                    "dst_gap": { "enum": ["next_valid", "skip"] },
                    "jitter": { "type": "string", "description": "A duration: `30s`." }
                }
            },
            "search": {
                "type": "array",
                "description": "The business keys runs are found by (`workflow runs list --where customer_id=c-42`): inputs or paths of their fields, e.g. `order.customer_id`; each is named by its last field.",
                "minItems": 1,
                "items": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$" }
            },
            "retention": {
                "type": "string",
                "pattern": "^[0-9]+(ms|s|m|h|d)$",
                "description": "How long finished runs are kept before they are purged: `30d` (at least `1m`)."
            },
            "steps": {
                "type": "array",
                "items": step
            }
        }
    })
}
