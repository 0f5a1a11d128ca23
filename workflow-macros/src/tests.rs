//! Unit tests of the expansion that read its output: the rustdoc of the workflow type.

use proc_macro2::TokenStream;

/// The doc lines of the workflow type generated for `source`, up to its diagram.
fn type_docs(source: &str) -> Vec<String> {
    all_docs(source)
        .into_iter()
        .take_while(|line| line != "# Diagram")
        .collect()
}

/// Every doc line of the workflow type generated for `source`.
fn all_docs(source: &str) -> Vec<String> {
    let tokens: TokenStream = source.parse().expect("tokens");
    let items: syn::File = syn::parse2(crate::expand::workflow(tokens)).expect("items parse");
    let syn::Item::Struct(workflow) = &items.items[0] else {
        panic!("the workflow type comes first");
    };
    workflow
        .attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(doc) if doc.path.is_ident("doc") => match &doc.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn the_rustdoc_lists_maps_child_workflows_and_events() {
    let docs = type_docs(
        r#"
        /// Fulfils an order.
        pub workflow Fulfil(order: Order) env Shop {
            step reserve_lines -> Hold {
                for_each: line in order.lines,
                action: stock::reserve(env, ctx, line),
                concurrency: 8,
                on_item_failure: skip,
            }
            step ship -> ShippingOutputs {
                workflow: shipping::Shipping(order, holds: reserve_lines),
            }
            event payment -> PaymentConfirmed {
                depends_on: [reserve_lines],
                timeout: 1h,
                on_timeout: continue,
            }
            human review -> Approval {
                assignee: "ops",
                depends_on: [payment],
                timeout: 1d,
                on_timeout: abort,
            }
        }
        "#,
    );
    let expected = [
        "Fulfils an order.",
        "",
        "# Steps",
        "",
        "- `reserve_lines` (map over `order.lines`, one `Hold` per item, 8 at a time, failed items skipped)",
        "- `ship` (child workflow `shipping::Shipping`)",
        "- `payment` (event, payload `PaymentConfirmed`)",
        "- `review` (human checkpoint)",
        "",
        "# Child workflows",
        "",
        "- `shipping::Shipping`, run by step `ship` with its inputs `order`, `holds`; the step's output is its outputs.",
        "",
        "# Events",
        "",
        "- `payment`: a `PaymentConfirmed` sent into the run within 1h; if none comes, the step settles without it.",
        "",
    ];
    assert_eq!(docs, expected);
}

#[test]
fn without_children_or_events_there_are_no_such_sections() {
    let docs = type_docs("workflow W() { step a -> () { action: f(), } }");
    assert_eq!(
        docs,
        ["The `W` workflow.", "", "# Steps", "", "- `a` (step)", ""]
    );
}

#[test]
fn the_rustdoc_draws_the_three_in_its_diagram() {
    let docs = all_docs(
        r#"
        pub workflow Fulfil(order: Order) {
            step reserve_lines -> Hold {
                for_each: line in order.lines,
                action: reserve(line),
            }
            step ship -> ShippingOutputs {
                workflow: Shipping(order),
            }
            event payment -> Paid {
                timeout: 1h,
            }
        }
        "#,
    );
    let diagram = docs
        .iter()
        .find(|line| line.starts_with("<div><svg"))
        .expect("an inline diagram");
    assert!(diagram.contains("<g class=\"step\" id=\"step-reserve_lines\">"));
    assert!(diagram.contains(">for each line in order.lines</text>"));
    assert!(diagram.contains(">workflow Shipping</text>"));
    assert!(diagram.contains(">waits for an event, 1h</text>"));
}

/// The names of the functions of the generated `impl Workflow`.
fn workflow_fns(source: &str) -> Vec<String> {
    let tokens: TokenStream = source.parse().expect("tokens");
    let items: syn::File = syn::parse2(crate::expand::workflow(tokens)).expect("items parse");
    items
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Impl(imp) if imp.trait_.is_some() => Some(imp),
            _ => None,
        })
        .find(|imp| {
            imp.trait_
                .as_ref()
                .and_then(|(_, path, _)| path.segments.last())
                .is_some_and(|segment| segment.ident == "Workflow")
        })
        .expect("impl Workflow")
        .items
        .iter()
        .filter_map(|item| match item {
            syn::ImplItem::Fn(function) => Some(function.sig.ident.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn admission_and_step_keys_are_generated_only_for_specs_that_use_them() {
    let plain = workflow_fns(
        "pub workflow Charge(order: Order) { step charge -> () { action: psp::charge(order) } }",
    );
    assert!(plain.contains(&"action".to_owned()), "{plain:?}");
    assert!(!plain.contains(&"admission".to_owned()), "{plain:?}");
    assert!(!plain.contains(&"step_keys".to_owned()), "{plain:?}");

    let admission = workflow_fns(
        "pub workflow Charge(order: Order) { priority: 3, step charge -> () { action: psp::charge(order) } }",
    );
    assert!(admission.contains(&"admission".to_owned()), "{admission:?}");
    assert!(
        !admission.contains(&"step_keys".to_owned()),
        "{admission:?}"
    );

    let step = workflow_fns(
        r#"pub workflow Charge(order: Order) { step charge -> () { action: psp::charge(order), rate: { key: "psp", limit: 1, per: 1s } } }"#,
    );
    assert!(!step.contains(&"admission".to_owned()), "{step:?}");
    assert!(step.contains(&"step_keys".to_owned()), "{step:?}");
}

#[test]
fn dependencies_are_found_by_key_table_and_rename() {
    let facade = "[package]\nname = \"app\"\n\n[dependencies]\nworkflow = { path = \"../workflow\" }\ntokio = \"1\"\n";
    assert!(crate::krate::depends_on(facade, "workflow"));
    assert!(!crate::krate::depends_on(facade, "workflow-core"));
    let core = "[dev-dependencies]\nworkflow-core = { workspace = true }\n";
    assert!(crate::krate::depends_on(core, "workflow-core"));
    let table = "[target.'cfg(unix)'.dependencies.workflow]\npath = \"x\"\n";
    assert!(crate::krate::depends_on(table, "workflow"));
    let renamed = "[dependencies]\nwf = { package = \"workflow\", version = \"0.1\" }\n";
    assert!(crate::krate::depends_on(renamed, "workflow"));
    let elsewhere = "[package]\nname = \"workflow\"\n[features]\nworkflow = []\n";
    assert!(!crate::krate::depends_on(elsewhere, "workflow"));
}
