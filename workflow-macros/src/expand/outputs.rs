//! `Serialize` and `Deserialize` for `…Outputs`, the JSON a parent journals as the output
//! of the child workflow step that ran this workflow: an object with a field per step.
//!
//! Written out rather than derived: deserializing goes through `Workflow::outputs` (one
//! decode per step, as a run's outputs are read), and serializing writes each field with
//! the span of its step's output type, so an output type that is not serializable is
//! reported at the spec once per missing trait instead of once per line of a derive.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::Ident;

use super::{private, Gen};

impl Gen<'_> {
    /// The serde impls of `…Outputs` for a spec without errors.
    pub(super) fn outputs_serde(&self) -> TokenStream {
        let p = private();
        let name = self.name();
        let outputs_ident = self.ident("Outputs");
        let count = self.ast.steps.len();
        let entries = self.ast.steps.iter().enumerate().map(|(index, step)| {
            let key = step.id.unraw().to_string();
            let ty = self.declared_ty(index);
            let field = Ident::new(&key, ty.span());
            quote_spanned!(ty.span()=> __map.serialize_entry(#key, &self.#field)?;)
        });
        // An absent optional output serializes as `null`; a present `()` does too, so only
        // the steps that may be absent read `null` as absent.
        let reads = self.ast.steps.iter().enumerate().map(|(index, step)| {
            let key = step.id.unraw().to_string();
            if self.optional(index) {
                quote!(__map.remove(#key).filter(|__value| !__value.is_null()))
            } else {
                quote!(__map.remove(#key))
            }
        });
        quote! {
            impl #p::serde::Serialize for #outputs_ident {
                fn serialize<__S: #p::serde::Serializer>(&self, __serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                    use #p::serde::ser::SerializeMap as _;
                    let mut __map = __serializer.serialize_map(::core::option::Option::Some(#count))?;
                    #(#entries)*
                    __map.end()
                }
            }

            impl<'de> #p::serde::Deserialize<'de> for #outputs_ident {
                fn deserialize<__D: #p::serde::Deserializer<'de>>(__deserializer: __D) -> ::core::result::Result<Self, __D::Error> {
                    let mut __map = <#p::serde_json::Map<::std::string::String, #p::Value> as #p::serde::Deserialize>::deserialize(__deserializer)?;
                    let __outputs: ::std::vec::Vec<::core::option::Option<#p::Value>> = ::std::vec![#(#reads),*];
                    <#name as #p::Workflow>::outputs(&__outputs).map_err(<__D::Error as #p::serde::de::Error>::custom)
                }
            }
        }
    }

    /// The serde impls of `…Outputs` after an error: never called.
    pub(super) fn outputs_serde_fallback(&self) -> TokenStream {
        let p = private();
        let outputs_ident = self.ident("Outputs");
        quote! {
            impl #p::serde::Serialize for #outputs_ident {
                fn serialize<__S: #p::serde::Serializer>(&self, _: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                    ::core::unreachable!()
                }
            }

            impl<'de> #p::serde::Deserialize<'de> for #outputs_ident {
                fn deserialize<__D: #p::serde::Deserializer<'de>>(_: __D) -> ::core::result::Result<Self, __D::Error> {
                    ::core::unreachable!()
                }
            }
        }
    }
}
