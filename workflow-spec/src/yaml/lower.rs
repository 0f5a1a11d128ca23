//! From the YAML tree to the text of the equivalent `workflow!` body, with a map from
//! every piece of that text back to the file position it came from.
//!
//! Only the file's shape is checked here (keys, kinds of values, names that must be
//! identifiers, types that must parse); what a spec means (dependencies, durations, retry
//! sanity, human timeouts, effects, …) is left to the one set of checks in `parse`.
//! Every value copied into the text is first made safe: it lexes as Rust tokens, its
//! groups are balanced and it has no top-level comma, so no value can end its field or
//! its step and smuggle in another.

use proc_macro2::{Literal, TokenStream, TokenTree};

use super::diag::{FileError, Pos};
use super::tree::{Map, Node, Scalar};
use crate::parse::ctxt::did_you_mean;

/// The keys at the top of a spec file.
pub const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "journal_name",
    "env",
    "inputs",
    "schedule",
    "steps",
];

/// The keys of one step in a spec file.
pub const STEP_KEYS: &[&str] = &[
    "id",
    "kind",
    "description",
    "action",
    "inputs",
    "with",
    "output",
    "depends_on",
    "on_failure",
    "retry",
    "timeout",
    "condition",
    "assignee",
    "on_timeout",
    "escalate_to",
    "prompt",
    "effect",
    "idempotent",
    "reconcile",
    "compensate",
    "for_each",
    "concurrency",
    "on_item_failure",
    "workflow",
];

/// The action that marks a human checkpoint in seed 003's spelling.
pub const REQUEST_APPROVAL: &str = "request_approval";

/// What the lowering produced: the inline text (when the file's shape allowed one), the
/// map back to the file, and the errors of the file's shape.
#[derive(Debug, Default)]
pub(crate) struct Lowering {
    /// The `workflow!` body.
    pub(crate) text: String,
    /// `(char offset in text, position in the file, whether the text is verbatim)`,
    /// by offset.
    pub(crate) map: Vec<(usize, Pos, bool)>,
    /// The errors found in the file's shape.
    pub(crate) errors: Vec<FileError>,
    /// Whether the front end already reported that the steps are missing or unreadable.
    pub(crate) no_steps: bool,
    chars: usize,
}

/// The macro's arguments that complete a file: the module its actions live in, and the
/// environment type.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The module `action: name` refers to (`crate::onboarding`); without it, actions
    /// are paths as written.
    pub actions: Option<String>,
    /// The environment type; overrides the file's `env:`.
    pub env: Option<String>,
    /// The environment type assumed when neither the options nor the file give one (the
    /// linter, which checks without Rust types).
    pub env_fallback: Option<String>,
}

impl Lowering {
    fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.chars += text.chars().count();
    }

    /// Appends text that came from `pos` in the file.
    fn at(&mut self, pos: Pos, text: &str) {
        self.map.push((self.chars, pos, false));
        self.push(text);
    }

    /// Appends a scalar copied as it is written (mapped character by character when it
    /// appears verbatim in the file).
    fn scalar(&mut self, scalar: &Scalar) {
        match scalar.verbatim {
            Some(col) => self.map.push((
                self.chars,
                Pos {
                    line: scalar.pos.line,
                    col,
                },
                true,
            )),
            None => self.map.push((self.chars, scalar.pos, false)),
        }
        self.push(&scalar.text);
    }

    fn error(&mut self, pos: Pos, message: impl Into<String>, help: Option<impl Into<String>>) {
        self.errors.push(FileError::new(pos, message, help));
    }

    /// The file position of a character offset in the text.
    pub(crate) fn locate(&self, offset: usize) -> Pos {
        let index = self.map.partition_point(|(at, _, _)| *at <= offset);
        match index.checked_sub(1).and_then(|i| self.map.get(i)) {
            Some((at, pos, true)) => Pos {
                line: pos.line,
                col: pos.col + (offset - at),
            },
            Some((_, pos, false)) => *pos,
            None => Pos { line: 1, col: 1 },
        }
    }
}

