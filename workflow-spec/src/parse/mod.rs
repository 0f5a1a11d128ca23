//! Parse -> resolve -> check -> lower: from `workflow!` tokens to a checked [`Spec`].
//!
//! [`parse`] never panics on any input. It returns the syntax tree (with spans, for code
//! generation and for the fallback skeleton emitted next to errors), the resolved names,
//! every error found, and the lowered [`Spec`] when there were none.

pub mod ast;
pub mod attr;
mod calls;
pub mod check;
pub mod ctxt;
mod fields;
pub mod flow;
pub mod human;
mod nesting;
pub mod schedule;
pub mod search;
mod values;

use proc_macro2::TokenStream;
use quote::ToTokens;

use self::ast::{ArgAst, CallAst, OnTimeoutAst, RetryAst, StepAst, StepKw, WorkflowAst};
use self::ctxt::Ctxt;
use crate::model::{
    ActionStep, Arg, Call, ChildArg, ChildStep, Effect, EventStep, ForEach, HumanStep, Input,
    OnEventTimeout, OnFailure, OnItemFailure, OnTimeout, Spec, Step, StepKind, DEFAULT_CONCURRENCY,
};
use crate::retry::RetryPolicy;

/// The result of parsing one `workflow!` invocation.
#[allow(missing_debug_implementations)] // holds syn nodes, see `ast`
pub struct Parsed {
    /// The syntax tree; `None` when even the header could not be read.
    pub ast: Option<WorkflowAst>,
    /// The resolved names; `Some` whenever `ast` is.
    pub names: Option<Names>,
    /// The checked model; `Some` exactly when `errors` is empty.
    pub spec: Option<Spec>,
    /// Every error found, in source order of the checks.
    pub errors: Vec<syn::Error>,
}

impl Parsed {
    /// All errors combined into one `syn::Error`, if any.
    pub fn error(&self) -> Option<syn::Error> {
        let mut errors = self.errors.iter().cloned();
        let mut combined = errors.next()?;
        for error in errors {
            combined.combine(error);
        }
        Some(combined)
    }
}

/// Parses and checks the tokens of a `workflow!` invocation.
pub fn parse(tokens: TokenStream) -> Parsed {
    if let Some(error) = nesting::too_deep(&tokens) {
        return Parsed {
            ast: None,
            names: None,
            spec: None,
            errors: vec![error],
        };
    }
    // syn parses recursively and bounds no depth; with nesting bounded above, this stack
    // is enough on any thread, including a test harness's 2 MiB ones.
    stacker::grow(PARSE_STACK, || parse_bounded(tokens))
}

/// The stack the parser runs on.
const PARSE_STACK: usize = 64 << 20;

fn parse_bounded(tokens: TokenStream) -> Parsed {
    let cx = Ctxt::new();
    let ast = ast::parse_workflow(&cx, tokens);
    let names = ast.as_ref().map(Names::resolve);
    let spec = match (&ast, &names) {
        (Some(ast), Some(names)) => {
            check::run_all(&cx, ast, names);
            (!cx.has_errors()).then(|| lower(ast, names))
        }
        _ => None,
    };
    Parsed {
        ast,
        names,
        spec,
        errors: cx.into_errors(),
    }
}

/// Parses a `workflow!` body from source text (used by the CLI and tests).
pub fn parse_str(source: &str) -> Parsed {
    match source.parse::<TokenStream>() {
        Ok(tokens) => parse(tokens),
        Err(error) => Parsed {
            ast: None,
            names: None,
            spec: None,
            errors: vec![syn::Error::new(error.span(), error)],
        },
    }
}

/// What a name in a spec refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    /// A step, by index.
    Step(usize),
    /// A workflow input, by index.
    Input(usize),
    /// The reserved `env`.
    Env,
    /// The reserved `ctx`.
    Ctx,
    /// The current item of a map step: its `for_each` binding, in its own calls.
    Item,
}

