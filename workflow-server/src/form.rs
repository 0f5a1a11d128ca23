//! Decision forms in the inbox: a form type's fields rendered as inputs, and the posted
//! inputs read back as the typed decision.

use axum::http::StatusCode;
use serde_json::Value;
use workflow_core::form::{self, FieldKind, FormField};

use crate::error::ApiError;
use maud::{html, Markup};

use crate::html::words;

/// The prefix of a form field's input name: `field.amount_cents`.
pub(crate) const PREFIX: &str = "field.";

/// The inputs of `fields`, one labelled input each: text, a number within the type's
/// range, a checkbox, or a choice.
pub(crate) fn render(fields: &[FormField]) -> Markup {
    html! {
        @for field in fields {
            @let name = format!("{PREFIX}{}", field.name);
            label {
                (words(field.name))
                @match &field.kind {
                    FieldKind::Text => input name=(name) required[field.required];,
                    FieldKind::Integer { min, max } => {
                        input type="number" name=(name) min=(min) max=(max) step="1" required[field.required];
                    }
                    FieldKind::Bool => input type="checkbox" name=(name) value="true";,
                    FieldKind::Choice { choices } => {
                        select name=(name) required[field.required] {
                            @if !field.required {
                                option value="" {}
                            }
                            @for choice in choices {
                                option value=(choice) { (choice) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The decision the posted `field.NAME` inputs make, checked against `fields`; a mistake is
/// a 422 `wrong_type` naming the field.
pub(crate) fn read(fields: &[FormField], posted: &[(String, String)]) -> Result<Value, ApiError> {
    let get = |name: &str| {
        posted
            .iter()
            .find(|(key, _)| key.strip_prefix(PREFIX) == Some(name))
            .map(|(_, value)| value.as_str())
    };
    form::from_text(fields, get).map_err(|error| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "wrong_type",
            error.to_string(),
        )
    })
}