/// Lowers the root node; `None` text when the file is not a mapping with a usable name.
pub(crate) fn lower(root: &Node, options: &Options) -> Lowering {
    let mut out = Lowering::default();
    let Node::Map(top) = root else {
        out.error(
            root.pos(),
            format!("a spec file is a mapping, found {}", root.what()),
            Some("start with `name: my-workflow` and a list of `steps:`"),
        );
        return out;
    };
    for (key, _) in &top.entries {
        if !TOP_KEYS.contains(&key.text.as_str()) {
            let help = did_you_mean(&key.text, TOP_KEYS.iter().copied())
                .unwrap_or_else(|| format!("a spec file takes {}", list(TOP_KEYS)));
            out.error(
                key.pos,
                format!("unknown key `{}` at the top of the spec", key.text),
                Some(help),
            );
        }
    }
    header(&mut out, top, options);
    match top.get("steps") {
        Some(Node::Seq(seq)) => {
            for (index, item) in seq.items.iter().enumerate() {
                step(&mut out, index, item, options);
            }
        }
        Some(other) => {
            out.no_steps = true;
            out.error(
                other.pos(),
                format!("`steps` is a list of steps, found {}", other.what()),
                Some("write each step as `- id: name` under `steps:`"),
            )
        }
        None => {
            out.no_steps = true;
            out.error(
                top.pos,
                "the spec has no `steps`",
                Some("add `steps:` with a list of steps, each `- id: name`"),
            )
        }
    }
    out.push("}\n");
    out
}

/// `/// doc`, `#[workflow(name = ..)]`, `pub workflow Name(inputs) env Env {`.
fn header(out: &mut Lowering, top: &Map, options: &Options) {
    if let Some(description) = string(out, top, "description") {
        doc(out, &description.text);
    }
    if let Some(journal) = string(out, top, "journal_name") {
        out.push("#[workflow(name = ");
        out.at(journal.pos, &Literal::string(&journal.text).to_string());
        out.push(")]\n");
    }
    out.push("pub workflow ");
    match string(out, top, "name") {
        Some(name) => {
            let ident = type_name(&name.text);
            if syn::parse_str::<syn::Ident>(&ident).is_err() {
                out.error(
                    name.pos,
                    format!("`{}` cannot name a workflow type", name.text),
                    Some("use letters, digits, `-` and `_`, starting with a letter: `user-onboarding`"),
                );
                out.at(name.pos, "Unnamed");
            } else {
                out.at(name.pos, &ident);
            }
        }
        None => {
            out.error(
                top.pos,
                "the spec has no `name`",
                Some("add `name: user-onboarding` (the workflow type is `UserOnboarding`)"),
            );
            out.at(top.pos, "Unnamed");
        }
    }
    out.push("(");
    match top.get("inputs") {
        Some(Node::Map(inputs)) => {
            for (name, ty) in &inputs.entries {
                if !is_ident(&name.text) {
                    out.error(
                        name.pos,
                        format!("input `{}` is not a name", name.text),
                        Some("an input is `name: Type`, e.g. `signup: Signup`"),
                    );
                    continue;
                }
                let Some(ty) = typed(out, ty, "the type of an input") else {
                    continue;
                };
                out.scalar(name);
                out.push(": ");
                out.scalar(ty);
                out.push(", ");
            }
        }
        Some(other) => out.error(
            other.pos(),
            format!(
                "`inputs` is a mapping of names to types, found {}",
                other.what()
            ),
            Some("write `inputs:` then one `name: Type` a line, e.g. `signup: Signup`"),
        ),
        None => {}
    }
    out.push(")");
    let env = match (&options.env, string(out, top, "env")) {
        (Some(env), _) => Some((env.clone(), None)),
        (None, Some(env)) => typed(out, &Node::Scalar(env.clone()), "the environment type")
            .map(|scalar| (scalar.text.clone(), Some(scalar.clone()))),
        (None, None) => options.env_fallback.clone().map(|env| (env, None)),
    };
    if let Some((env, scalar)) = env {
        out.push(" env ");
        match scalar {
            Some(scalar) => out.scalar(&scalar),
            None => out.push(&env),
        }
    }
    out.push(" {\n");
    // `cron` and `tz` are text; `overlap: skip`, `window: 6h`, `catchup: "all(max: 10)"`
    // are copied as written.
    if let Some((key, value)) = top.entries.iter().find(|(key, _)| key.text == "schedule") {
        block(
            out,
            key,
            value,
            "write `schedule:` then `cron: \"0 9 * * MON-FRI\"` and `tz: Europe/Berlin` on lines of their own",
            &["cron", "tz"],
        );
    }
}

