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

mod calls;
mod fields;
mod values;

use calls::{action, call, child};
use fields::*;
pub(crate) use values::list;
use values::*;

/// The keys at the top of a spec file.
pub const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "journal_name",
    "env",
    "inputs",
    "schedule",
    "search",
    "retention",
    "concurrency",
    "priority",
    "debounce",
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
    "approvals",
    "self_approval",
    "title",
    "show",
    "effect",
    "idempotent",
    "reconcile",
    "compensate",
    "for_each",
    "concurrency",
    "on_item_failure",
    "workflow",
    "rate",
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
    /// Where each call of a step is written, in file order.
    pub(crate) calls: Vec<CallSite>,
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

/// Where a step's call (`action`, `compensate` or `reconcile`) is written in a file, and the
/// names its parameters have there. What only rustc can check, that the function exists
/// with the signature the spec gives it, is reported at this position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// The step's id.
    pub step: String,
    /// `action`, `compensate` or `reconcile`.
    pub key: String,
    /// Where the function's name is written.
    pub pos: Pos,
    /// The parameters in the order the function takes them: the names in `inputs:`, then
    /// the `with:` keys not named there.
    pub params: Vec<String>,
}

impl Lowering {
    /// Records where step `step`'s call under `key` names its function.
    fn site(&mut self, step: &str, key: &str, path: &Scalar, params: Vec<String>) {
        self.calls.push(CallSite {
            step: step.to_owned(),
            key: key.to_owned(),
            pos: path.pos,
            params,
        });
    }

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
    for (key, value) in &top.entries {
        quoted_numbers(&mut out, key, value);
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
    // `search: [order.customer_id]`, `retention: 30d`, `priority: order.tier` and the
    // blocks `concurrency: { .. }` and `debounce: { .. }` are copied as written (a quoted
    // `key` is a static key).
    for name in ["search", "retention", "concurrency", "priority", "debounce"] {
        if let Some((key, value)) = top.entries.iter().find(|(key, _)| key.text == name) {
            if copyable(out, value) {
                out.scalar(key);
                out.push(": ");
                raw_or_list(out, value);
                out.push("\n,\n");
            }
        }
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
    for (key, value) in &map.entries {
        quoted_numbers(out, key, value);
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
