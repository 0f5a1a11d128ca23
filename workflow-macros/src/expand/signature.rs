//! The call of a spec file's function, checked against the signature the spec gives it.
//!
//! Code generated from a file has no span in the file: a missing or mistyped function
//! would be reported by rustc at the whole `workflow_file!(…)` call, without a line of the
//! file. So a file's call goes through a signature made for that one call: a local trait
//! implemented only for the function pointer the spec expects, whose
//! `#[diagnostic::on_unimplemented]` message carries the file's `path:line:col` and the
//! expected `async fn`. The function is found by name through a glob import that shadows a
//! stand-in of the same name (`fn(NotFound, ..) -> NotFound`, which no signature accepts),
//! so a missing function is that same one error too. The glob import is of the actions
//! module, or, for a name without one, of the module that invokes the macro (`self::*`,
//! which holds its items and its imports): a function declared inside a function body is
//! not found by a plain name from a file.
//!
//! ```text
//! error[E0277]: specs/orders.yaml:6:13: `fetch`, the action of step `fetch`, is missing or does not have the signature the spec expects
//!   | expected `pub async fn fetch(order: String) -> Result<u32, E>` in `crate::acts`
//! ```

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, ToTokens};
use syn::{Expr, Ident, Lit};
use workflow_spec::model::OnItemFailure;
use workflow_spec::parse::ast::{ArgAst, CallAst};
use workflow_spec::parse::{tokens_to_string, Name};

use super::{private, Gen};

/// Where a call is written in a spec file: `path:line:col`, and its parameters' names.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    /// The step's id.
    pub(crate) step: String,
    /// `action`, `compensate` or `reconcile`.
    pub(crate) key: String,
    /// `specs/orders.yaml:6:13`.
    pub(crate) at: String,
    /// The parameters' names as the file gives them.
    pub(crate) params: Vec<String>,
}

/// One parameter of the expected signature.
struct Param {
    /// Its type in the trait, or `None` for a type the argument's value decides (an
    /// unsuffixed number, a map step's item): a type parameter of the trait.
    ty: Option<TokenStream>,
    /// Its type as people read it.
    shown: String,
}

