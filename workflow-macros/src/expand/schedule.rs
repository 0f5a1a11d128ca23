//! What a `schedule: { ... }` adds to the generated code: `Workflow::schedule()`, and the
//! check that a scheduled workflow's one input is the runtime's `Tick`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::{private, Gen};

impl Gen<'_> {
    /// The `fn schedule()` of `impl Workflow` and a check that the input is a `Tick`;
    /// both empty for a workflow without a schedule.
    pub(super) fn schedule_items(&self) -> (TokenStream, TokenStream) {
        if self.ast.schedule.is_none() {
            return (TokenStream::new(), TokenStream::new());
        }
        let p = private();
        let item = quote! {
            fn schedule() -> ::core::option::Option<&'static #p::workflow_spec::Schedule> {
                <Self as #p::Workflow>::spec().schedule.as_ref()
            }
        };
        // The parser accepts any type named `Tick`; the compiler decides it is the runtime's,
        // with the error on the input's type in the spec.
        let check = match self.ast.inputs.first() {
            Some(input) => {
                let ty = &input.ty;
                let tick = quote_spanned!(ty.span()=> __tick);
                quote! {
                    const _: () = {
                        #[allow(dead_code)]
                        fn __scheduled_input(__tick: #p::Tick) -> #ty {
                            #tick
                        }
                    };
                }
            }
            None => TokenStream::new(),
        };
        (item, check)
    }
}
