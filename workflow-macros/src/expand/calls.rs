//! The dispatch of user calls (actions, compensations, reconcilers), the source of a map
//! step, and the start of a child workflow. Every value a user's token names is bound to a
//! local carrying that token's span, so a type error lands on the spec.

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::Ident;
use workflow_spec::parse::ast::{ArgAst, CallAst, ChildAst, StepAst};
use workflow_spec::parse::check::condition_reads;
use workflow_spec::parse::Name;

use super::{private, Gen};

impl Gen<'_> {
    /// The match arms dispatching one kind of call (`action`, `compensate`, `reconcile`):
    /// bind the arguments, then box an async block around `body(index, path, invocation)`,
    /// where the invocation `path(args).await` carries the span of the path in the spec.
    pub(super) fn arms(
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
                let invoke = match self.site(index, &call.key) {
                    Some(site) => self.checked_call(site, index, call, &args),
                    None => quote_spanned!(path.span()=> #path(#args).await),
                };
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
    /// the argument in the spec. A map step's item is decoded through its source, so its
    /// type is the source's item type.
    fn call_args(&self, call: &CallAst, own: usize) -> (TokenStream, TokenStream) {
        let p = private();
        let mut bindings = TokenStream::new();
        let mut args = Vec::new();
        let mut source = false;
        for (position, arg) in call.args.iter().enumerate() {
            match arg {
                ArgAst::Literal(expr) => args.push(expr.to_token_stream()),
                ArgAst::Name(ident) => {
                    let local = Ident::new(&format!("__arg{position}"), ident.span());
                    let value = match self.names.lookup_arg(own, &ident.to_string()) {
                        Some(Name::Env) => quote!(__call.env),
                        Some(Name::Ctx) => quote!(__call.ctx),
                        Some(Name::Item) => {
                            source = true;
                            quote!(__source.item(__outputs, #own)?)
                        }
                        Some(Name::Input(_)) => {
                            quote!(::core::clone::Clone::clone(&__input.#ident))
                        }
                        // A step's own output, read by its compensation: for a map step,
                        // the output of the item the call is made for.
                        Some(Name::Step(dep)) if dep == own => {
                            let ty = self.declared_ty(dep);
                            quote!(#p::required::<#ty>(__outputs, #dep)?)
                        }
                        Some(Name::Step(dep)) => self.read_step(dep),
                        None => quote!(::core::unreachable!()),
                    };
                    bindings.extend(quote!(let #local = #value;));
                    args.push(local.into_token_stream());
                }
            }
        }
        if source {
            let map_source = self.map_source(own);
            bindings = quote!(let __source = #map_source; #bindings);
        }
        (bindings, quote!(#(#args),*))
    }

    /// Reads the journaled output of step `dep` as downstream steps receive it.
    fn read_step(&self, dep: usize) -> TokenStream {
        let p = private();
        let ty = self.journal_ty(dep);
        if self.optional(dep) {
            quote!(#p::optional::<#ty>(__outputs, #dep)?)
        } else {
            quote!(#p::required::<#ty>(__outputs, #dep)?)
        }
    }

    /// `map_source(|input, outputs| Ok(<source>))` for map step `index`: the names the
    /// source reads are bound as owned values (inputs cloned, outputs decoded), so a source
    /// such as `order.lines` moves out of its local.
    ///
    /// The call is what `map_source`'s bounds judge (iterable, items serializable), so its
    /// span is the source's: its first tokens carry the span of the source's first token
    /// and its parentheses the span of the source's last, and rustc reports a broken bound
    /// on the whole source expression in the spec (once, though several functions check it).
    pub(super) fn map_source(&self, index: usize) -> TokenStream {
        let Some((_, for_each)) = &self.step(index).fields.for_each else {
            return quote!(::core::unreachable!());
        };
        let source = &for_each.source;
        let bindings = condition_reads(source).into_iter().filter_map(|ident| {
            match self.names.lookup(&ident.to_string())? {
                Name::Step(dep) => {
                    let value = self.read_step(dep);
                    let ty = self.passed_ty(dep);
                    Some(quote!(let #ident: #ty = #value;))
                }
                Name::Input(input) => {
                    let ty = &self.ast.inputs[input].ty;
                    Some(quote!(let #ident: #ty = ::core::clone::Clone::clone(&__input.#ident);))
                }
                Name::Env | Name::Ctx | Name::Item => None,
            }
        });
        let tokens: Vec<TokenTree> = source.to_token_stream().into_iter().collect();
        let (Some(first), Some(last)) = (tokens.first(), tokens.last()) else {
            return quote!(::core::unreachable!());
        };
        let mut body = Group::new(
            Delimiter::Brace,
            quote! {
                #(#bindings)*
                ::core::result::Result::Ok(#source)
            },
        );
        body.set_span(last.span());
        let __p = crate::krate::private_at(first.span());
        let closure = quote_spanned! {first.span()=>
            |__input: &Self::Input, __outputs: &dyn #__p::OutputSource|
                -> ::core::result::Result<_, #__p::CallError> #body
        };
        let mut args = Group::new(Delimiter::Parenthesis, closure);
        args.set_span(last.span());
        quote_spanned!(first.span()=> #__p::map_source #args)
    }

    /// The arm of `Workflow::child` for child step `index`: the child's `…Input` built from
    /// the step's arguments (an unknown or missing field, or a value of the wrong type, is
    /// a rustc error at the spec's token), the check that the step's declared output is the
    /// child's `…Outputs`, and the start.
    pub(super) fn child_arm(&self, index: usize, child: &ChildAst) -> TokenStream {
        let path = &child.path;
        let mut bindings = TokenStream::new();
        let mut fields = Vec::new();
        for (position, input) in child.fields.iter().enumerate() {
            let field = &input.field;
            let value = match &input.arg {
                ArgAst::Literal(expr) => expr.to_token_stream(),
                ArgAst::Name(ident) => {
                    let local = Ident::new(&format!("__arg{position}"), ident.span());
                    let value = match self.names.lookup(&ident.to_string()) {
                        Some(Name::Input(_)) => {
                            quote!(::core::clone::Clone::clone(&__input.#ident))
                        }
                        Some(Name::Step(dep)) => self.read_step(dep),
                        Some(Name::Env | Name::Ctx | Name::Item) | None => {
                            quote!(::core::unreachable!())
                        }
                    };
                    bindings.extend(quote!(let #local = #value;));
                    local.into_token_stream()
                }
            };
            fields.push(quote!(#field: #value));
        }
        let declared = self.declared_ty(index);
        let __p = crate::krate::private_at(declared.span());
        let outputs_check =
            quote_spanned!(declared.span()=> #__p::child_outputs::<#path, #declared>(););
        // A struct expression cannot name `<Child as Workflow>::Input` directly (qualified
        // paths there are unstable); an alias can, and the alias carries the path's span,
        // so a missing field is reported at the child workflow in the spec.
        let alias = Ident::new("__ChildInput", path.span());
        let __p = crate::krate::private_at(path.span());
        let input_ty =
            quote_spanned!(path.span()=> type #alias = <#path as #__p::Workflow>::Input;);
        let start = quote_spanned!(path.span()=> #__p::child_start::<#path>(&__child));
        quote! {
            #index => {
                #outputs_check
                #bindings
                #input_ty
                let __child = #alias { #(#fields,)* };
                #start
            }
        }
    }
}
