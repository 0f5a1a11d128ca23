//! What flow control adds to the generated code: `Workflow::admission`, which reads the
//! workflow's `concurrency`, `priority` and `debounce` keys from a run's input, and
//! `Workflow::step_keys`, which reads a step's `concurrency` and `rate` keys from the
//! input and upstream outputs. Each read is spanned on the key's path, so a type that
//! cannot be a key (or a priority) is reported there.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use workflow_spec::parse::flow::{KeyAst, LimitAst, PriorityAst};
use workflow_spec::parse::Name;

use super::{private, Gen};

impl Gen<'_> {
    /// The `fn admission()` of `impl Workflow`; empty for a workflow without
    /// `concurrency`, `priority` or `debounce`.
    pub(super) fn admission_item(&self) -> TokenStream {
        let flow = &self.ast.flow;
        if flow.concurrency.is_none() && flow.priority.is_none() && flow.debounce.is_none() {
            return TokenStream::new();
        }
        let p = private();
        let concurrency = self.input_key(flow.concurrency.as_ref());
        let debounce = self.input_key(flow.debounce.as_ref());
        let priority = match &flow.priority {
            None => quote!(0),
            Some((_, PriorityAst::Literal(value, _))) if *value < 0 => {
                let magnitude = value.unsigned_abs();
                quote!(::core::primitive::i64::wrapping_neg(#magnitude as i64))
            }
            Some((_, PriorityAst::Literal(value, _))) => quote!(#value),
            Some((_, PriorityAst::Path(path))) => {
                let root = &path.root;
                let fields = &path.fields;
                quote_spanned!(path.tokens.span()=> #p::priority_value(&__input.#root #(.#fields)*))
            }
        };
        quote! {
            fn admission(__input: &Self::Input) -> #p::Admission {
                #p::Admission {
                    concurrency: #concurrency,
                    priority: #priority,
                    debounce: #debounce,
                }
            }
        }
    }

    /// A workflow-level key read from the input (`None` without the block).
    fn input_key(&self, block: Option<&LimitAst>) -> TokenStream {
        let p = private();
        match block.and_then(|block| block.key.as_ref()) {
            None => quote!(::core::option::Option::None),
            Some(KeyAst::Static(lit)) => {
                quote!(::core::option::Option::Some(::std::string::String::from(#lit)))
            }
            Some(KeyAst::Path(path)) => {
                let root = &path.root;
                let fields = &path.fields;
                quote_spanned!(path.tokens.span()=> #p::limit_key(&__input.#root #(.#fields)*))
            }
        }
    }

    /// The `fn step_keys()` of `impl Workflow`; empty when no step has `concurrency: { .. }`
    /// or `rate`.
    pub(super) fn step_keys_item(&self) -> TokenStream {
        let p = private();
        let arms: Vec<TokenStream> = self
            .ast
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| step.fields.limit.is_some() || step.fields.rate.is_some())
            .map(|(index, step)| {
                let concurrency = self.step_key(step.fields.limit.as_ref().map(|(_, l)| l));
                let rate = self.step_key(step.fields.rate.as_ref().map(|(_, r)| r));
                quote! {
                    #index => ::core::result::Result::Ok(#p::StepKeys {
                        concurrency: #concurrency,
                        rate: #rate,
                    }),
                }
            })
            .collect();
        if arms.is_empty() {
            return TokenStream::new();
        }
        quote! {
            #[allow(unused_variables)]
            fn step_keys(
                __step: usize,
                __input: &Self::Input,
                __outputs: &dyn #p::OutputSource,
            ) -> ::core::result::Result<#p::StepKeys, #p::CallError> {
                match __step {
                    #(#arms)*
                    _ => ::core::result::Result::Ok(::core::default::Default::default()),
                }
            }
        }
    }

    /// A step-level key: a literal, a read of the input, or a read of an upstream output
    /// (absent when that step settled without one).
    fn step_key(&self, block: Option<&LimitAst>) -> TokenStream {
        let p = private();
        let Some(KeyAst::Path(path)) = block.and_then(|block| block.key.as_ref()) else {
            return self.input_key(block);
        };
        match self.names.lookup(&path.root.to_string()) {
            Some(Name::Step(dep)) => {
                let ty = self.journal_ty(dep);
                let fields = &path.fields;
                let read =
                    quote_spanned!(path.tokens.span()=> #p::limit_key(&__value #(.#fields)*));
                quote! {
                    #p::optional::<#ty>(__outputs, #dep)?.and_then(|__value| #read)
                }
            }
            _ => self.input_key(block),
        }
    }
}
