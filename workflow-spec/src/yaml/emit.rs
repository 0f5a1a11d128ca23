//! From a checked [`Spec`] to a spec file that lowers back to the same fingerprint
//! (`workflow export --yaml`).

use std::fmt::{self, Write as _};

use crate::flow::{LimitKey, OnLimit};
use crate::model::{
    format_duration, Arg, Call, Effect, OnEventTimeout, OnFailure, OnItemFailure, OnTimeout, Spec,
    StepKind, DEFAULT_CONCURRENCY,
};
use crate::retry::RetryPolicy;

/// Why a spec cannot be written as a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// A literal argument that is neither a string, a number nor a boolean (a character,
    /// a byte string): a file's `with:` has no spelling for it.
    Literal {
        /// The step whose call passes it.
        step: String,
        /// The literal as written.
        literal: String,
    },
    /// A map step with both a `concurrency` of its items other than the default and a
    /// `concurrency: { key, limit }` across runs: a file's step has one `concurrency` key.
    Concurrency {
        /// The map step.
        step: String,
    },
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Literal { step, literal } => write!(
                f,
                "step `{step}` passes the literal `{literal}`, which a spec file cannot write: `with:` takes strings, numbers and booleans"
            ),
            ExportError::Concurrency { step } => write!(
                f,
                "map step `{step}` limits both its items in flight and its attempts across runs, which a spec file cannot write: a step has one `concurrency` key"
            ),
        }
    }
}

impl std::error::Error for ExportError {}

/// Writes `spec` as a spec file. Actions are written as the paths the inline spec calls,
/// so the file is used with `workflow_file!("...")` without `actions:` (and with the
/// `env:` the file names); it checks to the same fingerprint as the inline spec.
pub fn export(spec: &Spec) -> Result<String, ExportError> {
    let mut out = String::new();
    let _ = writeln!(out, "name: {}", scalar(&spec.name));
    if !spec.doc.is_empty() {
        block(&mut out, 0, "description", &spec.doc);
    }
    if let Some(journal) = &spec.journal_name {
        let _ = writeln!(out, "journal_name: {}", quoted(journal));
    }
    if let Some(env) = &spec.env {
        let _ = writeln!(out, "env: {}", scalar(env));
    }
    if !spec.inputs.is_empty() {
        out.push_str("inputs:\n");
        for input in &spec.inputs {
            let _ = writeln!(out, "  {}: {}", input.name, scalar(&input.ty));
        }
    }
    workflow_keys(&mut out, spec);
    out.push_str("steps:\n");
    for step in &spec.steps {
        let _ = writeln!(out, "  - id: {}", step.id);
        if !step.doc.is_empty() {
            block(&mut out, 4, "description", &step.doc);
        }
        let mut named = Vec::new();
        match &step.kind {
            StepKind::Action(action) => {
                call(&mut out, spec, step, "", &action.call, &mut named)?;
                if let Some(for_each) = &action.for_each {
                    let _ = writeln!(
                        out,
                        "    for_each: {}",
                        quoted(&format!("{} in {}", for_each.binding, for_each.source))
                    );
                    if for_each.concurrency != DEFAULT_CONCURRENCY && step.concurrency.is_some() {
                        return Err(ExportError::Concurrency {
                            step: step.id.clone(),
                        });
                    }
                    if for_each.concurrency != DEFAULT_CONCURRENCY {
                        let _ = writeln!(out, "    concurrency: {}", for_each.concurrency);
                    }
                    if for_each.on_item_failure == OnItemFailure::Skip {
                        out.push_str("    on_item_failure: skip\n");
                    }
                }
                if action.effect == Effect::External {
                    out.push_str("    effect: external\n");
                }
                if action.idempotent {
                    out.push_str("    idempotent: true\n");
                }
                for (key, call_) in [
                    ("compensate", &action.compensate),
                    ("reconcile", &action.reconcile),
                ] {
                    if let Some(c) = call_ {
                        let _ = writeln!(out, "    {key}:");
                        call(&mut out, spec, step, "  ", c, &mut Vec::new())?;
                    }
                }
            }
            StepKind::Human(human) => {
                out.push_str("    kind: human\n");
                let _ = writeln!(out, "    assignee: {}", quoted(&human.assignee));
                if let Some(prompt) = &human.prompt {
                    let _ = writeln!(out, "    prompt: {}", quoted(prompt));
                }
                if human.approvals != 1 {
                    let _ = writeln!(out, "    approvals: {}", human.approvals);
                }
                if !human.self_approval {
                    out.push_str("    self_approval: false\n");
                }
                if let Some(title) = &human.title {
                    let _ = writeln!(out, "    title: {}", quoted(title));
                }
                if !human.show.is_empty() {
                    let _ = writeln!(out, "    show: [{}]", human.show.join(", "));
                }
                match &human.on_timeout {
                    OnTimeout::Escalate(group) => {
                        out.push_str("    on_timeout: escalate\n");
                        let _ = writeln!(out, "    escalate_to: {}", quoted(group));
                    }
                    OnTimeout::Abort => out.push_str("    on_timeout: abort\n"),
                    OnTimeout::Approve => out.push_str("    on_timeout: approve\n"),
                    OnTimeout::Reject => out.push_str("    on_timeout: reject\n"),
                }
            }
            StepKind::Event(event) => {
                out.push_str("    kind: event\n");
                let choice = match event.on_timeout {
                    OnEventTimeout::Abort => "abort",
                    OnEventTimeout::Continue => "continue",
                };
                let _ = writeln!(out, "    on_timeout: {choice}");
            }
            StepKind::Child(child) => {
                out.push_str("    workflow:\n");
                let _ = writeln!(out, "      type: {}", scalar(&child.workflow));
                if !child.args.is_empty() {
                    out.push_str("      inputs:\n");
                    for field in &child.args {
                        if let Arg::Step(i) = field.arg {
                            named.push(i);
                        }
                        let value = arg_value(spec, step, &field.arg)?;
                        let _ = writeln!(out, "        {}: {value}", field.field);
                    }
                }
            }
        }
        let _ = writeln!(out, "    output: {}", scalar(&step.output));
        let explicit: Vec<&str> = step
            .deps
            .iter()
            .filter(|dep| !named.contains(dep))
            .filter_map(|dep| spec.steps.get(*dep).map(|s| s.id.as_str()))
            .collect();
        if !explicit.is_empty() {
            let _ = writeln!(out, "    depends_on: [{}]", explicit.join(", "));
        }
        if step.on_failure == OnFailure::Continue {
            out.push_str("    on_failure: continue\n");
        }
        if let Some(retry) = &step.retry {
            retry_block(&mut out, retry);
        }
        if let Some(timeout) = step.timeout {
            let _ = writeln!(out, "    timeout: {}", format_duration(timeout));
        }
        if let Some(condition) = &step.condition {
            let _ = writeln!(out, "    condition: {}", quoted(condition));
        }
        if let Some(limit) = &step.concurrency {
            out.push_str("    concurrency:\n");
            let _ = writeln!(out, "      key: {}", limit_key(&limit.key));
            let _ = writeln!(out, "      limit: {}", limit.limit);
        }
        if let Some(rate) = &step.rate {
            out.push_str("    rate:\n");
            let _ = writeln!(out, "      key: {}", limit_key(&rate.key));
            let _ = writeln!(out, "      limit: {}", rate.limit);
            let _ = writeln!(out, "      per: {}", format_duration(rate.per));
            if rate.burst != 1 {
                let _ = writeln!(out, "      burst: {}", rate.burst);
            }
        }
    }
    Ok(out)
}

