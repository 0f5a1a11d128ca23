//! The type check of a human step's `title` placeholders and `show` values: a function
//! that is never called and reads each path from the run's inputs and outputs, spanned on
//! the spec's tokens, so a field that does not exist is a rustc error there.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use workflow_spec::parse::Name;
use workflow_spec::title::{self, Piece};

use super::Gen;

impl Gen<'_> {
    /// `const _: () = { fn __shown(..) { .. } };` for the steps with a `title` or `show`;
    /// nothing when none has either.
    pub(super) fn shown_check(&self) -> TokenStream {
        let mut reads = Vec::new();
        for step in &self.ast.steps {
            if let Some((_, lit)) = &step.fields.title {
                for piece in title::parse(&lit.value()).unwrap_or_default() {
                    if let Piece::Value(path) = piece {
                        reads.extend(self.read(&path, lit.span()));
                    }
                }
            }
            for shown in step.fields.show.iter().flat_map(|(_, shown)| shown) {
                let path: Vec<String> = std::iter::once(&shown.root)
                    .chain(&shown.fields)
                    .map(ToString::to_string)
                    .collect();
                reads.extend(self.read(&path, shown.root.span()));
            }
        }
        if reads.is_empty() {
            return TokenStream::new();
        }
        let input = self.ident("Input");
        let outputs = self.ident("Outputs");
        quote! {
            const _: () = {
                #[allow(unused_variables, dead_code, clippy::all)]
                fn __shown(__input: &#input, __outputs: &#outputs) {
                    #(#reads)*
                }
            };
        }
    }

    /// One read of `path` (`refund.amount_cents`); `None` for a name the checks refused or
    /// a part that is not a plain identifier (a keyword), which cannot be spelled as a
    /// field access.
    fn read(&self, path: &[String], span: Span) -> Option<TokenStream> {
        let idents: Vec<Ident> = path
            .iter()
            .map(|part| {
                syn::parse_str::<Ident>(part).ok().map(|mut ident| {
                    ident.set_span(span);
                    ident
                })
            })
            .collect::<Option<_>>()?;
        let (root, fields) = idents.split_first()?;
        Some(match self.names.lookup(&root.to_string())? {
            Name::Input(_) => quote_spanned!(span=> let _ = &__input.#root #(.#fields)*;),
            Name::Step(index) if self.optional(index) && !fields.is_empty() => {
                quote_spanned!(span=> let _ = __outputs.#root.as_ref().map(|__value| &__value #(.#fields)*);)
            }
            Name::Step(_) => quote_spanned!(span=> let _ = &__outputs.#root #(.#fields)*;),
            Name::Env | Name::Ctx | Name::Item => return None,
        })
    }
}