/// A block key (`retry:`, `schedule:`) as the inline language writes it: `key: { name:
/// value, .. }`. The values of `text_keys` are text (a string literal inline, `cron: "0 9
/// * * *"`); every other value is copied as written, and the checks judge them.
fn block(out: &mut Lowering, key: &Scalar, value: &Node, example: &str, text_keys: &[&str]) {
    let what = key.text.as_str();
    let Node::Map(map) = value else {
        out.error(
            value.pos(),
            format!("`{what}` is a mapping, found {}", value.what()),
            Some(example),
        );
        return;
    };
    out.at(key.pos, what);
    out.push(": {");
    for (k, v) in &map.entries {
        if !is_ident(&k.text) {
            out.error(
                k.pos,
                format!("`{}` is not a {what} key", k.text),
                None::<String>,
            );
            continue;
        }
        match v {
            Node::Scalar(text) if text_keys.contains(&k.text.as_str()) => {
                out.scalar(k);
                out.push(": ");
                out.at(text.pos, &Literal::string(&text.text).to_string());
            }
            _ => {
                if !copyable(out, v) {
                    continue;
                }
                out.scalar(k);
                out.push(": ");
                raw_or_list(out, v);
            }
        }
        out.push("\n,\n");
    }
    out.push("}\n,\n");
}

/// The workflow type a spec's `name` gives: `user-onboarding` -> `UserOnboarding`.
pub fn type_name(name: &str) -> String {
    name.split(['-', '_', ' ', '.'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        })
        .collect()
}

fn doc(out: &mut Lowering, text: &str) {
    for line in text.trim_end().lines() {
        // A doc comment ends at the line's end; nothing in it can reach the tokens.
        out.push("/// ");
        out.push(line);
        out.push("\n");
    }
}

/// The scalar under `key`, or an error when it is something else.
fn string<'m>(out: &mut Lowering, map: &'m Map, key: &str) -> Option<&'m Scalar> {
    match map.get(key)? {
        Node::Scalar(scalar) => Some(scalar),
        other => {
            out.error(
                other.pos(),
                format!("`{key}` takes a single value, found {}", other.what()),
                None::<String>,
            );
            None
        }
    }
}

/// A scalar that parses as a Rust type.
fn typed<'n>(out: &mut Lowering, node: &'n Node, what: &str) -> Option<&'n Scalar> {
    let Node::Scalar(scalar) = node else {
        out.error(
            node.pos(),
            format!("{what} is a Rust type, found {}", node.what()),
            Some("write the type as it reads in Rust, e.g. `Vec<User>`"),
        );
        return None;
    };
    if parse_value::<syn::Type>(&scalar.text).is_none() || !safe(&scalar.text) {
        out.error(
            scalar.pos,
            format!("`{}` is not a Rust type ({what})", scalar.text),
            Some("write the type as it reads in Rust, e.g. `Vec<User>` or `()`"),
        );
        return None;
    }
    Some(scalar)
}

fn is_ident(text: &str) -> bool {
    syn::parse_str::<syn::Ident>(text).is_ok()
}

/// How deep brackets may nest in one value. syn parses recursively, so a value is
/// measured before it is parsed; the checks bound whole specs the same way.
const MAX_VALUE_NESTING: usize = 64;

/// `text` parsed as a `T`, when it parses and does not nest too deep.
fn parse_value<T: syn::parse::Parse>(text: &str) -> Option<T> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for c in text.chars() {
        match c {
            '(' | '[' | '{' | '<' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' | '>' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_VALUE_NESTING {
        return None;
    }
    syn::parse_str::<T>(text).ok()
}

/// Whether `text` can be copied into a field's value: it lexes, and it has no top-level
/// comma or semicolon (groups are balanced by the lexer).
fn safe(text: &str) -> bool {
    match text.parse::<TokenStream>() {
        Ok(tokens) => !tokens.into_iter().any(
            |tt| matches!(&tt, TokenTree::Punct(p) if p.as_char() == ',' || p.as_char() == ';'),
        ),
        Err(_) => false,
    }
}

