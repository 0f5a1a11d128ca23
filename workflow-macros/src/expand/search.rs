//! What `search: [..]` adds to the generated code: `Workflow::search`, which reads each
//! entry from the run's input through `workflow_core::SearchValue`, spanned on the entry so
//! a type that cannot be searched is reported there.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::{private, Gen};

impl Gen<'_> {
    /// The `fn search()` of `impl Workflow`; empty for a workflow without `search`.
    pub(super) fn search_item(&self) -> TokenStream {
        let Some(search) = &self.ast.search else {
            return TokenStream::new();
        };
        let p = private();
        let entries = search.entries.iter().map(|entry| {
            let name = entry.name().to_string();
            let root = &entry.root;
            let fields = &entry.fields;
            let value =
                quote_spanned!(entry.tokens.span()=> #p::search_value(&__input.#root #(.#fields)*));
            quote!((#name, #value))
        });
        quote! {
            fn search(__input: &Self::Input) -> ::std::vec::Vec<(&'static str, ::core::option::Option<::std::string::String>)> {
                ::std::vec![#(#entries),*]
            }
        }
    }
}