/// Names resolved once, shared by the checks and the lowering.
#[derive(Debug)]
pub struct Names {
    /// Step ids in order (the first declaration of a duplicated id wins).
    pub steps: Vec<String>,
    /// Input names in order.
    pub inputs: Vec<String>,
    /// Per step: its resolved dependencies (arguments of `action`, then `depends_on`),
    /// first mention first, without duplicates, unknown names left out.
    pub deps: Vec<Vec<usize>>,
    /// Per step: whether its output may be absent.
    pub optional: Vec<bool>,
    /// Per step: the name its items are bound to, for a map step.
    pub bindings: Vec<Option<String>>,
    /// Every step and input by name (first declaration wins), for O(1) lookups.
    index: std::collections::HashMap<String, Name>,
}

/// The reserved argument names.
pub const RESERVED: &[&str] = &["env", "ctx"];

impl Names {
    fn resolve(ast: &WorkflowAst) -> Names {
        let steps: Vec<String> = ast.steps.iter().map(|s| s.id.to_string()).collect();
        let inputs: Vec<String> = ast.inputs.iter().map(|i| i.name.to_string()).collect();
        let mut index = std::collections::HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            index.entry(step.clone()).or_insert(Name::Step(i));
        }
        for (i, input) in inputs.iter().enumerate() {
            index.entry(input.clone()).or_insert(Name::Input(i));
        }
        let bindings = ast
            .steps
            .iter()
            .map(|step| {
                let (_, for_each) = step.fields.for_each.as_ref()?;
                Some(for_each.binding.to_string())
            })
            .collect();
        let mut names = Names {
            steps,
            inputs,
            deps: Vec::new(),
            optional: Vec::new(),
            bindings,
            index,
        };
        names.deps = ast
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| {
                let mut deps = Vec::new();
                for dep in &step_dep_idents(step) {
                    if let Some(Name::Step(dep)) = names.lookup(&dep.to_string()) {
                        if dep != index && !deps.contains(&dep) {
                            deps.push(dep);
                        }
                    }
                }
                deps
            })
            .collect();
        names.optional = compute_optional(ast, &names.deps);
        names
    }

    /// What `name` refers to, if anything. Steps shadow nothing: duplicates are errors.
    pub fn lookup(&self, name: &str) -> Option<Name> {
        match name {
            "env" => Some(Name::Env),
            "ctx" => Some(Name::Ctx),
            _ => self.index.get(name).copied(),
        }
    }

    /// What `name` refers to in an argument of `step`'s own calls (`action`, `compensate`,
    /// `reconcile`): a map step's binding is its item there; anything else as [`lookup`].
    ///
    /// [`lookup`]: Names::lookup
    pub fn lookup_arg(&self, step: usize, name: &str) -> Option<Name> {
        match self.bindings.get(step) {
            Some(Some(binding)) if binding == name => Some(Name::Item),
            _ => self.lookup(name),
        }
    }

    /// Every name an argument may use, for suggestions.
    pub fn candidates(&self) -> impl Iterator<Item = &str> {
        self.steps
            .iter()
            .chain(self.inputs.iter())
            .map(String::as_str)
            .chain(RESERVED.iter().copied())
    }

    /// The steps upstream of `step` (its transitive dependencies), as a bitmap.
    pub fn upstream(&self, step: usize) -> Vec<bool> {
        let mut seen = vec![false; self.deps.len()];
        let mut stack: Vec<usize> = self.deps.get(step).cloned().unwrap_or_default();
        while let Some(next) = stack.pop() {
            if next < seen.len() && !seen[next] {
                seen[next] = true;
                stack.extend(self.deps[next].iter().copied());
            }
        }
        seen
    }
}

