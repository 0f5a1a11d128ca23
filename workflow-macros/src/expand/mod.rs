//! Code generation for a checked spec, and the typed skeleton emitted next to errors.
//!
//! - [`items`]: what exists whether or not the spec has errors: the workflow type (with its
//!   rustdoc), `…Input`, `…Outputs`, the step enum and the human-task handles;
//! - [`imp`]: `impl Workflow` for a spec that passed every check;
//! - [`calls`]: the dispatch of user calls (actions, compensations, reconcilers), map
//!   sources and child workflow starts, each spanned on the spec's tokens;
//! - [`outputs`]: `Serialize` and `Deserialize` for `…Outputs`;
//! - [`schedule`]: `Workflow::schedule()` and the `Tick` input check of a scheduled workflow;
//! - [`search`]: `Workflow::search()`, the values of `search: [..]`;
//! - [`flow`]: `Workflow::admission()` and `Workflow::step_keys()`, the values of flow
//!   control keys;
//! - [`fallback`]: the `impl Workflow` with unreachable bodies emitted after an error.

mod calls;
mod fallback;
pub(crate) mod file;
mod flow;
mod imp;
mod items;
mod outputs;
mod schedule;
mod search;
mod shown;
mod signature;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned as _;
use syn::Ident;
use workflow_spec::model::OnItemFailure;
use workflow_spec::parse::ast::{ChildAst, StepAst, WorkflowAst};
use workflow_spec::parse::{Names, Parsed};

/// Parse, check and expand a `workflow!` invocation.
pub(crate) fn workflow(input: TokenStream) -> TokenStream {
    let parsed = workflow_spec::parse::parse(input);
    expand(&parsed, &[])
}

/// Expands a parsed spec; `sites` say where a spec file writes each call (none for an
/// inline spec, whose tokens carry their own spans).
fn expand(parsed: &Parsed, sites: &[signature::Site]) -> TokenStream {
    let (Some(ast), Some(names)) = (&parsed.ast, &parsed.names) else {
        return parsed
            .error()
            .map(|error| error.to_compile_error())
            .unwrap_or_default();
    };
    let gen = Gen { ast, names, sites };
    let items = gen.items(parsed.spec.as_ref());
    match (&parsed.spec, parsed.error()) {
        (Some(spec), None) => {
            let imp = gen.impl_workflow(spec);
            let serde = gen.outputs_serde();
            quote! { #items #imp #serde }
        }
        (_, error) => {
            let errors = error.map(|e| e.to_compile_error());
            let fallback = gen.fallback_impl();
            let serde = gen.outputs_serde_fallback();
            quote! { #errors #items #fallback #serde }
        }
    }
}

struct Gen<'a> {
    ast: &'a WorkflowAst,
    names: &'a Names,
    sites: &'a [signature::Site],
}

/// `serde(crate = …)` of the generated types: the runtime's re-export of serde.
fn core_serde() -> String {
    format!("{}::__private::serde", crate::krate::name())
}

fn private() -> TokenStream {
    let krate = crate::krate::path();
    quote!(#krate::__private)
}

fn camel(id: &str) -> String {
    id.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        })
        .collect()
}

/// The index of the first occurrence of each name, in order.
fn first_of_each(names: impl Iterator<Item = String>) -> Vec<usize> {
    let mut seen = std::collections::HashSet::new();
    names
        .enumerate()
        .filter(|(_, name)| seen.insert(name.clone()))
        .map(|(index, _)| index)
        .collect()
}

/// UpperCamelCase variant names for step ids, unique even when two ids camel-case alike
/// (`a_b` and `a__b`): a later collision gets its position appended.
fn variant_names(ids: &[&Ident]) -> Vec<Ident> {
    let mut taken = std::collections::HashSet::new();
    ids.iter()
        .enumerate()
        .map(|(position, id)| {
            let mut name = camel(&id.unraw().to_string());
            if name.is_empty() || !taken.insert(name.clone()) {
                name = format!("{name}Step{position}");
                taken.insert(name.clone());
            }
            Ident::new(&name, id.span())
        })
        .collect()
}

