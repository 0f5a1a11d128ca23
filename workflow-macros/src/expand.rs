//! Code generation for a checked spec, and the typed skeleton emitted next to errors.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::Ident;
use workflow_spec::parse::ast::{ArgAst, CallAst, OnTimeoutAst, StepAst, StepKw, WorkflowAst};
use workflow_spec::parse::check::condition_reads;
use workflow_spec::parse::{Name, Names, Parsed};
use workflow_spec::{render, Spec};

/// Parse, check and expand a `workflow!` invocation.
pub(crate) fn workflow(input: TokenStream) -> TokenStream {
    let parsed = workflow_spec::parse::parse(input);
    expand(&parsed)
}

fn expand(parsed: &Parsed) -> TokenStream {
    let (Some(ast), Some(names)) = (&parsed.ast, &parsed.names) else {
        return parsed
            .error()
            .map(|error| error.to_compile_error())
            .unwrap_or_default();
    };
    let gen = Gen { ast, names };
    let items = gen.items(parsed.spec.as_ref());
    match (&parsed.spec, parsed.error()) {
        (Some(spec), None) => {
            let imp = gen.impl_workflow(spec);
            quote! { #items #imp }
        }
        (_, error) => {
            let errors = error.map(|e| e.to_compile_error());
            let fallback = gen.fallback_impl();
            quote! { #errors #items #fallback }
        }
    }
}

struct Gen<'a> {
    ast: &'a WorkflowAst,
    names: &'a Names,
}

const CORE: &str = "::workflow_core::__private";

fn private() -> TokenStream {
    CORE.parse().unwrap_or_default()
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

    /// The output type of step `index` as declared (human steps default to `Approval`).
    fn output_ty(&self, index: usize) -> TokenStream {
        let step = &self.ast.steps[index];
        match &step.output {
            Some(ty) => ty.to_token_stream(),
            None => quote_spanned!(step.id.span()=> ::workflow_core::__private::Approval),
        }
    }

    fn optional(&self, index: usize) -> bool {
        self.names.optional.get(index).copied().unwrap_or(false)
    }

    /// The type downstream steps receive: `T` or `Option<T>`.
    fn passed_ty(&self, index: usize) -> TokenStream {
        let ty = self.output_ty(index);
        if self.optional(index) {
            quote!(::core::option::Option<#ty>)
        } else {
            ty
        }
    }

    /// The items that exist whether or not the spec has errors: the workflow type, its
    /// inputs, outputs, step enum and human-task handles.
    fn items(&self, spec: Option<&Spec>) -> TokenStream {
        let ast = self.ast;
        let vis = &ast.vis;
        let name = self.name();
        let attrs = &ast.attrs;
        let p = private();
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
            let what = match step.kw {
                StepKw::Step => "step",
                StepKw::Human => "human checkpoint",
            };
            let summary = step
                .docs
                .first()
                .map_or(String::new(), |d| format!(": {d}"));
            docs.push(format!("- `{}` ({what}){summary}", step.id));
        }
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
            let ty = self.passed_ty(index);
            let doc = if self.optional(index) {
                format!("The output of `{field}`; `None` when it failed under `continue` or was skipped.")
            } else {
                format!("The output of `{field}`.")
            };
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
            .filter(|(_, s)| s.kw == StepKw::Human)
            .map(|(index, step)| {
                let method = &step.id;
                let ty = self.output_ty(index);
                let id = step.id.to_string();
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
            "The human checkpoints of a run of [`{name}`]; reached through its run handle."
        );
        let count = steps.len();
        quote! {
            #docs
            #(#attrs)*
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            #vis struct #name;

            #[doc = #input_doc]
            #[derive(Clone, #p::serde::Serialize, #p::serde::Deserialize)]
            #[serde(crate = #CORE_SERDE)]
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

    fn env_ty(&self) -> TokenStream {
        match &self.ast.env {
            Some(ty) => ty.to_token_stream(),
            None => quote!(()),
        }
    }

    /// `impl Workflow` for a spec that passed every check.
    fn impl_workflow(&self, spec: &Spec) -> TokenStream {
        let name = self.name();
        let p = private();
        let input_ident = self.ident("Input");
        let outputs_ident = self.ident("Outputs");
        let tasks_ident = self.ident("Tasks");
        let env = self.env_ty();
        let workflow_name = self.journaled_name();
        let fingerprint = spec.fingerprint();
        let json = serde_json::to_string(spec).unwrap_or_default();
        let mermaid = render::mermaid(spec);
        let dot = render::dot(spec);

        let actions = self.arms(
            |step| step.fields.action.as_ref(),
            |index, path, invoke| {
                let out = self.output_ty(index);
                // Spanned on the action, so a wrong output or error type points at the call.
                let convert = quote_spanned!(path.span()=> #p::step_result::<#out, _>);
                quote! {
                    let __output = #convert(#invoke)?;
                    #p::encode(&__output)
                }
            },
        );
        let compensations = self.arms(
            |step| step.fields.compensate.as_ref(),
            |_, _, invoke| quote!(#p::unit_result(#invoke)),
        );
        let reconciles = self.arms(
            |step| step.fields.reconcile.as_ref(),
            |index, path, invoke| {
                let out = self.output_ty(index);
                let convert = quote_spanned!(path.span()=> #p::reconcile_result::<#out, _>);
                quote!(#convert(#invoke))
            },
        );
        let conditions = self.ast.steps.iter().enumerate().filter_map(|(index, step)| {
            let (_, expr) = step.fields.condition.as_ref()?;
            let bindings = condition_reads(expr).into_iter().filter_map(|ident| {
                match self.names.lookup(&ident.to_string())? {
                    Name::Step(dep) => {
                        let ty = self.output_ty(dep);
                        Some(if self.optional(dep) {
                            quote! {
                                let #ident: ::core::option::Option<#ty> = #p::optional(__outputs, #dep)?;
                                let #ident = #ident.as_ref();
                            }
                        } else {
                            quote! {
                                let #ident: #ty = #p::required(__outputs, #dep)?;
                                let #ident = &#ident;
                            }
                        })
                    }
                    Name::Input(_) => Some(quote!(let #ident = &__input.#ident;)),
                    Name::Env | Name::Ctx => None,
                }
            });
            let check = quote_spanned!(expr.span()=> let __condition: bool = #expr;);
            Some(quote! {
                #index => {
                    #(#bindings)*
                    #check
                    ::core::result::Result::Ok(__condition)
                }
            })
        });
        let proposals = self.ast.steps.iter().enumerate().filter_map(|(index, step)| {
            let call = step.fields.action.as_ref()?;
            let entries = call.args.iter().filter_map(|arg| match arg {
                ArgAst::Name(ident) => {
                    let key = ident.to_string();
                    match self.names.lookup(&key)? {
                        Name::Step(dep) => Some(quote! {
                            __map.insert(#key.into(), #p::OutputSource::output(__outputs, #dep).cloned().unwrap_or(#p::Value::Null));
                        }),
                        Name::Input(_) => Some(quote! {
                            __map.insert(#key.into(), #p::propose(&__input.#ident));
                        }),
                        Name::Env | Name::Ctx => None,
                    }
                }
                ArgAst::Literal(expr) => {
                    let key = expr.to_token_stream().to_string();
                    Some(quote! { __map.insert(#key.into(), #p::propose(&#expr)); })
                }
            });
            Some(quote! {
                #index => {
                    #(#entries)*
                }
            })
        });
        let decisions = self
            .ast
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kw == StepKw::Human)
            .map(|(index, _)| {
                let ty = self.output_ty(index);
                quote!(#index => #p::decision::<#ty>(#index, __decision),)
            });
        let timeouts = self
            .ast
            .steps
            .iter()
            .enumerate()
            .filter_map(|(index, step)| {
                let (_, on_timeout) = step.fields.on_timeout.as_ref()?;
                if !matches!(on_timeout, OnTimeoutAst::Approve | OnTimeoutAst::Reject) {
                    return None;
                }
                let ty = self.output_ty(index);
                let span = step
                    .fields
                    .on_timeout
                    .as_ref()
                    .map_or(step.id.span(), |(key, _)| key.span());
                let call = quote_spanned!(span=> #p::timeout_decision::<#ty>);
                Some(quote!(#index => #call(__approved),))
            });
        let output_fields = self.ast.steps.iter().enumerate().map(|(index, step)| {
            let field = &step.id;
            if self.optional(index) {
                quote!(#field: #p::optional(__outputs, #index)?,)
            } else {
                quote!(#field: #p::required(__outputs, #index)?,)
            }
        });
        let input_bindings_unused = quote!(let _ = __input;);

        quote! {
            impl #name {
                /// The workflow's diagram as Mermaid source.
                pub const MERMAID: &'static str = #mermaid;
                /// The workflow's diagram as Graphviz DOT source.
                pub const DOT: &'static str = #dot;
                /// The fingerprint of the spec; runs record it.
                pub const FINGERPRINT: &'static str = #fingerprint;

                /// The checked spec of this workflow.
                pub fn spec() -> &'static #p::workflow_spec::Spec {
                    <Self as #p::Workflow>::spec()
                }

                /// A fresh state machine for one run of this workflow: journal events in,
                /// commands out, no I/O.
                pub fn machine() -> #p::Machine<'static> {
                    #p::Machine::new(<Self as #p::Workflow>::spec())
                }
            }

            impl #p::Workflow for #name {
                type Input = #input_ident;
                type Env = #env;
                type Outputs = #outputs_ident;
                type Tasks = #tasks_ident;

                const NAME: &'static str = #workflow_name;
                const FINGERPRINT: &'static str = #fingerprint;

                fn spec() -> &'static #p::workflow_spec::Spec {
                    static SPEC: ::std::sync::OnceLock<#p::workflow_spec::Spec> = ::std::sync::OnceLock::new();
                    SPEC.get_or_init(|| #p::spec_from_json(#json))
                }

                #[allow(unused_variables, clippy::clone_on_copy, clippy::unit_arg, clippy::let_unit_value)]
                fn action(__step: usize, __call: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<#p::Value, #p::StepError>>, #p::CallError> {
                    let __outputs = __call.outputs;
                    let __input = __call.input;
                    match __step {
                        #(#actions)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                #[allow(unused_variables, clippy::clone_on_copy, clippy::unit_arg, clippy::let_unit_value)]
                fn compensate(__step: usize, __call: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<(), #p::StepError>>, #p::CallError> {
                    let __outputs = __call.outputs;
                    let __input = __call.input;
                    match __step {
                        #(#compensations)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                #[allow(unused_variables, clippy::clone_on_copy, clippy::unit_arg, clippy::let_unit_value)]
                fn reconcile(__step: usize, __call: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<::core::option::Option<#p::Value>, #p::StepError>>, #p::CallError> {
                    let __outputs = __call.outputs;
                    let __input = __call.input;
                    match __step {
                        #(#reconciles)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                #[allow(unused_variables, clippy::nonminimal_bool)]
                fn condition(__step: usize, __input: &Self::Input, __outputs: &dyn #p::OutputSource) -> ::core::result::Result<bool, #p::CallError> {
                    #input_bindings_unused
                    match __step {
                        #(#conditions)*
                        _ => ::core::result::Result::Ok(true),
                    }
                }

                #[allow(unused_variables, unused_mut)]
                fn proposal(__step: usize, __input: &Self::Input, __outputs: &dyn #p::OutputSource) -> #p::Value {
                    let mut __map = #p::serde_json::Map::new();
                    match __step {
                        #(#proposals)*
                        _ => {}
                    }
                    #p::Value::Object(__map)
                }

                fn decision(__step: usize, __decision: #p::Value) -> ::core::result::Result<#p::Value, #p::CallError> {
                    match __step {
                        #(#decisions)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                #[allow(unused_variables)]
                fn timeout_decision(__step: usize, __approved: bool) -> ::core::result::Result<#p::Value, #p::CallError> {
                    match __step {
                        #(#timeouts)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                fn outputs(__outputs: &dyn #p::OutputSource) -> ::core::result::Result<Self::Outputs, #p::CallError> {
                    ::core::result::Result::Ok(#outputs_ident {
                        #(#output_fields)*
                    })
                }
            }
        }
    }

    /// The match arms dispatching one kind of call (`action`, `compensate`, `reconcile`):
    /// bind the arguments, then box an async block around `body(index, path, invocation)`,
    /// where the invocation `path(args).await` carries the span of the path in the spec.
    fn arms(
        &self,
        call_of: impl Fn(&StepAst) -> Option<&CallAst>,
        body: impl Fn(usize, &syn::Path, TokenStream) -> TokenStream,
    ) -> Vec<TokenStream> {
        self.ast
            .steps
            .iter()
            .enumerate()
            .filter_map(|(index, step)| {
                let call = call_of(step)?;
                let (bindings, args) = self.call_args(call, index);
                let path = &call.path;
                let invoke = quote_spanned!(path.span()=> #path(#args).await);
                let body = body(index, path, invoke);
                Some(quote! {
                    #index => {
                        #bindings
                        ::core::result::Result::Ok(::std::boxed::Box::pin(async move { #body }))
                    }
                })
            })
            .collect()
    }

    /// Bindings for a call's arguments and the argument list itself. Each argument is a
    /// local whose ident carries the span of the user's token, so a type mismatch lands on
    /// the argument in the spec.
    fn call_args(&self, call: &CallAst, own: usize) -> (TokenStream, TokenStream) {
        let p = private();
        let mut bindings = TokenStream::new();
        let mut args = Vec::new();
        for (position, arg) in call.args.iter().enumerate() {
            match arg {
                ArgAst::Literal(expr) => args.push(expr.to_token_stream()),
                ArgAst::Name(ident) => {
                    let local = Ident::new(&format!("__arg{position}"), ident.span());
                    let value = match self.names.lookup(&ident.to_string()) {
                        Some(Name::Env) => quote!(__call.env),
                        Some(Name::Ctx) => quote!(__call.ctx),
                        Some(Name::Input(_)) => {
                            quote!(::core::clone::Clone::clone(&__input.#ident))
                        }
                        Some(Name::Step(dep)) => {
                            let ty = self.output_ty(dep);
                            if dep != own && self.optional(dep) {
                                quote!(#p::optional::<#ty>(__outputs, #dep)?)
                            } else {
                                quote!(#p::required::<#ty>(__outputs, #dep)?)
                            }
                        }
                        None => quote!(::core::unreachable!()),
                    };
                    bindings.extend(quote!(let #local = #value;));
                    args.push(local.into_token_stream());
                }
            }
        }
        (bindings, quote!(#(#args),*))
    }

    /// After an error: the `Workflow` impl with unreachable bodies, so code using the
    /// workflow still type-checks and one typo yields one error.
    fn fallback_impl(&self) -> TokenStream {
        let name = self.name();
        let p = private();
        let input_ident = self.ident("Input");
        let outputs_ident = self.ident("Outputs");
        let tasks_ident = self.ident("Tasks");
        let env = self.env_ty();
        let workflow_name = self.journaled_name();
        quote! {
            impl #name {
                /// The workflow's diagram as Mermaid source (empty: the spec has errors).
                pub const MERMAID: &'static str = "";
                /// The workflow's diagram as Graphviz DOT source (empty: the spec has errors).
                pub const DOT: &'static str = "";
                /// The fingerprint of the spec (empty: the spec has errors).
                pub const FINGERPRINT: &'static str = "";

                /// The checked spec of this workflow.
                pub fn spec() -> &'static #p::workflow_spec::Spec {
                    ::core::unreachable!()
                }

                /// A fresh state machine for one run of this workflow.
                pub fn machine() -> #p::Machine<'static> {
                    ::core::unreachable!()
                }
            }

            #[allow(unused_variables)]
            impl #p::Workflow for #name {
                type Input = #input_ident;
                type Env = #env;
                type Outputs = #outputs_ident;
                type Tasks = #tasks_ident;
                const NAME: &'static str = #workflow_name;
                const FINGERPRINT: &'static str = "";
                fn spec() -> &'static #p::workflow_spec::Spec { ::core::unreachable!() }
                fn action(_: usize, _: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<#p::Value, #p::StepError>>, #p::CallError> { ::core::unreachable!() }
                fn compensate(_: usize, _: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<(), #p::StepError>>, #p::CallError> { ::core::unreachable!() }
                fn reconcile(_: usize, _: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<::core::option::Option<#p::Value>, #p::StepError>>, #p::CallError> { ::core::unreachable!() }
                fn condition(_: usize, _: &Self::Input, _: &dyn #p::OutputSource) -> ::core::result::Result<bool, #p::CallError> { ::core::unreachable!() }
                fn proposal(_: usize, _: &Self::Input, _: &dyn #p::OutputSource) -> #p::Value { ::core::unreachable!() }
                fn decision(_: usize, _: #p::Value) -> ::core::result::Result<#p::Value, #p::CallError> { ::core::unreachable!() }
                fn timeout_decision(_: usize, _: bool) -> ::core::result::Result<#p::Value, #p::CallError> { ::core::unreachable!() }
                fn outputs(_: &dyn #p::OutputSource) -> ::core::result::Result<Self::Outputs, #p::CallError> { ::core::unreachable!() }
            }
        }
    }
}

const CORE_SERDE: &str = "::workflow_core::__private::serde";
