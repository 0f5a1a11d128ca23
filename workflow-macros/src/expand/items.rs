//! The items emitted whether or not the spec has errors, and the workflow type's rustdoc.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use workflow_spec::model::{OnItemFailure, DEFAULT_CONCURRENCY};
use workflow_spec::parse::ast::{OnTimeoutAst, StepAst, StepKw, WorkflowAst};
use workflow_spec::parse::check::language::names_itself;
use workflow_spec::parse::tokens_to_string;
use workflow_spec::{format_duration, render, Spec};

use super::{doc_lines, first_of_each, private, variant_names, Gen};

impl Gen<'_> {
    /// The items that exist whether or not the spec has errors: the workflow type, its
    /// inputs, outputs, step enum and human-task handles.
    pub(super) fn items(&self, spec: Option<&Spec>) -> TokenStream {
        let ast = self.ast;
        let vis = &ast.vis;
        let name = self.name();
        let attrs = &ast.attrs;
        let p = private();
        let serde_crate = super::core_serde();
        let input_ident = self.ident("Input");
        let outputs_ident = self.ident("Outputs");
        let step_ident = self.ident("Step");
        let tasks_ident = self.ident("Tasks");

        let mut docs = ast.docs.clone();
        if docs.is_empty() {
            docs.push(format!("The `{name}` workflow."));
        }
        if let Some(journaled) = &ast.journal_name {
            docs.push(String::new());
            docs.push(format!(
                "Runs are journaled under the name `{}` (`#[workflow(name = ...)]`), so another version of this workflow can be registered next to it.",
                journaled.value()
            ));
        }
        docs.push(String::new());
        docs.push("# Steps".into());
        docs.push(String::new());
        for step in &ast.steps {
            let summary = step
                .docs
                .first()
                .map_or(String::new(), |d| format!(": {d}"));
            docs.push(format!("- `{}` ({}){summary}", step.id, what(step)));
        }
        docs.extend(children_section(ast));
        docs.extend(events_section(ast));
        if let Some(spec) = spec {
            docs.push(String::new());
            docs.push("# Diagram".into());
            docs.push(String::new());
            docs.push(format!(
                "<div>{}</div>",
                render::svg(spec).replace('\n', "")
            ));
            docs.push(String::new());
            docs.push(format!(
                "Mermaid source: [`{name}::MERMAID`]; Graphviz: [`{name}::DOT`]."
            ));
        }
        let docs = doc_lines(&docs);

        // After an error, duplicates are skipped so they add no follow-on errors.
        let steps: Vec<usize> = first_of_each(ast.steps.iter().map(|step| step.id.to_string()));
        let inputs: Vec<usize> = first_of_each(ast.inputs.iter().map(|i| i.name.to_string()));
        let input_fields = inputs.iter().map(|&index| {
            let input = &ast.inputs[index];
            let field = &input.name;
            let ty = &input.ty;
            let doc = format!("The `{field}` input.");
            quote!(#[doc = #doc] pub #field: #ty,)
        });
        let output_fields = steps.iter().map(|&index| {
            let field = &ast.steps[index].id;
            // A step that runs its own workflow (an error already) would make this struct
            // contain itself; give its field no type to recurse through.
            let recursive = ast.steps[index]
                .fields
                .workflow
                .as_ref()
                .is_some_and(|child| names_itself(ast, child));
            let ty = if recursive {
                quote!(())
            } else {
                self.outputs_field_ty(index)
            };
            let doc = output_doc(&ast.steps[index], self.optional(index));
            quote!(#[doc = #doc] pub #field: #ty,)
        });
        let variants = variant_names(&steps.iter().map(|&i| &ast.steps[i].id).collect::<Vec<_>>());
        let variant_docs = steps.iter().map(|&index| {
            let doc = format!("Step `{}`.", ast.steps[index].id);
            quote!(#[doc = #doc])
        });
        let ids = steps
            .iter()
            .map(|&index| ast.steps[index].id.unraw().to_string());
        let indices = steps.iter().copied();
        let human_methods = steps
            .iter()
            .map(|&index| (index, &ast.steps[index]))
            .filter(|(_, s)| matches!(s.kw, StepKw::Human | StepKw::Event))
            .map(|(index, step)| {
                let method = &step.id;
                let ty = self.declared_ty(index);
                let id = step.id.to_string();
                if step.kw == StepKw::Event {
                    let doc = format!(
                        "The event `{id}`: send it into the run (kept until the run waits for it)."
                    );
                    return quote! {
                        #[doc = #doc]
                        pub fn #method(&self) -> #p::EventHandle<'_, #ty> {
                            #p::EventHandle::new(&self.run, #index, #id)
                        }
                    };
                }
                let doc =
                    format!("The task of human checkpoint `{id}`: decide it, or read its state.");
                quote! {
                    #[doc = #doc]
                    pub fn #method(&self) -> #p::HumanTask<'_, #ty> {
                        #p::HumanTask::new(&self.run, #index, #id)
                    }
                }
            });
        let input_doc = format!("The journaled inputs of [`{name}`].");
        let outputs_doc =
            format!("The outputs of a completed run of [`{name}`], a field per step.");
        let step_doc = format!("The steps of [`{name}`].");
        let tasks_doc = format!(
            "The human checkpoints and events of a run of [`{name}`]; reached through its run handle."
        );
        let count = steps.len();
        quote! {
            #docs
            #(#attrs)*
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            #vis struct #name;

            #[doc = #input_doc]
            #[derive(Clone, #p::serde::Serialize, #p::serde::Deserialize)]
            #[serde(crate = #serde_crate)]
            #vis struct #input_ident {
                #(#input_fields)*
            }

            #[doc = #outputs_doc]
            #[derive(Clone)]
            #vis struct #outputs_ident {
                #(#output_fields)*
            }

            #[doc = #step_doc]
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
            #vis enum #step_ident {
                #(#variant_docs #variants,)*
            }

            impl #step_ident {
                /// Every step, in declaration order.
                pub const ALL: [Self; #count] = [#(Self::#variants),*];

                /// The step's id as written in the spec.
                pub const fn id(self) -> &'static str {
                    match self { #(Self::#variants => #ids,)* }
                }

                /// The step's index in declaration order.
                pub const fn index(self) -> usize {
                    match self { #(Self::#variants => #indices,)* }
                }
            }

            #[doc = #tasks_doc]
            #[derive(Debug, Clone)]
            #vis struct #tasks_ident {
                run: #p::RunRef,
            }

            impl ::core::convert::From<#p::RunRef> for #tasks_ident {
                fn from(run: #p::RunRef) -> Self {
                    Self { run }
                }
            }

            impl #tasks_ident {
                #(#human_methods)*
            }
        }
    }
}