fn doc_lines(lines: &[String]) -> TokenStream {
    lines.iter().map(|line| quote!(#[doc = #line])).collect()
}

impl Gen<'_> {
    fn name(&self) -> &Ident {
        &self.ast.name
    }

    /// The name runs are journaled under: `#[workflow(name = "...")]`, else the type name.
    fn journaled_name(&self) -> String {
        self.ast
            .journal_name
            .as_ref()
            .map_or_else(|| self.ast.name.to_string(), syn::LitStr::value)
    }

    fn ident(&self, suffix: &str) -> Ident {
        format_ident!("{}{}", self.ast.name, suffix, span = self.ast.name.span())
    }

    fn step(&self, index: usize) -> &StepAst {
        &self.ast.steps[index]
    }

    /// The output type of step `index` as declared (human steps default to `Approval`):
    /// for a map step, one item's output.
    fn declared_ty(&self, index: usize) -> TokenStream {
        let step = self.step(index);
        match &step.output {
            Some(ty) => ty.to_token_stream(),
            None => {
                let __p = crate::krate::private_at(step.id.span());
                quote_spanned!(step.id.span()=> #__p::Approval)
            }
        }
    }

    /// The type of step `index`'s journaled output: `Vec<T>` for a map step
    /// (`Vec<Option<T>>` with `on_item_failure: skip`), the declared type otherwise.
    fn journal_ty(&self, index: usize) -> TokenStream {
        let ty = self.declared_ty(index);
        let fields = &self.step(index).fields;
        match (&fields.for_each, &fields.on_item_failure) {
            (None, _) => ty,
            (Some(_), Some((_, OnItemFailure::Skip))) => {
                quote!(::std::vec::Vec<::core::option::Option<#ty>>)
            }
            (Some(_), _) => quote!(::std::vec::Vec<#ty>),
        }
    }

    fn optional(&self, index: usize) -> bool {
        self.names.optional.get(index).copied().unwrap_or(false)
    }

    /// Step `index`'s output read from `__outputs` (a `&dyn OutputSource`), spanned on its
    /// output type, so one that does not deserialize is reported there (once, however many
    /// places read it this way).
    fn output_read(&self, index: usize) -> TokenStream {
        let ty = self.declared_ty(index);
        let p = crate::krate::private_at(ty.span());
        if self.optional(index) {
            quote_spanned!(ty.span()=> #p::optional(__outputs, #index)?)
        } else {
            quote_spanned!(ty.span()=> #p::required(__outputs, #index)?)
        }
    }

    /// The type downstream steps receive: the journaled type, in `Option` when the step may
    /// be absent.
    fn passed_ty(&self, index: usize) -> TokenStream {
        let ty = self.journal_ty(index);
        if self.optional(index) {
            quote!(::core::option::Option<#ty>)
        } else {
            ty
        }
    }

    /// The type of step `index`'s field in `…Outputs`: what downstream steps receive, but
    /// a child workflow's outputs boxed (`Box<ChildOutputs>`). Two workflows that include
    /// each other would otherwise make two structs of infinite size, a pile of layout
    /// errors; boxed, the one error is the cycle in `Workflow::CHILD_DEPTH`, at the
    /// `workflow:` paths of the spec.
    fn outputs_field_ty(&self, index: usize) -> TokenStream {
        let fields = &self.step(index).fields;
        if fields.workflow.is_none() || fields.action.is_some() {
            return self.passed_ty(index);
        }
        let ty = self.journal_ty(index);
        if self.optional(index) {
            quote!(::core::option::Option<::std::boxed::Box<#ty>>)
        } else {
            quote!(::std::boxed::Box<#ty>)
        }
    }

    fn env_ty(&self) -> TokenStream {
        match &self.ast.env {
            Some(ty) => ty.to_token_stream(),
            None => quote!(()),
        }
    }

    /// The child workflow steps, by index (a step with both an action and a workflow is an
    /// error, so only the checked ones count).
    fn children(&self) -> impl Iterator<Item = (usize, &ChildAst)> {
        self.ast
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| step.fields.action.is_none())
            .filter_map(|(index, step)| Some((index, step.fields.workflow.as_ref()?)))
    }
}
