//! Errors located in a spec file, printed as `file:line:col` with the offending line.

use std::fmt;

/// A position in a file: line and column, both counted from 1 (columns in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub col: usize,
}

/// One mistake in a spec file: where, what, and how to fix it when that is knowable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// Where the offending value or key starts.
    pub pos: Pos,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, when known (`did you mean `depends_on`?`).
    pub help: Option<String>,
}

impl FileError {
    /// An error at `pos`.
    pub fn new(pos: Pos, message: impl Into<String>, help: Option<impl Into<String>>) -> Self {
        FileError {
            pos,
            message: message.into(),
            help: help.map(Into::into),
        }
    }

    /// An error from a message that may carry its help after a `\nhelp: ` line, as the
    /// checks write them.
    pub(crate) fn from_check(pos: Pos, text: &str) -> Self {
        match text.split_once("\nhelp: ") {
            Some((message, help)) => FileError::new(pos, message, Some(help)),
            None => FileError::new(pos, text, None::<String>),
        }
    }

    /// The error as people read it: `path:line:col: message`, the file's line with a
    /// caret under the offending text, then `help:`.
    ///
    /// ```text
    /// specs/x.yaml:12:5: unknown key `dependson` in step `b`
    ///    |
    /// 12 |     dependson: [a]
    ///    |     ^^^^^^^^^
    /// help: did you mean `depends_on`?
    /// ```
    pub fn render(&self, path: &str, source: &str) -> String {
        let mut out = format!(
            "{path}:{}:{}: {}",
            self.pos.line, self.pos.col, self.message
        );
        if let Some(line) = source.lines().nth(self.pos.line.saturating_sub(1)) {
            let number = self.pos.line.to_string();
            let pad = " ".repeat(number.len());
            let line = line.trim_end();
            let lead: String = line
                .chars()
                .take(self.pos.col.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let width = underline_width(line, self.pos.col.saturating_sub(1));
            out.push_str(&format!(
                "\n{pad} |\n{number} | {line}\n{pad} | {lead}{}",
                "^".repeat(width)
            ));
        }
        if let Some(help) = &self.help {
            out.push_str(&format!("\nhelp: {help}"));
        }
        out
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.pos.line, self.pos.col, self.message)?;
        if let Some(help) = &self.help {
            write!(f, " (help: {help})")?;
        }
        Ok(())
    }
}

impl std::error::Error for FileError {}

/// How many characters to underline from `start`: a quoted string to its closing quote,
/// else a word up to the next delimiter; at least one.
fn underline_width(line: &str, start: usize) -> usize {
    let rest: Vec<char> = line.chars().skip(start).collect();
    let Some(&first) = rest.first() else {
        return 1;
    };
    if first.is_whitespace() {
        // A tab or a space out of place: the one character.
        return 1;
    }
    let width = if first == '"' || first == '\'' {
        rest.iter()
            .skip(1)
            .position(|c| *c == first)
            .map_or(rest.len(), |end| end + 2)
    } else {
        rest.iter()
            .position(|c| matches!(c, ' ' | ',' | ':' | '[' | ']' | '{' | '}' | '#'))
            .unwrap_or(rest.len())
    };
    width.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_line_with_a_caret_and_help() {
        let source = "name: x\nsteps:\n  - id: a\n    dependson: [b]\n";
        let error = FileError::new(
            Pos { line: 4, col: 5 },
            "unknown key `dependson` in step `a`",
            Some("did you mean `depends_on`?"),
        );
        assert_eq!(
            error.render("specs/x.yaml", source),
            "specs/x.yaml:4:5: unknown key `dependson` in step `a`\n  |\n4 |     dependson: [b]\n  |     ^^^^^^^^^\nhelp: did you mean `depends_on`?"
        );
    }

    #[test]
    fn underlines_a_quoted_value_whole() {
        assert_eq!(underline_width(r#"  c: "a == b" # x"#, 5), 8);
        assert_eq!(underline_width("", 3), 1);
    }
}