impl Gen<'_> {
    /// The site of step `index`'s call under `key`, when the spec comes from a file.
    pub(super) fn site(&self, index: usize, key: &Ident) -> Option<&Site> {
        let step = self.step(index).id.to_string();
        self.sites
            .iter()
            .find(|site| site.step == step && key == site.key.as_str())
    }

    /// `call(args).await` through the signature the spec expects, for a call written at
    /// `site`: a result of `Result<T, StepError>` for an action (`T` the declared output),
    /// `Result<(), StepError>` for a compensation, `Result<Option<T>, StepError>` for a
    /// reconcile function.
    pub(super) fn checked_call(
        &self,
        site: &Site,
        index: usize,
        call: &CallAst,
        args: &TokenStream,
    ) -> TokenStream {
        let p = private();
        let params: Vec<Param> = call.args.iter().map(|arg| self.param(index, arg)).collect();
        let out = self.declared_ty(index);
        let key = call.key.to_string();
        // What the function's future yields (a pattern over the impl's parameters), what
        // the call gives the dispatch, and how the one becomes the other.
        let (yields, gives, convert, returns) = match key.as_str() {
            "compensate" => (
                quote!(::core::result::Result<__T, __E>),
                quote!(::core::result::Result<(), #p::StepError>),
                quote!(self
                    .map(::core::mem::drop)
                    .map_err(::core::convert::Into::into)),
                "Result<_, E>".to_owned(),
            ),
            "reconcile" => (
                quote!(::core::result::Result<::core::option::Option<#out>, __E>),
                quote!(::core::result::Result<::core::option::Option<#out>, #p::StepError>),
                quote!(self.map_err(::core::convert::Into::into)),
                format!("Result<Option<{}>, E>", self.shown_declared(index)),
            ),
            _ => (
                quote!(::core::result::Result<#out, __E>),
                quote!(::core::result::Result<#out, #p::StepError>),
                quote!(self.map_err(::core::convert::Into::into)),
                format!("Result<{}, E>", self.shown_declared(index)),
            ),
        };
        let any_ok = if key == "compensate" {
            quote!(__T,)
        } else {
            TokenStream::new()
        };
        let path = &call.path;
        let segments: Vec<&syn::PathSegment> = path.segments.iter().collect();
        let Some((last, prefix)) = segments.split_last() else {
            return quote!(#path(#args).await);
        };
        let name = &last.ident;
        let module = if prefix.is_empty() {
            quote!(self)
        } else {
            let leading = path.leading_colon;
            quote!(#leading #(#prefix)::*)
        };
        let shown_module = tokens_to_string(&module);
        let shown_params: Vec<String> = params
            .iter()
            .enumerate()
            .map(|(position, param)| {
                let named = site
                    .params
                    .get(position)
                    .cloned()
                    .unwrap_or_else(|| format!("arg{}", position + 1));
                format!("{named}: {}", param.shown)
            })
            .collect();
        let signature = format!(
            "pub async fn {name}({}) -> {returns}",
            shown_params.join(", ")
        );
        let what = match key.as_str() {
            "compensate" => "the compensation",
            "reconcile" => "the reconcile function",
            _ => "the action",
        };
        let message = escape(&format!(
            "{}: `{name}`, {what} of step `{}`, is missing or does not have the signature the spec expects",
            site.at, site.step
        ));
        let label = escape(&format!("expected `{signature}` in `{shown_module}`"));
        let note = escape(
            "`E` is any error type with `Into<workflow_core::StepError>`; the parameters are the step's `inputs:` in order, then the `with:` values it does not name",
        );

        let generics: Vec<Ident> = params
            .iter()
            .enumerate()
            .filter(|(_, param)| param.ty.is_none())
            .map(|(position, _)| format_ident!("__G{}", position))
            .collect();
        let tys: Vec<TokenStream> = params
            .iter()
            .enumerate()
            .map(|(position, param)| match &param.ty {
                Some(ty) => ty.clone(),
                None => format_ident!("__G{}", position).into_token_stream(),
            })
            .collect();
        let values: Vec<Ident> = (0..params.len())
            .map(|position| format_ident!("__a{}", position))
            .collect();
        let holes = params.iter().map(|_| quote!(_));
        let stand_in_params = params.iter().map(|_| quote!(_: NotFound));
        // The names a user's function and the stand-in are given carry no span of the spec:
        // they are the macro's own, as every token generated from a file is.
        let stand_in = Ident::new(&name.to_string(), Span::call_site());
        quote! {{
            #[allow(dead_code)]
            struct NotFound;
            impl ::core::future::Future for NotFound {
                type Output = NotFound;
                fn poll(
                    self: ::core::pin::Pin<&mut Self>,
                    _: &mut ::core::task::Context<'_>,
                ) -> ::core::task::Poll<NotFound> {
                    ::core::task::Poll::Pending
                }
            }
            let __function = {
                #[allow(dead_code, non_snake_case, clippy::too_many_arguments)]
                fn #stand_in(#(#stand_in_params),*) -> NotFound {
                    NotFound
                }
                {
                    #[allow(unused_imports)]
                    use #module::*;
                    #stand_in
                }
            };
            #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
            trait Returns {
                fn __into(self) -> #gives;
            }
            impl<#any_ok __E: ::core::convert::Into<#p::StepError>> Returns for #yields {
                fn __into(self) -> #gives {
                    #convert
                }
            }
            #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
            trait Signature<'__a, #(#generics),*> {
                #[allow(clippy::too_many_arguments)]
                fn __call(self, #(#values: #tys),*) -> #p::BoxFuture<'__a, #gives>;
            }
            impl<'__a, #(#generics,)* __R> Signature<'__a, #(#generics),*> for fn(#(#tys),*) -> __R
            where
                __R: ::core::future::Future + ::core::marker::Send + '__a,
                <__R as ::core::future::Future>::Output: Returns,
            {
                #[allow(clippy::too_many_arguments)]
                fn __call(self, #(#values: #tys),*) -> #p::BoxFuture<'__a, #gives> {
                    let __future = self(#(#values),*);
                    ::std::boxed::Box::pin(async move { Returns::__into(__future.await) })
                }
            }
            let __pointer: fn(#(#holes),*) -> _ = __function;
            Signature::__call(__pointer, #args).await
        }}
    }

    /// The parameter an argument of step `own`'s call fills.
    fn param(&self, own: usize, arg: &ArgAst) -> Param {
        let p = private();
        let any = |shown: &str| Param {
            ty: None,
            shown: shown.to_owned(),
        };
        match arg {
            ArgAst::Literal(expr) => match literal_type(expr) {
                Some(ty) => Param {
                    shown: ty.clone(),
                    ty: ty.parse().ok(),
                },
                None if is_float(expr) => any("{float}"),
                None => any("{integer}"),
            },
            ArgAst::Name(ident) => match self.names.lookup_arg(own, &ident.to_string()) {
                Some(Name::Env) => {
                    let env = self.env_ty();
                    Param {
                        shown: format!("&{}", tokens_to_string(&env)),
                        ty: Some(quote!(&'__a #env)),
                    }
                }
                Some(Name::Ctx) => Param {
                    ty: Some(quote!(&'__a #p::StepContext)),
                    shown: "&StepContext".to_owned(),
                },
                Some(Name::Input(input)) => {
                    let ty = &self.ast.inputs[input].ty;
                    Param {
                        ty: Some(ty.to_token_stream()),
                        shown: tokens_to_string(ty),
                    }
                }
                Some(Name::Step(dep)) if dep == own => Param {
                    ty: Some(self.declared_ty(dep)),
                    shown: self.shown_declared(dep),
                },
                Some(Name::Step(dep)) => Param {
                    ty: Some(self.passed_ty(dep)),
                    shown: self.shown_passed(dep),
                },
                Some(Name::Item) | None => any("_"),
            },
        }
    }

    /// [`Gen::declared_ty`] as people read it.
    fn shown_declared(&self, index: usize) -> String {
        match &self.step(index).output {
            Some(ty) => tokens_to_string(ty),
            None => "Approval".to_owned(),
        }
    }

    /// [`Gen::passed_ty`] as people read it.
    fn shown_passed(&self, index: usize) -> String {
        let ty = self.shown_declared(index);
        let fields = &self.step(index).fields;
        let journal = match (&fields.for_each, &fields.on_item_failure) {
            (None, _) => ty,
            (Some(_), Some((_, OnItemFailure::Skip))) => format!("Vec<Option<{ty}>>"),
            (Some(_), _) => format!("Vec<{ty}>"),
        };
        if self.optional(index) {
            format!("Option<{journal}>")
        } else {
            journal
        }
    }
}

/// The type of a literal argument, when the literal alone decides it.
fn literal_type(expr: &Expr) -> Option<String> {
    let Expr::Lit(lit) = expr else {
        return None;
    };
    match &lit.lit {
        Lit::Str(_) => Some("&'static str".to_owned()),
        Lit::Bool(_) => Some("bool".to_owned()),
        Lit::Char(_) => Some("char".to_owned()),
        Lit::Int(int) if !int.suffix().is_empty() => Some(int.suffix().to_owned()),
        Lit::Float(float) if !float.suffix().is_empty() => Some(float.suffix().to_owned()),
        _ => None,
    }
}

fn is_float(expr: &Expr) -> bool {
    match expr {
        Expr::Lit(lit) => matches!(lit.lit, Lit::Float(_)),
        Expr::Unary(unary) => is_float(&unary.expr),
        _ => false,
    }
}

/// Text for `#[diagnostic::on_unimplemented]`, whose strings are format strings: braces
/// doubled.
fn escape(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}
