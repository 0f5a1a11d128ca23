//! Decision forms: a human step's decision type with typed fields, which the inbox
//! renders as a form and the engine checks field by field.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use workflow_core::prelude::*;
//!
//! #[derive(Clone, Serialize, Deserialize, DecisionForm)]
//! pub enum Reason { Damaged, Late, Other }
//!
//! #[derive(Clone, Serialize, Deserialize, DecisionForm)]
//! pub struct RefundDecision {
//!     approved: bool,
//!     amount_cents: u64,
//!     reason: Reason,
//!     note: Option<String>,
//! }
//!
//! let fields = RefundDecision::fields();
//! assert_eq!(fields[1].name, "amount_cents");
//! assert!(!fields[3].required);
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// What a field of a decision form holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FieldKind {
    /// Text.
    Text,
    /// A whole number between `min` and `max`.
    Integer {
        /// The least value.
        min: i128,
        /// The greatest value.
        max: i128,
    },
    /// Yes or no.
    Bool,
    /// One of these values (an enum of unit variants, as it serializes).
    Choice {
        /// The values, in declaration order.
        choices: Vec<String>,
    },
}

/// One field of a decision form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FormField {
    /// The field's name, as the decision's JSON spells it.
    pub name: &'static str,
    /// What it holds.
    #[serde(flatten)]
    pub kind: FieldKind,
    /// Whether a value must be given (`Option` fields may be left out).
    pub required: bool,
}

/// A type that can be a field of a decision form: text, integers, `bool`, enums of unit
/// variants deriving [`DecisionForm`](macro@crate::DecisionForm), and `Option`s of those.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a field of a decision form",
    label = "not a form field",
    note = "a decision form's fields are `String`, integers, `bool`, enums of unit variants deriving `DecisionForm`, or `Option` of one of those"
)]
pub trait FormValue {
    /// What the field holds.
    fn kind() -> FieldKind;
    /// Whether a value must be given.
    fn required() -> bool {
        true
    }
}

impl FormValue for String {
    fn kind() -> FieldKind {
        FieldKind::Text
    }
}

macro_rules! integers {
    ($($ty:ty),*) => {$(
        impl FormValue for $ty {
            fn kind() -> FieldKind {
                FieldKind::Integer { min: <$ty>::MIN as i128, max: <$ty>::MAX as i128 }
            }
        }
    )*};
}

integers!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);

impl FormValue for bool {
    fn kind() -> FieldKind {
        FieldKind::Bool
    }
}

impl<T: FormValue> FormValue for Option<T> {
    fn kind() -> FieldKind {
        T::kind()
    }
    fn required() -> bool {
        false
    }
}

/// A decision type made of typed fields: `#[derive(DecisionForm)]` on a struct with named
/// fields (see [`FormValue`] for the field types). A human step with such an output type
/// gets a form in the inbox, and a decision is checked field by field before it is taken
/// (a mistake is refused naming the field: `wrong_type`, 422 over HTTP).
pub trait DecisionForm: Serialize + DeserializeOwned {
    /// The fields, in declaration order.
    fn fields() -> Vec<FormField>;
}

/// Why a decision does not fit its form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct FieldError {
    /// The field (empty when the decision is not an object at all).
    pub field: String,
    /// What is wrong, in words.
    pub message: String,
}

fn field_error(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// Checks `decision` against `fields`: an object with every required field, each of its
/// kind (and in range, and one of the choices), and no other field.
pub fn check(fields: &[FormField], decision: &Value) -> Result<(), FieldError> {
    let Some(object) = decision.as_object() else {
        return Err(field_error(
            "",
            "the decision must be an object of the form's fields",
        ));
    };
    if let Some(unknown) = object
        .keys()
        .find(|key| !fields.iter().any(|field| field.name == key.as_str()))
    {
        let names: Vec<&str> = fields.iter().map(|field| field.name).collect();
        return Err(field_error(
            unknown,
            format!("the form has no such field (it has {})", names.join(", ")),
        ));
    }
    for field in fields {
        match object.get(field.name) {
            None | Some(Value::Null) if field.required => {
                return Err(field_error(field.name, "a value is required"));
            }
            None | Some(Value::Null) => {}
            Some(value) => check_value(field, value)?,
        }
    }
    Ok(())
}

fn check_value(field: &FormField, value: &Value) -> Result<(), FieldError> {
    let fits = match &field.kind {
        FieldKind::Text => value.is_string(),
        FieldKind::Bool => value.is_boolean(),
        FieldKind::Integer { min, max } => {
            let number = value
                .as_i64()
                .map(i128::from)
                .or_else(|| value.as_u64().map(i128::from));
            match number {
                Some(n) if n < *min || n > *max => {
                    return Err(field_error(
                        field.name,
                        format!("{n} is out of range ({min} to {max})"),
                    ))
                }
                Some(_) => true,
                None => false,
            }
        }
        FieldKind::Choice { choices } => match value.as_str() {
            Some(choice) if choices.iter().any(|c| c == choice) => true,
            Some(choice) => {
                return Err(field_error(
                    field.name,
                    format!("`{choice}` is not one of {}", choices.join(", ")),
                ))
            }
            None => false,
        },
    };
    if fits {
        Ok(())
    } else {
        let expected = match &field.kind {
            FieldKind::Text => "text",
            FieldKind::Bool => "true or false",
            FieldKind::Integer { .. } => "a whole number",
            FieldKind::Choice { .. } => "one of the choices, as text",
        };
        Err(field_error(
            field.name,
            format!("expected {expected}, found {value}"),
        ))
    }
}

/// A form's fields from their text as a browser posts them (`name` → `text`; a checkbox
/// that is not ticked is not posted): text as it is, numbers parsed, a ticked box `true`,
/// an empty optional field left out. Then [`check`]ed.
pub fn from_text<'a>(
    fields: &[FormField],
    posted: impl Fn(&str) -> Option<&'a str>,
) -> Result<Value, FieldError> {
    let mut object = serde_json::Map::new();
    for field in fields {
        let text = posted(field.name);
        let value = match (&field.kind, text) {
            (FieldKind::Bool, text) => Value::Bool(matches!(text, Some("true" | "on" | "yes"))),
            (_, None) => continue,
            (_, Some(text)) if text.trim().is_empty() && !field.required => continue,
            (FieldKind::Text | FieldKind::Choice { .. }, Some(text)) => {
                Value::String(text.to_owned())
            }
            (FieldKind::Integer { .. }, Some(text)) => {
                let text = text.trim();
                text.parse::<i64>()
                    .map(Value::from)
                    .or_else(|_| text.parse::<u64>().map(Value::from))
                    .map_err(|_| {
                        field_error(field.name, format!("`{text}` is not a whole number"))
                    })?
            }
        };
        object.insert(field.name.to_owned(), value);
    }
    let value = Value::Object(object);
    check(fields, &value)?;
    Ok(value)
}