/// The identifiers that make dependencies, first mention first: the action's name
/// arguments, the child workflow's, the names a map's source reads, then `depends_on`.
/// (Names that are not steps are filtered out by the caller.)
pub fn step_dep_idents(step: &StepAst) -> Vec<syn::Ident> {
    let fields = &step.fields;
    let names = |arg: &ArgAst| match arg {
        ArgAst::Name(ident) => Some(ident.clone()),
        ArgAst::Literal(_) => None,
    };
    let action = fields
        .action
        .iter()
        .flat_map(|call| call.args.iter())
        .filter_map(names);
    let child = fields
        .workflow
        .iter()
        .flat_map(|child| child.fields.iter())
        .filter_map(|field| names(&field.arg));
    let source = fields
        .for_each
        .iter()
        .flat_map(|(_, for_each)| check::condition_reads(&for_each.source));
    let explicit = fields
        .depends_on
        .iter()
        .flat_map(|(_, list)| list.iter().cloned());
    action.chain(child).chain(source).chain(explicit).collect()
}

fn compute_optional(ast: &WorkflowAst, deps: &[Vec<usize>]) -> Vec<bool> {
    let own: Vec<bool> = ast
        .steps
        .iter()
        .map(|step| {
            matches!(step.fields.on_failure, Some((_, OnFailure::Continue)))
                || step.fields.condition.is_some()
                || (step.kw == StepKw::Event
                    && matches!(step.fields.on_timeout, Some((_, OnTimeoutAst::Continue))))
        })
        .collect();
    // Propagate downstream in topological order; on a cycle (reported elsewhere) use the
    // steps' own flags only.
    match crate::graph::topological_order(deps) {
        Ok(order) => {
            let mut optional = own;
            for step in order {
                if deps[step].iter().any(|dep| optional[*dep]) {
                    optional[step] = true;
                }
            }
            optional
        }
        Err(_) => own,
    }
}

fn lower(ast: &WorkflowAst, names: &Names) -> Spec {
    let steps = ast
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| lower_step(step, index, names))
        .collect();
    Spec {
        name: ast.name.to_string(),
        journal_name: ast.journal_name.as_ref().map(syn::LitStr::value),
        doc: ast.docs.join("\n"),
        inputs: ast
            .inputs
            .iter()
            .map(|input| Input {
                name: input.name.to_string(),
                ty: tokens_to_string(&input.ty),
            })
            .collect(),
        env: ast.env.as_ref().map(tokens_to_string),
        steps,
        schedule: ast.schedule.as_ref().map(lower_schedule),
        search: search::lower_search(ast),
        retention: ast.retention.map(|retention| retention.value.value),
        concurrency: ast
            .flow
            .concurrency
            .as_ref()
            .and_then(flow::lower_run_concurrency),
        priority: ast
            .flow
            .priority
            .as_ref()
            .map(|(_, priority)| priority.lower()),
        debounce: ast.flow.debounce.as_ref().and_then(flow::lower_debounce),
    }
}

/// A checked `schedule: { ... }` with its defaults filled in; the zone under its
/// canonical IANA name.
fn lower_schedule(ast: &schedule::ScheduleAst) -> crate::schedule::Schedule {
    let mut schedule = crate::schedule::Schedule::new(
        ast.cron
            .as_ref()
            .map(syn::LitStr::value)
            .unwrap_or_default(),
    );
    if let Some(tz) = &ast.tz {
        let written = tz.value();
        schedule.tz = crate::schedule::parse_zone(&written)
            .ok()
            .and_then(|zone| zone.iana_name().map(str::to_owned))
            .unwrap_or(written);
    }
    if let Some((overlap, _)) = ast.overlap {
        schedule.overlap = overlap;
    }
    if let Some((catchup, _)) = ast.catchup {
        schedule.catchup = catchup;
    }
    if let Some(window) = ast.window {
        schedule.window = window.value;
    }
    if let Some((dst_gap, _)) = ast.dst_gap {
        schedule.dst_gap = dst_gap;
    }
    schedule.jitter = ast.jitter.map(|jitter| jitter.value);
    schedule
}