/// The workflow-level keys outside the fingerprint: `search`, `retention`, `concurrency`,
/// `priority` and `debounce`.
fn workflow_keys(out: &mut String, spec: &Spec) {
    if !spec.search.is_empty() {
        let paths: Vec<&str> = spec.search.iter().map(|key| key.path.as_str()).collect();
        let _ = writeln!(out, "search: [{}]", paths.join(", "));
    }
    if let Some(retention) = spec.retention {
        let _ = writeln!(out, "retention: {}", format_duration(retention));
    }
    if let Some(concurrency) = &spec.concurrency {
        out.push_str("concurrency:\n");
        let _ = writeln!(out, "  key: {}", limit_key(&concurrency.key));
        let _ = writeln!(out, "  limit: {}", concurrency.limit);
        let on_limit = match concurrency.on_limit {
            OnLimit::Queue => None,
            OnLimit::Skip => Some("skip"),
            OnLimit::CancelPrevious => Some("cancel_previous"),
        };
        if let Some(on_limit) = on_limit {
            let _ = writeln!(out, "  on_limit: {on_limit}");
        }
    }
    if let Some(priority) = &spec.priority {
        // A number unquoted (`priority: -2`), which a quoted one may not be; a path as a
        // scalar.
        let written = if priority.parse::<i64>().is_ok() {
            priority.clone()
        } else {
            scalar(priority)
        };
        let _ = writeln!(out, "priority: {written}");
    }
    if let Some(debounce) = &spec.debounce {
        out.push_str("debounce:\n");
        let _ = writeln!(out, "  key: {}", limit_key(&debounce.key));
        let _ = writeln!(out, "  window: {}", format_duration(debounce.window));
        if let Some(max_wait) = debounce.max_wait {
            let _ = writeln!(out, "  max_wait: {}", format_duration(max_wait));
        }
    }
}

/// A limit's key: a static key quoted (so it lowers to a string literal), a path plain.
fn limit_key(key: &LimitKey) -> String {
    match key {
        LimitKey::Static(text) => quoted(text),
        LimitKey::Path(path) => path.clone(),
    }
}