/// The value a unit variant of a choice serializes to (its name, or serde's rename);
/// `name` as written if it serializes to something else.
#[doc(hidden)]
pub fn choice<T: Serialize>(variant: &T, name: &str) -> String {
    match serde_json::to_value(variant) {
        Ok(Value::String(text)) => text,
        _ => name.to_owned(),
    }
}

#[doc(hidden)]
pub mod probe {
    //! Whether a decision type is a form, asked of a concrete type in generated code
    //! (autoref: the inherent-looking method of the form impl wins when it applies).
    use super::{DecisionForm, FormField};
    use std::marker::PhantomData;

    /// A question about `T`.
    #[derive(Debug)]
    pub struct Probe<T>(pub PhantomData<T>);

    /// The answer for a form.
    pub trait IsForm {
        /// The form's fields.
        fn form_fields(&self) -> Option<Vec<FormField>>;
    }

    impl<T: DecisionForm> IsForm for Probe<T> {
        fn form_fields(&self) -> Option<Vec<FormField>> {
            Some(T::fields())
        }
    }

    /// The answer for any other type.
    pub trait NotForm {
        /// No fields.
        fn form_fields(&self) -> Option<Vec<FormField>>;
    }

    impl<T> NotForm for &Probe<T> {
        fn form_fields(&self) -> Option<Vec<FormField>> {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> Vec<FormField> {
        vec![
            FormField {
                name: "approved",
                kind: FieldKind::Bool,
                required: true,
            },
            FormField {
                name: "amount_cents",
                kind: u32::kind(),
                required: true,
            },
            FormField {
                name: "reason",
                kind: FieldKind::Choice {
                    choices: vec!["Damaged".into(), "Late".into()],
                },
                required: true,
            },
            FormField {
                name: "note",
                kind: FieldKind::Text,
                required: <Option<String>>::required(),
            },
        ]
    }

    #[test]
    fn a_decision_is_checked_field_by_field() {
        let fields = fields();
        let good = json!({"approved": true, "amount_cents": 4200, "reason": "Late"});
        assert_eq!(check(&fields, &good), Ok(()));
        let named = |value: Value| check(&fields, &value).map_err(|e| e.field);
        assert_eq!(
            named(json!({"approved": true, "reason": "Late"})),
            Err("amount_cents".into())
        );
        assert_eq!(
            named(json!({"approved": true, "amount_cents": -1, "reason": "Late"})),
            Err("amount_cents".into())
        );
        assert_eq!(
            named(json!({"approved": true, "amount_cents": "1", "reason": "Late"})),
            Err("amount_cents".into())
        );
        assert_eq!(
            named(json!({"approved": true, "amount_cents": 1, "reason": "Lost"})),
            Err("reason".into())
        );
        assert_eq!(
            named(json!({"approved": true, "amount_cents": 1, "reason": "Late", "x": 1})),
            Err("x".into())
        );
        assert_eq!(named(json!([1])), Err(String::new()));
    }

    #[test]
    fn posted_text_becomes_typed_values() {
        let fields = fields();
        let posted = [
            ("amount_cents", " 4200 "),
            ("reason", "Damaged"),
            ("note", ""),
        ];
        let get = |name: &str| posted.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        assert_eq!(
            from_text(&fields, get),
            Ok(json!({"approved": false, "amount_cents": 4200, "reason": "Damaged"}))
        );
        let posted = [
            ("approved", "on"),
            ("amount_cents", "12x"),
            ("reason", "Late"),
        ];
        let get = |name: &str| posted.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        assert_eq!(
            from_text(&fields, get).map_err(|e| e.field),
            Err("amount_cents".into())
        );
    }
}