/// Renders tokens the way a person writes them: `Vec<User>`, not `Vec < User >`.
pub fn tokens_to_string(tokens: &impl ToTokens) -> String {
    let raw = tokens.to_token_stream().to_string();
    let mut out = String::with_capacity(raw.len());
    let chars: Vec<char> = raw.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if *c == ' ' {
            let prev = if i > 0 { chars[i - 1] } else { ' ' };
            let next = chars.get(i + 1).copied().unwrap_or(' ');
            let tight_after = matches!(prev, '<' | '&' | '(' | '[' | ':' | '.' | '!');
            let tight_before = matches!(next, '<' | '>' | ',' | ')' | ']' | ':' | '.' | '(' | '?');
            if tight_after || tight_before {
                continue;
            }
        }
        out.push(*c);
    }
    tighten_closure_bars(&out)
}

/// `(| a | a.ok)` -> `(|a| a.ok)`: closure parameters as people write them. A `|` opens
/// parameters after `(`, `,`, `=`, `move` or at the start; `||` is left alone.
fn tighten_closure_bars(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_params = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '|' && in_params {
            while out.ends_with(' ') {
                out.pop();
            }
            out.push('|');
            in_params = false;
        } else if c == '|' {
            let before = out.trim_end();
            let opens =
                before.is_empty() || before.ends_with(['(', ',', '=']) || before.ends_with("move");
            out.push('|');
            if opens && chars.get(i + 1) != Some(&'|') {
                in_params = true;
                while chars.get(i + 1) == Some(&' ') {
                    i += 1;
                }
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

fn lower_step(step: &StepAst, index: usize, names: &Names) -> Step {
    let fields = &step.fields;
    let kind = match step.kw {
        StepKw::Step => match &fields.workflow {
            Some(child) if fields.action.is_none() => StepKind::Child(ChildStep {
                workflow: tokens_to_string(&child.path),
                name: None,
                args: child
                    .fields
                    .iter()
                    .map(|field| ChildArg {
                        field: field.field.to_string(),
                        arg: lower_arg(&field.arg, index, names),
                    })
                    .collect(),
            }),
            _ => StepKind::Action(ActionStep {
                call: fields
                    .action
                    .as_ref()
                    .map(|call| lower_call(call, index, names))
                    .unwrap_or_else(|| Call {
                        path: String::new(),
                        args: Vec::new(),
                    }),
                compensate: fields
                    .compensate
                    .as_ref()
                    .map(|call| lower_call(call, index, names)),
                reconcile: fields
                    .reconcile
                    .as_ref()
                    .map(|call| lower_call(call, index, names)),
                effect: fields.effect.as_ref().map_or(Effect::Internal, |(_, e)| *e),
                idempotent: fields.idempotent.as_ref().is_some_and(|(_, v)| *v),
                spawn: fields.spawn.as_ref().is_some_and(|(_, v)| *v),
                for_each: fields.for_each.as_ref().map(|(_, for_each)| ForEach {
                    binding: for_each.binding.to_string(),
                    source: tokens_to_string(&for_each.source),
                    concurrency: fields
                        .concurrency
                        .as_ref()
                        .map_or(DEFAULT_CONCURRENCY, |(_, (n, _))| *n),
                    on_item_failure: fields
                        .on_item_failure
                        .as_ref()
                        .map_or(OnItemFailure::Abort, |(_, v)| *v),
                }),
            }),
        },
        StepKw::Human => StepKind::Human(HumanStep {
            assignee: fields
                .assignee
                .as_ref()
                .map(|(_, lit)| lit.value())
                .unwrap_or_default(),
            on_timeout: match fields.on_timeout.as_ref().map(|(_, v)| v) {
                Some(OnTimeoutAst::Escalate(group)) => OnTimeout::Escalate(group.value()),
                Some(OnTimeoutAst::Approve) => OnTimeout::Approve,
                Some(OnTimeoutAst::Reject) => OnTimeout::Reject,
                Some(OnTimeoutAst::Abort | OnTimeoutAst::Continue) | None => OnTimeout::Abort,
            },
            prompt: fields.prompt.as_ref().map(|(_, lit)| lit.value()),
            approvals: fields.approvals.as_ref().map_or(1, |(_, (n, _))| *n),
            self_approval: fields.self_approval.as_ref().is_none_or(|(_, (v, _))| *v),
            title: fields.title.as_ref().map(|(_, lit)| lit.value()),
            show: fields
                .show
                .iter()
                .flat_map(|(_, shown)| shown.iter().map(ast::ShownAst::path))
                .collect(),
        }),
        StepKw::Event => StepKind::Event(EventStep {
            on_timeout: match fields.on_timeout.as_ref().map(|(_, v)| v) {
                Some(OnTimeoutAst::Continue) => OnEventTimeout::Continue,
                _ => OnEventTimeout::Abort,
            },
        }),
    };
    Step {
        id: step.id.to_string(),
        doc: step.docs.join("\n"),
        output: step
            .output
            .as_ref()
            .map_or_else(|| "Approval".to_owned(), tokens_to_string),
        kind,
        deps: names.deps[index].clone(),
        on_failure: fields
            .on_failure
            .as_ref()
            .map_or(OnFailure::Abort, |(_, v)| *v),
        timeout: fields.timeout.as_ref().map(|(_, d)| d.value),
        retry: fields.retry.as_ref().map(|(_, r)| retry_policy(r)),
        condition: fields
            .condition
            .as_ref()
            .map(|(_, expr)| tokens_to_string(expr)),
        optional: names.optional[index],
        concurrency: fields
            .limit
            .as_ref()
            .and_then(|(_, limit)| flow::lower_step_concurrency(limit)),
        rate: fields
            .rate
            .as_ref()
            .and_then(|(_, rate)| flow::lower_rate(rate)),
    }
}

/// The policy a `retry` block describes, with defaults for the keys it leaves out.
pub fn retry_policy(retry: &RetryAst) -> RetryPolicy {
    let default = RetryPolicy::default();
    RetryPolicy {
        max_attempts: retry.max_attempts.map_or(default.max_attempts, |(n, _)| n),
        backoff: retry.backoff.map_or(default.backoff, |(b, _)| b),
        initial: retry.initial.map_or(default.initial, |d| d.value),
        max: retry.max.map_or(default.max, |d| d.value),
        multiplier: retry.multiplier.map_or(default.multiplier, |(m, _)| m),
        jitter: retry.jitter.map_or(default.jitter, |(j, _)| j),
        deadline: retry.deadline.map(|d| d.value),
        retry_on: retry.retry_on.as_ref().map_or(default.retry_on, |kinds| {
            kinds.iter().map(|(k, _)| *k).collect()
        }),
    }
}

fn lower_call(call: &CallAst, step: usize, names: &Names) -> Call {
    Call {
        path: tokens_to_string(&call.path),
        args: call
            .args
            .iter()
            .map(|arg| lower_arg(arg, step, names))
            .collect(),
    }
}

fn lower_arg(arg: &ArgAst, step: usize, names: &Names) -> Arg {
    match arg {
        ArgAst::Name(ident) => match names.lookup_arg(step, &ident.to_string()) {
            Some(Name::Step(i)) => Arg::Step(i),
            Some(Name::Input(i)) => Arg::Input(i),
            Some(Name::Env) => Arg::Env,
            Some(Name::Item) => Arg::Item,
            Some(Name::Ctx) | None => Arg::Ctx,
        },
        ArgAst::Literal(expr) => Arg::Literal(match &**expr {
            syn::Expr::Unary(negated) => format!("-{}", tokens_to_string(&negated.expr)),
            other => tokens_to_string(other),
        }),
    }
}

#[cfg(test)]
mod display_tests {
    use super::tighten_closure_bars;

    #[test]
    fn closure_parameters_read_as_written() {
        assert_eq!(
            tighten_closure_bars("a.is_some_and(| a | a.ok)"),
            "a.is_some_and(|a| a.ok)"
        );
        assert_eq!(
            tighten_closure_bars("x.map(| (a, b) | a)"),
            "x.map(|(a, b)| a)"
        );
        assert_eq!(tighten_closure_bars("a || b"), "a || b");
        assert_eq!(tighten_closure_bars("f(|| 1)"), "f(|| 1)");
        assert_eq!(tighten_closure_bars("a | b"), "a | b");
    }
}
