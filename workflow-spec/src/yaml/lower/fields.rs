//! One key of a step in a spec file, lowered to the inline language's field: the keys
//! with a spelling of their own (`depends_on`, `retry`, `assignee`, `on_timeout`,
//! `workflow`, …) and every other key of the inline language, copied as written.

#[allow(unused_imports)]
use super::*;

#[allow(clippy::too_many_arguments)]
pub(super) fn field(
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
                Node::Scalar(path) => {
                    call(out, key, path, None, None, options).map(|call| (call, path.clone()))
                }
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
                        )
                        .map(|call| (call, path.clone())),
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
            if let Some((call, path)) = call {
                out.site(id, name, &path, call.2);
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
        "assignee" | "prompt" | "title" => {
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
pub(super) fn inline_keys() -> impl Iterator<Item = &'static str> {
    use crate::parse::ast;
    ast::STEP_KEYS
        .iter()
        .chain(ast::HUMAN_KEYS)
        .chain(ast::EVENT_KEYS)
        .copied()
}

/// Whether a step in a file takes `key`: a key of the file format, or of the inline
/// language (so a key the language gains works in files as written inline).
pub(super) fn known_key(key: &str) -> bool {
    STEP_KEYS.contains(&key) || inline_keys().any(|inline| inline == key)
}

pub(super) fn is_escalate(map: &Map) -> bool {
    matches!(map.get("on_timeout"), Some(Node::Scalar(s)) if s.text == "escalate")
}
