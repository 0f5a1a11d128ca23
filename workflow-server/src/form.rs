//! Decision forms in the inbox: a form type's fields rendered as inputs, and the posted
//! inputs read back as the typed decision.

use axum::http::StatusCode;
use serde_json::Value;
use workflow_core::form::{self, FieldKind, FormField};

use crate::error::ApiError;
use crate::html::{escape, words, Html};

/// The prefix of a form field's input name: `field.amount_cents`.
pub(crate) const PREFIX: &str = "field.";

/// The inputs of `fields`, one labelled input each: text, a number within the type's
/// range, a checkbox, or a choice.
pub(crate) fn render(body: &mut Html, fields: &[FormField]) {
    for field in fields {
        let name = escape(&format!("{PREFIX}{}", field.name));
        let required = if field.required { " required" } else { "" };
        body.raw("<label>").text(&words(field.name));
        match &field.kind {
            FieldKind::Text => {
                body.raw(&format!("<input name=\"{name}\"{required}>"));
            }
            FieldKind::Integer { min, max } => {
                body.raw(&format!(
                    "<input type=\"number\" name=\"{name}\" min=\"{min}\" max=\"{max}\" step=\"1\"{required}>"
                ));
            }
            FieldKind::Bool => {
                body.raw(&format!(
                    "<input type=\"checkbox\" name=\"{name}\" value=\"true\">"
                ));
            }
            FieldKind::Choice { choices } => {
                body.raw(&format!("<select name=\"{name}\"{required}>"));
                if !field.required {
                    body.raw("<option value=\"\"></option>");
                }
                for choice in choices {
                    let choice = escape(choice);
                    body.raw(&format!("<option value=\"{choice}\">{choice}</option>"));
                }
                body.raw("</select>");
            }
        }
        body.raw("</label>");
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
