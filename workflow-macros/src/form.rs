//! `#[derive(DecisionForm)]`: on a struct with named fields, the form a human step's
//! decision is made with; on an enum of unit variants, a choice field of such a form.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

/// Expands the derive, or its errors (every one found).
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input = match syn::parse2::<DeriveInput>(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    match expand(&input) {
        Ok(tokens) => tokens,
        Err(error) => error.to_compile_error(),
    }
}

fn error(span: Span, message: &str) -> syn::Error {
    syn::Error::new(span, message)
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(error(
            input.generics.span(),
            "a decision form cannot be generic\nhelp: name concrete field types; the inbox renders one form per type",
        ));
    }
    let krate = crate::krate::path();
    let form = quote!(#krate::form);
    match &input.data {
        Data::Struct(data) => {
            renames(&input.attrs)?;
            let Fields::Named(named) = &data.fields else {
                return Err(error(
                    data.fields.span().join(name.span()).unwrap_or(name.span()),
                    "a decision form needs named fields: they are the form's inputs\nhelp: write `struct Name { approved: bool, note: Option<String> }`",
                ));
            };
            if named.named.is_empty() {
                return Err(error(
                    name.span(),
                    "a decision form needs at least one field\nhelp: add one, e.g. `approved: bool`",
                ));
            }
            let mut fields = Vec::new();
            for field in &named.named {
                renames(&field.attrs)?;
                let Some(ident) = &field.ident else { continue };
                let key = syn::ext::IdentExt::unraw(ident).to_string();
                let ty = &field.ty;
                let kind = quote_spanned!(ty.span()=> <#ty as #form::FormValue>::kind());
                let required = quote_spanned!(ty.span()=> <#ty as #form::FormValue>::required());
                fields.push(quote! {
                    #form::FormField { name: #key, kind: #kind, required: #required }
                });
            }
            Ok(quote! {
                impl #form::DecisionForm for #name {
                    fn fields() -> ::std::vec::Vec<#form::FormField> {
                        ::std::vec![#(#fields),*]
                    }
                }
            })
        }
        Data::Enum(data) => {
            if data.variants.is_empty() {
                return Err(error(
                    name.span(),
                    "a choice needs at least one variant\nhelp: add the choices as unit variants: `enum Reason { Damaged, Late }`",
                ));
            }
            let mut choices = Vec::new();
            for variant in &data.variants {
                if !matches!(variant.fields, Fields::Unit) {
                    return Err(error(
                        variant.fields.span(),
                        "a choice of a decision form has unit variants only: the inbox offers their names\nhelp: remove the variant's data, or make the data a field of the form",
                    ));
                }
                let ident = &variant.ident;
                let written = ident.to_string();
                choices.push(quote!(#form::choice(&#name::#ident, #written)));
            }
            Ok(quote! {
                impl #form::FormValue for #name {
                    fn kind() -> #form::FieldKind {
                        #form::FieldKind::Choice { choices: ::std::vec![#(#choices),*] }
                    }
                }
            })
        }
        Data::Union(data) => Err(error(
            data.union_token.span,
            "a decision form is a struct with named fields (or an enum of unit variants for a choice), not a union",
        )),
    }
}

/// A serde attribute that renames or flattens fields would make the form's names differ
/// from the decision's JSON: refused, at the attribute.
fn renames(attrs: &[syn::Attribute]) -> syn::Result<()> {
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("serde")) {
        let text = attr.meta.to_token_stream_string();
        if ["rename", "flatten", "alias", "tag", "untagged", "content"]
            .iter()
            .any(|word| text.contains(word))
        {
            return Err(error(
                attr.span(),
                "`DecisionForm` names fields and choices as written, so serde may not rename, flatten or tag them here\nhelp: remove the attribute, or rename the field itself",
            ));
        }
    }
    Ok(())
}

trait MetaText {
    fn to_token_stream_string(&self) -> String;
}

impl MetaText for syn::Meta {
    fn to_token_stream_string(&self) -> String {
        quote::ToTokens::to_token_stream(self).to_string()
    }
}