/// Whether a plain scalar reads as a Rust literal of its own (a number or a boolean).
fn rust_literal(text: &str) -> bool {
    text == "true"
        || text == "false"
        || parse_value::<syn::Lit>(text.strip_prefix('-').unwrap_or(text))
            .is_some_and(|lit| matches!(lit, syn::Lit::Int(_) | syn::Lit::Float(_)))
}

/// Which kind of item a step is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Step,
    Human,
    Event,
}

fn step(out: &mut Lowering, index: usize, item: &Node, options: &Options) {
    let Node::Map(map) = item else {
        out.error(
            item.pos(),
            format!("a step is a mapping, found {}", item.what()),
            Some("write `- id: name` then the step's keys, indented below it"),
        );
        return;
    };
    let id = match string(out, map, "id") {
        Some(id) if is_ident(&id.text) => Some(id.clone()),
        Some(id) => {
            out.error(
                id.pos,
                format!("step id `{}` is not a name", id.text),
                Some("use letters, digits and `_`, starting with a letter: `create_account`"),
            );
            None
        }
        None => {
            out.error(
                map.pos,
                format!("step {} has no `id`", index + 1),
                Some("add `id: name`; other steps refer to it by that name"),
            );
            None
        }
    };
    let id_text = id
        .as_ref()
        .map_or_else(|| format!("step_{}", index + 1), |id| id.text.clone());
    let action = string(out, map, "action").cloned();
    let inferred = if action.as_ref().is_some_and(|a| a.text == REQUEST_APPROVAL) {
        Kind::Human
    } else {
        Kind::Step
    };
    let kind = match string(out, map, "kind") {
        Some(kind) => match kind.text.as_str() {
            "step" => Kind::Step,
            "human" => Kind::Human,
            "event" => Kind::Event,
            other => {
                let help = did_you_mean(other, ["step", "human", "event"])
                    .unwrap_or_else(|| "a step's kind is `step`, `human` or `event`".into());
                out.error(kind.pos, format!("unknown kind `{other}`"), Some(help));
                // Go on with the kind its keys suggest, so one typo is one error.
                if map.get("assignee").is_some() {
                    Kind::Human
                } else {
                    inferred
                }
            }
        },
        None => inferred,
    };
    for (key, value) in &map.entries {
        if !known_key(&key.text) {
            let help = did_you_mean(&key.text, STEP_KEYS.iter().copied().chain(inline_keys()))
                .unwrap_or_else(|| {
                let example = match value {
                    Node::Scalar(value) => value.text.clone(),
                    _ => "...".into(),
                };
                format!(
                    "a literal argument of the action goes under `with:`, e.g. `with: {{ {}: {example} }}`",
                    key.text
                )
            });
            out.error(
                key.pos,
                format!("unknown key `{}` in step `{id_text}`", key.text),
                Some(help),
            );
        }
    }
    if let Some(description) = string(out, map, "description") {
        doc(out, &description.text);
    }
    let kw = match kind {
        Kind::Step => "step",
        Kind::Human => "human",
        Kind::Event => "event",
    };
    out.at(map.pos, kw);
    out.push(" ");
    match &id {
        Some(id) => out.scalar(id),
        None => out.at(map.pos, &id_text),
    }
    match map.get("output") {
        Some(node) => match typed(out, node, "a step's output") {
            Some(ty) => {
                out.push(" -> ");
                out.scalar(ty);
            }
            None => out.push(" -> ()"),
        },
        None if kind == Kind::Human => {}
        None => {
            let what = if kind == Kind::Event {
                "the type of its payload"
            } else {
                "the type its action returns, `()` for none"
            };
            out.error(
                id.as_ref().map_or(map.pos, |id| id.pos),
                format!("step `{id_text}` has no `output:` type"),
                Some(format!(
                    "add `output: Type` with {what}, e.g. `output: User`"
                )),
            );
            out.push(" -> ()");
        }
    }
    out.push(" {\n");
    for (key, value) in &map.entries {
        field(out, kind, &id_text, map, key, value, options);
    }
    out.push("}\n");
}