/// `action:`, `inputs:` and `with:` of a call, indented by `indent` more than a step key.
fn call(
    out: &mut String,
    spec: &Spec,
    step: &crate::model::Step,
    indent: &str,
    call: &Call,
    named: &mut Vec<usize>,
) -> Result<(), ExportError> {
    let _ = writeln!(out, "    {indent}action: {}", scalar(&call.path));
    let mut inputs = Vec::new();
    let mut with = Vec::new();
    for (position, arg) in call.args.iter().enumerate() {
        match arg {
            Arg::Literal(literal) => {
                let name = format!("arg{}", position + 1);
                with.push((name.clone(), literal_value(step, literal)?));
                inputs.push(name);
            }
            other => {
                if let Arg::Step(i) = other {
                    named.push(*i);
                }
                inputs.push(arg_name(spec, step, other));
            }
        }
    }
    if !inputs.is_empty() {
        let _ = writeln!(out, "    {indent}inputs: [{}]", inputs.join(", "));
    }
    if !with.is_empty() {
        let _ = writeln!(out, "    {indent}with:");
        for (name, value) in with {
            let _ = writeln!(out, "      {indent}{name}: {value}");
        }
    }
    Ok(())
}

fn arg_name(spec: &Spec, step: &crate::model::Step, arg: &Arg) -> String {
    match arg {
        Arg::Step(i) => spec
            .steps
            .get(*i)
            .map_or_else(String::new, |s| s.id.clone()),
        Arg::Input(i) => spec
            .inputs
            .get(*i)
            .map_or_else(String::new, |s| s.name.clone()),
        Arg::Env => "env".into(),
        Arg::Ctx => "ctx".into(),
        Arg::Item => step
            .for_each()
            .map_or_else(String::new, |f| f.binding.clone()),
        Arg::Literal(literal) => literal.clone(),
    }
}

fn arg_value(spec: &Spec, step: &crate::model::Step, arg: &Arg) -> Result<String, ExportError> {
    match arg {
        Arg::Literal(literal) => literal_value(step, literal),
        other => Ok(arg_name(spec, step, other)),
    }
}

/// A Rust literal as a YAML value that lowers back to the same literal.
fn literal_value(step: &crate::model::Step, literal: &str) -> Result<String, ExportError> {
    let unsupported = || ExportError::Literal {
        step: step.id.clone(),
        literal: literal.to_owned(),
    };
    let bare = literal.strip_prefix('-').unwrap_or(literal);
    if literal == "true" || literal == "false" {
        return Ok(literal.to_owned());
    }
    match syn::parse_str::<syn::Lit>(bare) {
        Ok(syn::Lit::Int(_) | syn::Lit::Float(_)) => Ok(literal.to_owned()),
        Ok(syn::Lit::Str(text)) if bare == literal => Ok(quoted(&text.value())),
        _ => Err(unsupported()),
    }
}

fn retry_block(out: &mut String, retry: &RetryPolicy) {
    out.push_str("    retry:\n");
    let _ = writeln!(out, "      max_attempts: {}", retry.max_attempts);
    let _ = writeln!(out, "      backoff: {}", retry.backoff.as_str());
    let _ = writeln!(out, "      initial: {}", format_duration(retry.initial));
    let _ = writeln!(out, "      max: {}", format_duration(retry.max));
    let multiplier = if retry.multiplier.fract() == 0.0 {
        format!("{:.1}", retry.multiplier)
    } else {
        retry.multiplier.to_string()
    };
    let _ = writeln!(out, "      multiplier: {multiplier}");
    let _ = writeln!(out, "      jitter: {}", quoted(&retry.jitter.to_string()));
    if let Some(deadline) = retry.deadline {
        let _ = writeln!(out, "      deadline: {}", format_duration(deadline));
    }
    if retry.retry_on != RetryPolicy::default().retry_on {
        let kinds: Vec<&str> = retry.retry_on.iter().map(|kind| kind.as_str()).collect();
        let _ = writeln!(out, "      retry_on: [{}]", kinds.join(", "));
    }
}

/// A multi-line text as a literal block.
fn block(out: &mut String, indent: usize, key: &str, text: &str) {
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "{pad}{key}: |-");
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{pad}  {line}");
        }
    }
}

/// A value written plain when YAML reads it back as the same string, else quoted.
fn scalar(text: &str) -> String {
    let plain = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(')
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':')
        && !text.contains(['{', '}', '[', ']', ',', '"', '\'', '\n', '\t'])
        && !matches!(
            text,
            "true" | "false" | "null" | "True" | "False" | "Null" | "NULL" | "TRUE" | "FALSE"
        );
    if plain {
        text.to_owned()
    } else {
        quoted(text)
    }
}

/// A double-quoted YAML string (JSON's escaping is YAML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}
