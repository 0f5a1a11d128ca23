//! How an action finds its element: by `data-testid` ([`test_id`]) or by CSS ([`css`]).

use std::fmt;

/// An element selector. Prefer [`test_id`]: a `data-testid` survives restyling, a CSS class
/// does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    css: String,
    label: String,
}

/// The element whose `data-testid` attribute is `id`.
///
/// ```
/// use workflow_browser::test_id;
/// assert_eq!(test_id("login").css(), "[data-testid=\"login\"]");
/// assert_eq!(test_id("login").to_string(), "test_id(\"login\")");
/// ```
pub fn test_id(id: &str) -> Selector {
    let mut css = String::with_capacity(id.len() + 16);
    css.push_str("[data-testid=\"");
    for c in id.chars() {
        match c {
            '"' | '\\' => {
                css.push('\\');
                css.push(c);
            }
            // A CSS string may not hold a raw newline: escape it as a code point.
            '\n' => css.push_str("\\a "),
            _ => css.push(c),
        }
    }
    css.push_str("\"]");
    Selector {
        css,
        label: format!("test_id({id:?})"),
    }
}

/// The first element matching a CSS selector.
///
/// ```
/// use workflow_browser::css;
/// assert_eq!(css("form button").to_string(), "css(\"form button\")");
/// ```
pub fn css(selector: &str) -> Selector {
    Selector {
        css: selector.to_owned(),
        label: format!("css({selector:?})"),
    }
}

impl Selector {
    /// The CSS selector sent to the browser.
    pub fn css(&self) -> &str {
        &self.css
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

impl From<&str> for Selector {
    /// A CSS selector.
    fn from(selector: &str) -> Self {
        css(selector)
    }
}

impl From<&Selector> for Selector {
    fn from(selector: &Selector) -> Self {
        selector.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_ids_are_quoted_and_escaped() {
        assert_eq!(test_id("a\"b\\c").css(), r#"[data-testid="a\"b\\c"]"#);
        assert_eq!(test_id("x\ny").css(), "[data-testid=\"x\\a y\"]");
        assert_eq!(Selector::from("#id > p").css(), "#id > p");
    }
}
