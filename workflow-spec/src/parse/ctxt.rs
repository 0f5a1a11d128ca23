//! An error context that gathers every error of a spec, so one check never hides another.

use std::cell::RefCell;
use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;

/// Collects `syn::Error`s from the parser and the checks, and combines them at the end.
#[derive(Debug, Default)]
pub struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
}

impl Ctxt {
    /// An empty context.
    pub fn new() -> Self {
        Ctxt::default()
    }

    /// Records an error at a span.
    pub fn error(&self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Records an error at a span with a `help:` line.
    pub fn error_help(&self, span: Span, message: impl Display, help: Option<impl Display>) {
        match help {
            Some(help) => self.error(span, format!("{message}\nhelp: {help}")),
            None => self.error(span, message),
        }
    }

    /// Records an error spanning the tokens of `node`.
    pub fn error_spanned(&self, node: &impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(node, message));
    }

    /// Records a syn error as it is.
    pub fn push(&self, error: syn::Error) {
        self.errors.borrow_mut().push(error);
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        !self.errors.borrow().is_empty()
    }

    /// How many errors were recorded.
    pub fn len(&self) -> usize {
        self.errors.borrow().len()
    }

    /// Whether no error was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.borrow().is_empty()
    }

    /// All errors combined into one, or `Ok` when there were none.
    pub fn check(self) -> Result<(), syn::Error> {
        let mut errors = self.errors.into_inner().into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for error in errors {
            combined.combine(error);
        }
        Err(combined)
    }

    /// The errors recorded, in order.
    pub fn into_errors(self) -> Vec<syn::Error> {
        self.errors.into_inner()
    }
}

/// The nearest of `candidates` to `name`, if one is close enough to be a likely typo.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::jaro_winkler(name, candidate), candidate))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// `help: did you mean `x`?` for the nearest candidate.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    suggest(name, candidates).map(|best| format!("did you mean `{best}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_name() {
        let names = ["provision_workspace", "create_account", "human_review"];
        assert_eq!(
            suggest("provison_workspace", names),
            Some("provision_workspace")
        );
        assert_eq!(suggest("zzz", names), None);
    }

    #[test]
    fn combines_every_error() {
        let cx = Ctxt::new();
        cx.error(Span::call_site(), "one");
        cx.error(Span::call_site(), "two");
        let combined = cx.check().unwrap_err();
        assert_eq!(combined.into_iter().count(), 2);
    }
}
