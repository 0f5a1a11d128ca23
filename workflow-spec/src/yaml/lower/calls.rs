//! Calls in a spec file: a step's `action` (and `compensate`, `reconcile`) with its
//! `inputs` and `with` literals, and a child workflow step, lowered to the inline
//! language's call syntax with every argument's file position kept.

#[allow(unused_imports)]
use super::*;

/// `action: path(args)` from `action`, `inputs` and `with`.
#[allow(clippy::too_many_arguments)]
pub(super) fn action(
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
        Some((text, map_entries, params)) => {
            out.site(id, "action", path, params);
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

/// The text of a call, its map entries (offsets already absolute: the call is appended
/// right after they are computed), and the names of its parameters as the file gives them.
pub(super) type CallText = (String, Vec<(usize, Pos, bool)>, Vec<String>);

pub(super) fn call(
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
    let mut params = Vec::new();
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
                        params.push(arg.text.clone());
                    }
                } else {
                    push(&mut text, &arg.text, Some(verbatim_of(arg)));
                    push(&mut text, ", ", None);
                    params.push(arg.text.clone());
                }
            }
            other => out.error(
                other.pos(),
                "an argument in `inputs` names a workflow input, a step, `env` or `ctx`",
                Some("put literal arguments under `with:` and name them here"),
            ),
        }
    }
    for (i, (name, value)) in withs.iter().enumerate() {
        if !used[i] {
            if let Some((lit, pos)) = literal(out, value) {
                push(&mut text, &lit, Some((pos, false)));
                push(&mut text, ", ", None);
                params.push(name.text.clone());
            }
        }
    }
    push(&mut text, ")", None);
    Some((text, entries, params))
}

/// `workflow: { type: Shipping, inputs: { order: order, holds: reserve_lines } }`.
pub(super) fn child(out: &mut Lowering, id: &str, key: &Scalar, value: &Node) {
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
