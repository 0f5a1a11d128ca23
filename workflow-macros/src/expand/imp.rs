//! `impl Workflow` for a spec that passed every check.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use workflow_spec::parse::ast::{ArgAst, OnTimeoutAst, StepKw};
use workflow_spec::parse::check::condition_reads;
use workflow_spec::parse::Name;
use workflow_spec::{render, Spec};

use super::{private, Gen};

impl Gen<'_> {
    /// `impl Workflow` for a spec that passed every check.
    pub(super) fn impl_workflow(&self, spec: &Spec) -> TokenStream {
        let name = self.name();
        let p = private();
        let __k = crate::krate::path();
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
                let out = self.declared_ty(index);
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
                let out = self.declared_ty(index);
                let convert = quote_spanned!(path.span()=> #p::reconcile_result::<#out, _>);
                quote!(#convert(#invoke))
            },
        );
        let conditions = self.ast.steps.iter().enumerate().filter_map(|(index, step)| {
            let (_, expr) = step.fields.condition.as_ref()?;
            let bindings = condition_reads(expr).into_iter().filter_map(|ident| {
                match self.names.lookup(&ident.to_string())? {
                    Name::Step(dep) => {
                        let ty = self.journal_ty(dep);
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
                    Name::Env | Name::Ctx | Name::Item => None,
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
                    match self.names.lookup_arg(index, &key)? {
                        Name::Step(dep) => Some(quote! {
                            __map.insert(#key.into(), #p::OutputSource::output(__outputs, #dep).cloned().unwrap_or(#p::Value::Null));
                        }),
                        Name::Input(_) => Some(quote! {
                            __map.insert(#key.into(), #p::propose(&__input.#ident));
                        }),
                        Name::Item => Some(quote! {
                            __map.insert(#key.into(), #p::item_value(__outputs));
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
                let ty = self.declared_ty(index);
                quote!(#index => {
                    #p::form_decision(<Self as #p::Workflow>::decision_form(#index), &__decision)?;
                    #p::decision::<#ty>(#index, __decision)
                })
            });
        let forms = self
            .ast
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kw == StepKw::Human)
            .map(|(index, _)| {
                let ty = self.declared_ty(index);
                quote!(#index => (&#p::Probe::<#ty>(::core::marker::PhantomData)).form_fields(),)
            });
        let events = self
            .ast
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kw == StepKw::Event)
            .map(|(index, _)| {
                let ty = self.declared_ty(index);
                // Spanned on the payload type: it must be `Serialize + DeserializeOwned`.
                let check = quote_spanned!(ty.span()=> #p::decision::<#ty>);
                quote!(#index => #check(#index, __payload),)
            });
        let items = self
            .ast
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| step.fields.for_each.is_some())
            .map(|(index, _)| {
                let source = self.map_source(index);
                quote!(#index => #source.items(__input, __outputs),)
            });
        let children: Vec<_> = self.children().collect();
        let child_arms = children
            .iter()
            .map(|(index, child)| self.child_arm(*index, child));
        // One more than the deepest child, as nested calls of a `const fn` (no array to
        // promote): a workflow that includes itself through its children makes this
        // constant depend on itself, which rustc reports as a cycle through the spec's
        // `workflow:` paths.
        let child_depth = children.iter().fold(quote!(0), |depth, (_, child)| {
            let path = &child.path;
            let __p = crate::krate::private_at(path.span());
            quote_spanned!(path.span()=> #__p::deeper(#depth, <#path as #__p::Workflow>::CHILD_DEPTH))
        });
        // Spanned on the workflow's name, so each step of a reported cycle names its workflow.
        let child_depth_item =
            quote_spanned!(name.span()=> const CHILD_DEPTH: usize = #child_depth;);
        let spec_init = if children.is_empty() {
            quote!(#p::spec_from_json(#json))
        } else {
            let names = children.iter().map(|(index, child)| {
                let path = &child.path;
                let __p = crate::krate::private_at(path.span());
                quote_spanned!(path.span()=> #__p::name_child(&mut __spec, #index, <#path as #__p::Workflow>::NAME);)
            });
            quote! {{
                let mut __spec = #p::spec_from_json(#json);
                #(#names)*
                __spec
            }}
        };
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
                let ty = self.declared_ty(index);
                let span = step
                    .fields
                    .on_timeout
                    .as_ref()
                    .map_or(step.id.span(), |(key, _)| key.span());
                let call = quote_spanned!(span=> #p::timeout_decision::<#ty>);
                Some(quote!(#index => #call(__approved),))
            });
        // Spanned on the output type, so one that does not deserialize is reported there.
        let output_fields = self.ast.steps.iter().enumerate().map(|(index, step)| {
            let field = &step.id;
            let read = self.output_read(index);
            quote!(#field: #read,)
        });
        // Each step's output read as `outputs` reads it (the same tokens at the same spans,
        // so a type that does not deserialize is reported once, not once more here), for
        // the upgrade check.
        let output_checks = self.ast.steps.iter().enumerate().map(|(index, _)| {
            let field_ty = self.outputs_field_ty(index);
            let read = self.output_read(index);
            quote! {
                #index => {
                    let _: #field_ty = #read;
                    ::core::result::Result::Ok(())
                }
            }
        });
        let input_bindings_unused = quote!(let _ = __input;);
        let (schedule_item, tick_check) = self.schedule_items();
        let shown_check = self.shown_check();
        let search_item = self.search_item();
        let admission_item = self.admission_item();
        let step_keys_item = self.step_keys_item();

        quote! {
            #tick_check
            #shown_check
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

                /// The workflow's schedule (`schedule: { ... }`), if it declares one.
                pub fn schedule() -> ::core::option::Option<&'static #p::workflow_spec::Schedule> {
                    <Self as #p::Workflow>::schedule()
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
                #child_depth_item

                #schedule_item
                #search_item
                #admission_item
                #step_keys_item

                fn spec() -> &'static #p::workflow_spec::Spec {
                    static SPEC: ::std::sync::OnceLock<#p::workflow_spec::Spec> = ::std::sync::OnceLock::new();
                    SPEC.get_or_init(|| #spec_init)
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

                #[allow(unused_imports)]
                fn decision_form(__step: usize) -> ::core::option::Option<::std::vec::Vec<#__k::form::FormField>> {
                    use #p::{IsForm as _, NotForm as _};
                    match __step {
                        #(#forms)*
                        _ => ::core::option::Option::None,
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

                fn check_output(__step: usize, __output: &#p::Value) -> ::core::result::Result<(), #p::CallError> {
                    let __only = #p::Only(__step, __output);
                    let __outputs: &dyn #p::OutputSource = &__only;
                    match __step {
                        #(#output_checks)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                #[allow(unused_variables, clippy::clone_on_copy)]
                fn items(__step: usize, __input: &Self::Input, __outputs: &dyn #p::OutputSource) -> ::core::result::Result<::std::vec::Vec<#p::Value>, #p::CallError> {
                    match __step {
                        #(#items)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                #[allow(unused_variables, clippy::clone_on_copy)]
                fn child(__step: usize, __input: &Self::Input, __outputs: &dyn #p::OutputSource) -> ::core::result::Result<#p::ChildStart, #p::CallError> {
                    match __step {
                        #(#child_arms)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }

                fn event(__step: usize, __payload: #p::Value) -> ::core::result::Result<#p::Value, #p::CallError> {
                    match __step {
                        #(#events)*
                        _ => ::core::result::Result::Err(#p::CallError::NoSuchCall(__step)),
                    }
                }
            }
        }
    }
}