/// What a step is, for the list of steps in the rustdoc.
fn what(step: &StepAst) -> String {
    let fields = &step.fields;
    let output = step.output.as_ref().map(tokens_to_string);
    match step.kw {
        StepKw::Human => "human checkpoint".to_owned(),
        StepKw::Event => format!("event, payload `{}`", output.unwrap_or_default()),
        StepKw::Step => match (&fields.for_each, &fields.workflow, &fields.action) {
            (Some((_, for_each)), _, _) => {
                let concurrency = fields
                    .concurrency
                    .as_ref()
                    .map_or(DEFAULT_CONCURRENCY, |(_, (n, _))| *n);
                let skip = match &fields.on_item_failure {
                    Some((_, OnItemFailure::Skip)) => ", failed items skipped",
                    _ => "",
                };
                format!(
                    "map over `{}`, one `{}` per item, {concurrency} at a time{skip}",
                    tokens_to_string(&for_each.source),
                    output.unwrap_or_default()
                )
            }
            (None, Some(child), None) => {
                format!("child workflow `{}`", tokens_to_string(&child.path))
            }
            _ => "step".to_owned(),
        },
    }
}

/// The doc of a step's field in `…Outputs`.
fn output_doc(step: &StepAst, optional: bool) -> String {
    let id = step.id.unraw();
    let fields = &step.fields;
    let what = match (step.kw, &fields.for_each, &fields.workflow, &fields.action) {
        (StepKw::Step, Some(_), _, _) => format!("The outputs of `{id}`, one per item, in order"),
        (StepKw::Step, None, Some(child), None) => format!(
            "The outputs of child workflow `{}`, run by `{id}`",
            tokens_to_string(&child.path)
        ),
        (StepKw::Event, _, _, _) => format!("The payload of event `{id}`"),
        (StepKw::Human, _, _, _) => format!("The decision of `{id}`"),
        _ => format!("The output of `{id}`"),
    };
    if !optional {
        return format!("{what}.");
    }
    let absent = match step.kw {
        StepKw::Event => "no event came before its deadline, or it was skipped",
        _ => "it failed under `continue` or was skipped",
    };
    format!("{what}; `None` when {absent}.")
}

/// `# Child workflows`: each child workflow and the step that runs it.
fn children_section(ast: &WorkflowAst) -> Vec<String> {
    let lines: Vec<String> = ast
        .steps
        .iter()
        .filter(|step| step.fields.action.is_none())
        .filter_map(|step| {
            let child = step.fields.workflow.as_ref()?;
            let inputs: Vec<String> = child.fields.iter().map(|f| f.field.to_string()).collect();
            Some(format!(
                "- `{}`, run by step `{}` with its inputs {}; the step's output is its outputs.",
                tokens_to_string(&child.path),
                step.id.unraw(),
                if inputs.is_empty() {
                    "(none)".to_owned()
                } else {
                    inputs
                        .iter()
                        .map(|input| format!("`{input}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))
        })
        .collect();
    section("# Child workflows", lines)
}

/// `# Events`: each event a run waits for, its payload type and its deadline.
fn events_section(ast: &WorkflowAst) -> Vec<String> {
    let lines: Vec<String> = ast
        .steps
        .iter()
        .filter(|step| step.kw == StepKw::Event)
        .map(|step| {
            let payload = step
                .output
                .as_ref()
                .map(tokens_to_string)
                .unwrap_or_default();
            let timeout = step
                .fields
                .timeout
                .as_ref()
                .map_or_else(String::new, |(_, d)| {
                    format!(" within {}", format_duration(d.value))
                });
            let then = match &step.fields.on_timeout {
                Some((_, OnTimeoutAst::Continue)) => "the step settles without it",
                _ => "the run fails",
            };
            format!(
                "- `{}`: a `{payload}` sent into the run{timeout}; if none comes, {then}.",
                step.id.unraw()
            )
        })
        .collect();
    section("# Events", lines)
}

fn section(title: &str, lines: Vec<String>) -> Vec<String> {
    if lines.is_empty() {
        return lines;
    }
    let mut out = vec![String::new(), title.to_owned(), String::new()];
    out.extend(lines);
    out
}
