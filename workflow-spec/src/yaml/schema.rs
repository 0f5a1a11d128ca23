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
    let key = json!({
        "type": "string",
        "description": "The key the limit counts by: quoted (`\"psp\"`), one key shared by every run that names it; unquoted, a path over the inputs (on a step, also upstream outputs) read per run: `order.customer_id`."
    });
    let count = json!({ "type": "integer", "minimum": 1, "maximum": 1_000_000 });
    let step_limit = json!({
        "type": "object",
        "description": "Attempts of this step in flight per key, across all runs and workers.",
        "additionalProperties": false,
        "required": ["key", "limit"],
        "properties": { "key": key.clone(), "limit": count.clone() }
    });
    let rate = json!({
        "type": "object",
        "description": "A token bucket per key: at most `burst` tokens (default 1), refilled at `limit` per `per`; an attempt takes one.",
        "additionalProperties": false,
        "required": ["key", "limit", "per"],
        "properties": {
            "key": key.clone(),
            "limit": count.clone(),
            "per": duration.clone(),
            "burst": count.clone()
        }
    });
    let step_concurrency = json!({
        "description": "A number: the items of a map in flight at once (default 16). A mapping `{ key, limit }`: attempts of this step in flight per key, across runs.",
        "oneOf": [{ "type": "integer", "minimum": 1 }, step_limit]
    });
    let mut step = json!({
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
            "concurrency": step_concurrency,
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
    step["properties"]["rate"] = rate;
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
            "concurrency": {
                "type": "object",
                "description": "Runs in flight per key; `on_limit` says what a start over the limit does: `queue` (the default) waits, `skip` drops the start, `cancel_previous` cancels the oldest run in flight.",
                "additionalProperties": false,
                "required": ["key", "limit"],
                "properties": {
                    "key": key.clone(),
                    "limit": count,
                    "on_limit": { "enum": ["queue", "skip", "cancel_previous"] }
                }
            },
            "priority": {
                "type": ["string", "integer"],
                "description": "An integer, or a path over the inputs to an integer field (`order.tier`); higher starts first, and waiting raises it."
            },
            "debounce": {
                "type": "object",
                "description": "Starts with the same key within `window` collapse into one run with the latest input, started once the key is quiet for `window` or `max_wait` after the burst's first start.",
                "additionalProperties": false,
                "required": ["key", "window"],
                "properties": {
                    "key": key,
                    "window": duration.clone(),
                    "max_wait": duration.clone()
                }
            },
            "steps": {
                "type": "array",
                "items": step
            }
        }
    })
}
