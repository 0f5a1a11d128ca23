//! Finding runs by what they are about, and keeping them only as long as needed.
//!
//! - `search: [order.customer_id, order.id]` in a spec names business keys: when a run
//!   starts, the value of each is read from its inputs through [`SearchValue`] and stored
//!   with the run (in the same transaction that creates it), so that
//!   [`RunFilter::search`](crate::store::RunFilter::search), `workflow runs list --where
//!   customer_id=c-42`, the API's `?where=customer_id:c-42` and the inbox find it.
//! - `retention: 30d` in a spec, or [`EngineBuilder::retention`](crate::EngineBuilder::retention)
//!   for every workflow, purges finished runs older than that ([`purge`]).

pub mod purge;

pub use self::purge::{purge_all, PurgeReport, Retention, DEFAULT_BATCH};

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

/// A type whose values can be stored as a search value: text, whole numbers, booleans and
/// characters, or an `Option` of one (`None` stores nothing). The value is stored as its
/// text, so `42` is found by `customer_id=42`.
///
/// Implement it for an id type of your own:
///
/// ```
/// use workflow_core::SearchValue;
///
/// struct CustomerId(String);
///
/// impl SearchValue for CustomerId {
///     fn search_value(&self) -> Option<String> {
///         Some(self.0.clone())
///     }
/// }
/// assert_eq!(CustomerId("c-42".into()).search_value().as_deref(), Some("c-42"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a search value",
    label = "listed in `search`, but `{Self}` is not text or a whole number",
    note = "search values are `String`, `&str`, integers, `bool`, `char` or an `Option` of one; implement `workflow_core::SearchValue` for an id type of your own, or search one of its fields"
)]
pub trait SearchValue {
    /// The value as stored; `None` stores nothing for this run.
    fn search_value(&self) -> Option<String>;
}

impl SearchValue for str {
    fn search_value(&self) -> Option<String> {
        Some(self.to_owned())
    }
}

impl SearchValue for String {
    fn search_value(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl<T: SearchValue + ?Sized> SearchValue for &T {
    fn search_value(&self) -> Option<String> {
        (**self).search_value()
    }
}

impl<T: SearchValue + ?Sized> SearchValue for Box<T> {
    fn search_value(&self) -> Option<String> {
        (**self).search_value()
    }
}

impl<T: SearchValue + ?Sized> SearchValue for Arc<T> {
    fn search_value(&self) -> Option<String> {
        (**self).search_value()
    }
}

impl<T: SearchValue + ?Sized> SearchValue for Rc<T> {
    fn search_value(&self) -> Option<String> {
        (**self).search_value()
    }
}

impl SearchValue for Cow<'_, str> {
    fn search_value(&self) -> Option<String> {
        Some(self.as_ref().to_owned())
    }
}

impl<T: SearchValue> SearchValue for Option<T> {
    fn search_value(&self) -> Option<String> {
        self.as_ref().and_then(SearchValue::search_value)
    }
}

macro_rules! display_values {
    ($($ty:ty),*) => {$(
        impl SearchValue for $ty {
            fn search_value(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}

display_values!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, bool, char);

/// The search values of a run's input as JSON, by the spec's entries: what a run started
/// without its workflow's types (a restart by the CLI) stores. Text is stored as it is,
/// numbers and booleans as their text; an absent, null or structured value stores nothing.
pub fn values_from_input(
    keys: &[workflow_spec::SearchKey],
    input: &crate::journal::Value,
) -> Vec<(String, String)> {
    keys.iter()
        .filter_map(|key| {
            let value = key
                .path
                .split('.')
                .try_fold(input, |value, field| value.get(field))?;
            let text = match value {
                serde_json::Value::String(text) => text.clone(),
                serde_json::Value::Number(number) => number.to_string(),
                serde_json::Value::Bool(flag) => flag.to_string(),
                _ => return None,
            };
            Some((key.name.clone(), text))
        })
        .collect()
}

/// Parses `name=value` (the CLI's `--where`) or `name:value` (the API's `where`): the
/// name is an identifier, the value anything after the first separator.
pub fn parse_condition(text: &str, separator: char) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once(separator) else {
        return Err(format!(
            "`{text}` is not a condition: write `name{separator}value`, e.g. `customer_id{separator}c-42`"
        ));
    };
    let name = name.trim();
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` is not a search name: names are the last field of a spec's `search` entries, e.g. `customer_id`"
        ));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_their_text() {
        assert_eq!("c-42".search_value().as_deref(), Some("c-42"));
        assert_eq!(42u64.search_value().as_deref(), Some("42"));
        assert_eq!((-7i32).search_value().as_deref(), Some("-7"));
        assert_eq!(Some(String::from("x")).search_value().as_deref(), Some("x"));
        assert_eq!(None::<String>.search_value(), None);
        assert_eq!(Arc::<str>::from("a").search_value().as_deref(), Some("a"));
    }

    #[test]
    fn conditions_parse_and_refuse_what_is_not_one() {
        assert_eq!(
            parse_condition("customer_id=c-42", '='),
            Ok(("customer_id".into(), "c-42".into()))
        );
        assert_eq!(
            parse_condition("note:a:b", ':'),
            Ok(("note".into(), "a:b".into()))
        );
        assert!(parse_condition("customer_id", '=').is_err());
        assert!(parse_condition("9x=1", '=').is_err());
        assert!(parse_condition("=1", '=').is_err());
    }
}