#[allow(clippy::too_many_arguments)]
fn field(
    out: &mut Lowering,
    kind: Kind,
    id: &str,
    map: &Map,
    key: &Scalar,
    value: &Node,
    options: &Options,
) {
    let name = key.text.as_str();
    match name {
        "id" | "kind" | "description" | "output" | "with" | "escalate_to" => {
            if name == "escalate_to" && !is_escalate(map) {
                out.error(
                    key.pos,
                    format!("`escalate_to` in step `{id}` needs `on_timeout: escalate`"),
                    Some("set `on_timeout: escalate`, or remove `escalate_to`"),
                );
            }
            if name == "with" && map.get("action").is_none() {
                out.error(
                    key.pos,
                    format!("`with` in step `{id}` gives arguments, but the step has no `action`"),
                    Some("add `action: function_name`"),
                );
            }
        }
        "inputs" if map.get("action").is_none() => out.error(
            key.pos,
            format!("`inputs` in step `{id}` names arguments, but the step has no `action`"),
            Some("add `action: function_name`"),
        ),
        "inputs" => {}
        "action" => action(out, kind, id, map, key, value, options),
        "compensate" | "reconcile" => {
            let call = match value {
                Node::Scalar(path) => call(out, key, path, None, None, options),
                Node::Map(inner) => {
                    for (k, _) in &inner.entries {
                        if !["action", "inputs", "with"].contains(&k.text.as_str()) {
                            let help = did_you_mean(&k.text, ["action", "inputs", "with"])
                                .unwrap_or_else(|| {
                                    format!("`{name}` takes `action`, `inputs` and `with`")
                                });
                            out.error(
                                k.pos,
                                format!("unknown key `{}` in `{name}`", k.text),
                                Some(help),
                            );
                        }
                    }
                    match string(out, inner, "action") {
                        Some(path) => call(
                            out,
                            key,
                            path,
                            inner.get("inputs"),
                            inner.get("with"),
                            options,
                        ),
                        None => {
                            out.error(
                                inner.pos,
                                format!("`{name}` in step `{id}` has no `action`"),
                                Some(format!(
                                    "write `{name}: {{ action: function_name, inputs: [..] }}`"
                                )),
                            );
                            None
                        }
                    }
                }
                Node::Seq(_) => {
                    out.error(
                        value.pos(),
                        format!("`{name}` takes a function name or a mapping, found a list"),
                        Some(format!(
                            "write `{name}: {{ action: function_name, inputs: [..] }}`"
                        )),
                    );
                    None
                }
            };
            if let Some(call) = call {
                out.at(key.pos, name);
                out.push(": ");
                out.push(&call.0);
                out.map.extend(call.1);
                out.map.sort_by_key(|(at, _, _)| *at);
                out.push("\n,\n");
            }
        }
        "depends_on" => {
            let items: Vec<&Node> = match value {
                Node::Seq(seq) => seq.items.iter().collect(),
                other => vec![other],
            };
            out.at(key.pos, "depends_on");
            out.push(": [");
            for item in items {
                match item {
                    Node::Scalar(dep) if is_ident(&dep.text) => {
                        out.scalar(dep);
                        out.push(", ");
                    }
                    other => out.error(
                        other.pos(),
                        "`depends_on` lists step ids",
                        Some("write `depends_on: [create_account]`"),
                    ),
                }
            }
            out.push("]\n,\n");
        }
        "retry" => block(
            out,
            key,
            value,
            "write `retry: { max_attempts: 3, backoff: exponential }`",
            &[],
        ),
        "assignee" | "prompt" => {
            if let Node::Scalar(text) = value {
                out.at(key.pos, name);
                out.push(": ");
                out.at(text.pos, &Literal::string(&text.text).to_string());
                out.push("\n,\n");
            } else {
                out.error(
                    value.pos(),
                    format!("`{name}` takes text, found {}", value.what()),
                    None::<String>,
                );
            }
        }
        "on_timeout" => {
            let Node::Scalar(choice) = value else {
                out.error(
                    value.pos(),
                    format!("`on_timeout` takes one choice, found {}", value.what()),
                    Some("write `on_timeout: escalate` with `escalate_to: group`, or `abort`, `approve`, `reject`"),
                );
                return;
            };
            out.at(key.pos, "on_timeout");
            out.push(": ");
            if choice.text == "escalate" {
                match map.get("escalate_to") {
                    Some(Node::Scalar(group)) => {
                        out.at(choice.pos, "escalate(");
                        out.at(group.pos, &Literal::string(&group.text).to_string());
                        out.push(")");
                    }
                    _ => {
                        out.error(
                            choice.pos,
                            format!("`on_timeout: escalate` in step `{id}` names no group to escalate to"),
                            Some("add `escalate_to: trust_and_safety_leads` with the group that takes the task over"),
                        );
                        out.at(choice.pos, "abort");
                    }
                }
            } else if copyable(out, value) {
                raw(out, choice);
            } else {
                out.at(choice.pos, "abort");
            }
            out.push("\n,\n");
        }
        "workflow" => child(out, id, key, value),
        _ if known_key(name) => {
            // Values the checks read as tokens: on_failure, timeout, condition, effect,
            // idempotent, for_each, concurrency, on_item_failure, and any key the inline
            // language gains later (a mapping is copied as `{ key: value, .. }`). A value
            // that cannot be copied is reported here and its field left out, so it is one
            // error, not two.
            if !copyable(out, value) {
                return;
            }
            out.at(key.pos, name);
            out.push(": ");
            raw_or_list(out, value);
            out.push("\n,\n");
        }
        _ => {}
    }
}

