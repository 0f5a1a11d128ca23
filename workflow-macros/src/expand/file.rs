//! `workflow_file!`: read a spec file, check it with the YAML front end, and expand the
//! workflow it lowers to exactly as `workflow!` expands an inline spec.

use std::path::PathBuf;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitStr, Token};
use workflow_spec::parse::tokens_to_string;
use workflow_spec::yaml::{self, Options};

use super::signature::Site;

/// `"path", actions: path, env: Type`.
struct FileArgs {
    path: LitStr,
    actions: Option<syn::Path>,
    env: Option<syn::Type>,
}

impl Parse for FileArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let path: LitStr = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected the spec file's path: `workflow_file!(\"specs/onboarding.yaml\", actions: crate::onboarding, env: Services)`",
            )
        })?;
        let mut args = FileArgs {
            path,
            actions: None,
            env: None,
        };
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            let key: Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            if key == "actions" && args.actions.is_none() {
                args.actions = Some(input.parse()?);
            } else if key == "env" && args.env.is_none() {
                args.env = Some(input.parse()?);
            } else if key == "actions" || key == "env" {
                return Err(syn::Error::new(
                    key.span(),
                    format!("duplicate argument `{key}`"),
                ));
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}`\nhelp: `workflow_file!` takes `actions: module` and `env: Type` after the path"),
                ));
            }
        }
        Ok(args)
    }
}

/// Expands `workflow_file!(...)`.
pub(crate) fn workflow_file(input: TokenStream) -> TokenStream {
    let args = match syn::parse2::<FileArgs>(input) {
        Ok(args) => args,
        Err(error) => return error.to_compile_error(),
    };
    let span = args.path.span();
    let shown = args.path.value();
    let Some(full) = resolve(&shown, span) else {
        return syn::Error::new(
            span,
            format!(
                "no spec file `{shown}` in the crate's directory (CARGO_MANIFEST_DIR) nor beside the file that names it"
            ),
        )
        .to_compile_error();
    };
    let source = match std::fs::read_to_string(&full) {
        Ok(source) => source,
        Err(error) => {
            return syn::Error::new(
                span,
                format!("cannot read the spec file {}: {error}", full.display()),
            )
            .to_compile_error()
        }
    };
    // Cargo rebuilds the caller when the file changes.
    let full_text = full.to_string_lossy().into_owned();
    let include = quote::quote_spanned! {span=>
        const _: &[u8] = ::core::include_bytes!(#full_text);
    };
    let options = Options {
        actions: args.actions.as_ref().map(tokens_to_string),
        env: args.env.as_ref().map(tokens_to_string),
        env_fallback: None,
    };
    let checked = yaml::check(&source, &options);
    let errors: TokenStream = checked
        .errors
        .iter()
        .map(|error| syn::Error::new(span, error.render(&shown, &source)).to_compile_error())
        .collect();
    let Some(text) = checked.text else {
        return quote! { #errors #include };
    };
    // The tokens keep the call site's span: code generated from a file is the macro's
    // output, so lints about Rust style (clippy's `== true` in a seed's condition) stay
    // quiet, and a type error points at the invocation.
    let Ok(tokens) = text.parse::<TokenStream>() else {
        return quote! { #errors #include };
    };
    let mut parsed = workflow_spec::parse::parse(tokens);
    if !checked.errors.is_empty() {
        // The file's errors, located in the file, replace the same errors at the literal;
        // the workflow's types are still emitted so one mistake is one error.
        parsed.spec = None;
        parsed.errors.clear();
    }
    let sites: Vec<Site> = checked
        .calls
        .iter()
        .map(|call| Site {
            step: call.step.clone(),
            key: call.key.clone(),
            at: format!("{shown}:{}:{}", call.pos.line, call.pos.col),
            params: call.params.clone(),
        })
        .collect();
    let expanded = super::expand(&parsed, &sites);
    quote! { #errors #expanded #include }
}

/// The file `path` names: relative to the calling crate's manifest directory, else to the
/// directory of the source file that invokes the macro (a crate's tests, trybuild cases).
fn resolve(path: &str, span: Span) -> Option<PathBuf> {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(|dir| PathBuf::from(dir).join(path));
    let beside = span
        .local_file()
        .and_then(|file| file.parent().map(|dir| dir.join(path)));
    manifest
        .into_iter()
        .chain(beside)
        .find(|candidate| candidate.is_file())
        .map(|found| std::fs::canonicalize(&found).unwrap_or(found))
}