/// The keys of the inline language's items, which a file spells the same.
fn inline_keys() -> impl Iterator<Item = &'static str> {
    use crate::parse::ast;
    ast::STEP_KEYS
        .iter()
        .chain(ast::HUMAN_KEYS)
        .chain(ast::EVENT_KEYS)
        .copied()
}

/// Whether a step in a file takes `key`: a key of the file format, or of the inline
/// language (so a key the language gains works in files as written inline).
fn known_key(key: &str) -> bool {
    STEP_KEYS.contains(&key) || inline_keys().any(|inline| inline == key)
}

fn is_escalate(map: &Map) -> bool {
    matches!(map.get("on_timeout"), Some(Node::Scalar(s)) if s.text == "escalate")
}

/// Whether `value` can be copied as tokens: a scalar, a list of scalars, or a mapping of
/// names to such values, each scalar one value (see [`safe`]). Reports why not.
fn copyable(out: &mut Lowering, value: &Node) -> bool {
    match value {
        Node::Scalar(scalar) => copyable_scalar(out, scalar),
        Node::Seq(seq) => seq.items.iter().fold(true, |ok, item| match item {
            Node::Scalar(scalar) => copyable_scalar(out, scalar) && ok,
            other => {
                out.error(
                    other.pos(),
                    format!(
                        "expected a single value in this list, found {}",
                        other.what()
                    ),
                    None::<String>,
                );
                false
            }
        }),
        Node::Map(map) => map.entries.iter().fold(true, |ok, (key, value)| {
            if is_ident(&key.text) {
                copyable(out, value) && ok
            } else {
                out.error(
                    key.pos,
                    format!("`{}` is not a key", key.text),
                    None::<String>,
                );
                false
            }
        }),
    }
}

fn copyable_scalar(out: &mut Lowering, scalar: &Scalar) -> bool {
    if scalar.text.trim().is_empty() {
        out.error(
            scalar.pos,
            "expected a value here, found nothing",
            None::<String>,
        );
        false
    } else if !safe(&scalar.text) {
        out.error(
            scalar.pos,
            format!("`{}` is not a value a spec takes here", scalar.text),
            Some("a value is one name, number, duration or expression, without `,` or `;` outside brackets"),
        );
        false
    } else {
        true
    }
}

/// A value [`copyable`] passed, as tokens: a scalar, a list `[a, b]` of them, or a
/// mapping `{ key: value, .. }`.
fn raw_or_list(out: &mut Lowering, value: &Node) {
    match value {
        Node::Scalar(scalar) => raw(out, scalar),
        Node::Seq(seq) => {
            out.at(seq.pos, "[");
            for item in &seq.items {
                if let Node::Scalar(scalar) = item {
                    raw(out, scalar);
                    out.push(", ");
                }
            }
            out.push("]");
        }
        Node::Map(map) => {
            out.at(map.pos, "{ ");
            for (key, value) in &map.entries {
                out.scalar(key);
                out.push(": ");
                raw_or_list(out, value);
                out.push("\n,\n");
            }
            out.push("}");
        }
    }
}

/// A scalar [`copyable`] already passed, copied as it is written.
fn raw(out: &mut Lowering, scalar: &Scalar) {
    if safe(&scalar.text) {
        out.scalar(scalar);
    } else {
        out.at(scalar.pos, "()");
    }
}

/// `action: path(args)` from `action`, `inputs` and `with`.
#[allow(clippy::too_many_arguments)]
fn action(
    out: &mut Lowering,
    kind: Kind,
    id: &str,
    map: &Map,
    key: &Scalar,
    value: &Node,
    options: &Options,
) {
    let Node::Scalar(path) = value else {
        out.error(
            value.pos(),
            format!("`action` names a function, found {}", value.what()),
            Some("write `action: create_user_record` and its arguments under `inputs:`"),
        );
        return;
    };
    if kind == Kind::Human {
        if path.text != REQUEST_APPROVAL {
            out.error(
                path.pos,
                format!("human step `{id}` runs no action: it waits for a decision"),
                Some(format!(
                    "write `action: {REQUEST_APPROVAL}`, or leave `action` out"
                )),
            );
        }
        for extra in ["inputs", "with"] {
            if let Some(k) = map.key(extra) {
                out.error(
                    k.pos,
                    format!("human step `{id}` takes no `{extra}`: it runs no action"),
                    Some("show the person what to decide with `prompt:`"),
                );
            }
        }
        return;
    }
    if kind == Kind::Event {
        out.error(
            key.pos,
            format!("event `{id}` runs no action: it waits for a payload sent into the run"),
            Some("leave `action` out, or make it a step with `kind: step`"),
        );
        return;
    }
    match call(out, key, path, map.get("inputs"), map.get("with"), options) {
        Some((text, map_entries)) => {
            out.at(key.pos, "action");
            out.push(": ");
            out.push(&text);
            out.map.extend(map_entries);
            out.map.sort_by_key(|(at, _, _)| *at);
        }
        // Reported; a stand-in keeps the step from also lacking an action.
        None => out.at(key.pos, "action: unreadable_action()"),
    }
    out.push("\n,\n");
}

/// The text of a call and its map entries (offsets already absolute: the call is
/// appended right after they are computed).
type CallText = (String, Vec<(usize, Pos, bool)>);

fn call(
    out: &mut Lowering,
    key: &Scalar,
    path: &Scalar,
    inputs: Option<&Node>,
    with: Option<&Node>,
    options: &Options,
) -> Option<CallText> {
    let written = path.text.trim();
    if parse_value::<syn::Path>(written).is_none() {
        out.error(
            path.pos,
            format!("`{}` does not name a function", path.text),
            Some("write the function's name, e.g. `action: create_user_record`"),
        );
        return None;
    }
    // The call is appended after `action: `; offsets are computed against that start.
    let start = out.chars + key.text.chars().count() + 2;
    let mut text = String::new();
    let mut entries = Vec::new();
    let mut push = |text: &mut String, piece: &str, at: Option<(Pos, bool)>| {
        if let Some((pos, verbatim)) = at {
            entries.push((start + text.chars().count(), pos, verbatim));
        }
        text.push_str(piece);
    };
    let full = match &options.actions {
        Some(module) => format!("{module}::{written}"),
        None => written.to_owned(),
    };
    push(&mut text, &full, Some((path.pos, false)));
    push(&mut text, "(", None);
    let withs: Vec<(&Scalar, &Node)> = match with {
        Some(Node::Map(with)) => with.entries.iter().map(|(k, v)| (k, v)).collect(),
        Some(other) => {
            out.error(
                other.pos(),
                format!(
                    "`with` is a mapping of literal arguments, found {}",
                    other.what()
                ),
                Some("write `with: { template: welcome }`"),
            );
            Vec::new()
        }
        None => Vec::new(),
    };
    let mut used = vec![false; withs.len()];
    let literal = |out: &mut Lowering, value: &Node| -> Option<(String, Pos)> {
        match value {
            Node::Scalar(value) if !value.quoted && rust_literal(&value.text) => {
                Some((value.text.clone(), value.pos))
            }
            Node::Scalar(value) => Some((Literal::string(&value.text).to_string(), value.pos)),
            other => {
                out.error(
                    other.pos(),
                    format!("a `with` value is a single literal, found {}", other.what()),
                    Some("pass structured values as workflow inputs or step outputs"),
                );
                None
            }
        }
    };
    let names: Vec<&Node> = match inputs {
        Some(Node::Seq(seq)) => seq.items.iter().collect(),
        Some(one @ Node::Scalar(_)) => vec![one],
        Some(other) => {
            out.error(
                other.pos(),
                format!(
                    "`inputs` lists the action's arguments, found {}",
                    other.what()
                ),
                Some("write `inputs: [env, ctx, signup]`"),
            );
            Vec::new()
        }
        None => Vec::new(),
    };
    for name in names {
        match name {
            Node::Scalar(arg) if is_ident(&arg.text) => {
                if let Some(i) = withs.iter().position(|(k, _)| k.text == arg.text) {
                    used[i] = true;
                    if let Some((lit, pos)) = literal(out, withs[i].1) {
                        push(&mut text, &lit, Some((pos, false)));
                        push(&mut text, ", ", None);
                    }
                } else {
                    push(&mut text, &arg.text, Some(verbatim_of(arg)));
                    push(&mut text, ", ", None);
                }
            }
            other => out.error(
                other.pos(),
                "an argument in `inputs` names a workflow input, a step, `env` or `ctx`",
                Some("put literal arguments under `with:` and name them here"),
            ),
        }
    }
    for (i, (_, value)) in withs.iter().enumerate() {
        if !used[i] {
            if let Some((lit, pos)) = literal(out, value) {
                push(&mut text, &lit, Some((pos, false)));
                push(&mut text, ", ", None);
            }
        }
    }
    push(&mut text, ")", None);
    Some((text, entries))
}

fn verbatim_of(scalar: &Scalar) -> (Pos, bool) {
    match scalar.verbatim {
        Some(col) => (
            Pos {
                line: scalar.pos.line,
                col,
            },
            true,
        ),
        None => (scalar.pos, false),
    }
}

/// `workflow: { type: Shipping, inputs: { order: order, holds: reserve_lines } }`.
fn child(out: &mut Lowering, id: &str, key: &Scalar, value: &Node) {
    let Node::Map(map) = value else {
        out.error(
            value.pos(),
            format!("`workflow` is a mapping, found {}", value.what()),
            Some("write `workflow: { type: Shipping, inputs: { order: order } }`"),
        );
        return;
    };
    for (k, _) in &map.entries {
        if !["type", "inputs"].contains(&k.text.as_str()) {
            let help = did_you_mean(&k.text, ["type", "inputs"])
                .unwrap_or_else(|| "`workflow` takes `type` and `inputs`".into());
            out.error(
                k.pos,
                format!("unknown key `{}` in `workflow`", k.text),
                Some(help),
            );
        }
    }
    let Some(ty) = string(out, map, "type") else {
        out.error(
            map.pos,
            format!("`workflow` in step `{id}` has no `type`"),
            Some("name the child workflow's type: `type: Shipping`"),
        );
        return;
    };
    if parse_value::<syn::Path>(&ty.text).is_none() {
        out.error(
            ty.pos,
            format!("`{}` does not name a workflow type", ty.text),
            None::<String>,
        );
        return;
    }
    out.at(key.pos, "workflow");
    out.push(": ");
    out.scalar(ty);
    out.push("(");
    match map.get("inputs") {
        Some(Node::Map(inputs)) => {
            for (field, arg) in &inputs.entries {
                if !is_ident(&field.text) {
                    out.error(
                        field.pos,
                        format!("`{}` is not a field name", field.text),
                        None::<String>,
                    );
                    continue;
                }
                out.scalar(field);
                out.push(": ");
                match arg {
                    Node::Scalar(arg)
                        if !arg.quoted && (is_ident(&arg.text) || rust_literal(&arg.text)) =>
                    {
                        out.scalar(arg)
                    }
                    Node::Scalar(arg) => out.at(arg.pos, &Literal::string(&arg.text).to_string()),
                    other => {
                        out.error(
                            other.pos(),
                            "a child workflow's input is a name or a literal",
                            None::<String>,
                        );
                        out.at(other.pos(), "()");
                    }
                }
                out.push(", ");
            }
        }
        Some(other) => out.error(
            other.pos(),
            format!(
                "`inputs` of `workflow` maps fields to values, found {}",
                other.what()
            ),
            Some("write `inputs: { order: order, holds: reserve_lines }`"),
        ),
        None => {}
    }
    out.push(")\n,\n");
}

/// `a`, `b` or `c`, for messages.
pub(crate) fn list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("`{item}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}
