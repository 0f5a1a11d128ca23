//! A YAML document as a small tree whose every node keeps its line and column.
//!
//! Built from saphyr-parser's events. A spec is plain data, so the tree refuses what
//! only makes a file harder to read or to check: duplicate keys (YAML 1.2 forbids them,
//! most loaders keep the last silently), anchors and aliases (no alias bombs), tags,
//! several documents, keys that are not plain strings, and nesting deeper than
//! [`MAX_DEPTH`].

use std::borrow::Cow;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::diag::{FileError, Pos};

/// How deep mappings and sequences may nest; a spec needs four levels.
pub(crate) const MAX_DEPTH: usize = 32;

/// A node of the document.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// A scalar: a string, a number, a boolean, as written.
    Scalar(Scalar),
    /// A sequence, `[a, b]` or a block list.
    Seq(Seq),
    /// A mapping, in the order written.
    Map(Map),
}

/// A scalar with its position.
#[derive(Debug, Clone)]
pub(crate) struct Scalar {
    /// The value, after YAML's unescaping and folding.
    pub(crate) text: String,
    /// Whether it was quoted (so `"3"` is a string, not a number).
    pub(crate) quoted: bool,
    /// Where the scalar starts (at its opening quote, if quoted).
    pub(crate) pos: Pos,
    /// The column where `text` appears verbatim on `pos`'s line, when it does: a position
    /// inside the value then maps to its own column.
    pub(crate) verbatim: Option<usize>,
}

/// A sequence with its position.
#[derive(Debug, Clone)]
pub(crate) struct Seq {
    /// Where it starts.
    pub(crate) pos: Pos,
    /// Its items.
    pub(crate) items: Vec<Node>,
}

/// A mapping with its position.
#[derive(Debug, Clone)]
pub(crate) struct Map {
    /// Where it starts.
    pub(crate) pos: Pos,
    /// Its entries in order; keys are unique.
    pub(crate) entries: Vec<(Scalar, Node)>,
}

impl Node {
    /// Where the node starts.
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Node::Scalar(scalar) => scalar.pos,
            Node::Seq(seq) => seq.pos,
            Node::Map(map) => map.pos,
        }
    }

    /// What the node is, for messages: `a string`, `a list`, `a mapping`.
    pub(crate) fn what(&self) -> &'static str {
        match self {
            Node::Scalar(_) => "a single value",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }
}

impl Map {
    /// The value under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.text == key)
            .map(|(_, v)| v)
    }

    /// The key scalar `key`.
    pub(crate) fn key(&self, key: &str) -> Option<&Scalar> {
        self.entries
            .iter()
            .find(|(k, _)| k.text == key)
            .map(|(k, _)| k)
    }
}

/// Parses a whole file into its one document's root node.
pub(crate) fn parse(source: &str) -> Result<Node, FileError> {
    let lines: Vec<&str> = source.lines().collect();
    let mut builder = Builder {
        parser: Parser::new_from_str(source),
        lines,
    };
    builder.document()
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    lines: Vec<&'a str>,
}

fn pos_of(span: &Span) -> Pos {
    Pos {
        line: span.start.line().max(1),
        col: span.start.col() + 1,
    }
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), FileError> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(error)) => {
                let marker = error.marker();
                let pos = Pos {
                    line: marker.line().max(1),
                    col: marker.col() + 1,
                };
                if error.info().contains("tab") {
                    if let Some(tab) = first_tab(&self.lines, pos.line) {
                        return Err(FileError::new(
                            tab,
                            "invalid YAML: a tab where YAML expects spaces",
                            Some("indent with spaces: YAML does not allow tabs in indentation"),
                        ));
                    }
                }
                Err(FileError::new(
                    pos,
                    format!("invalid YAML: {}", error.info()),
                    None::<String>,
                ))
            }
            None => Err(FileError::new(
                Pos { line: 1, col: 1 },
                "invalid YAML: unexpected end of the file",
                None::<String>,
            )),
        }
    }

    fn document(&mut self) -> Result<Node, FileError> {
        let mut root = None;
        loop {
            let (event, span) = self.next()?;
            match event {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => break,
                Event::DocumentStart(_) if root.is_some() => {
                    return Err(FileError::new(
                        pos_of(&span),
                        "a spec file holds one YAML document, this is a second one",
                        Some("put each workflow in a file of its own"),
                    ));
                }
                Event::DocumentStart(_) => root = Some(self.node(0)?),
                _ => {
                    return Err(FileError::new(
                        pos_of(&span),
                        "invalid YAML: unexpected content",
                        None::<String>,
                    ))
                }
            }
        }
        root.ok_or_else(|| {
            FileError::new(
                Pos { line: 1, col: 1 },
                "the spec file is empty",
                Some("start with `name: my-workflow` and a list of `steps:`"),
            )
        })
    }

    fn node(&mut self, depth: usize) -> Result<Node, FileError> {
        let (event, span) = self.next()?;
        self.node_from(event, span, depth)
    }

    fn node_from(&mut self, event: Event<'a>, span: Span, depth: usize) -> Result<Node, FileError> {
        let pos = pos_of(&span);
        if depth > MAX_DEPTH {
            return Err(FileError::new(
                pos,
                format!("the spec nests deeper than {MAX_DEPTH} levels"),
                None::<String>,
            ));
        }
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                refuse_anchor_and_tag(pos, anchor, tag.is_some())?;
                Ok(Node::Scalar(self.scalar(text, style, pos)))
            }
            Event::SequenceStart(anchor, tag) => {
                refuse_anchor_and_tag(pos, anchor, tag.is_some())?;
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node_from(event, span, depth + 1)?);
                }
                Ok(Node::Seq(Seq { pos, items }))
            }
            Event::MappingStart(anchor, tag) => {
                refuse_anchor_and_tag(pos, anchor, tag.is_some())?;
                let mut entries: Vec<(Scalar, Node)> = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    let key_pos = pos_of(&span);
                    let key = match event {
                        Event::MappingEnd => break,
                        Event::Scalar(text, style, anchor, tag) => {
                            refuse_anchor_and_tag(key_pos, anchor, tag.is_some())?;
                            self.scalar(text, style, key_pos)
                        }
                        _ => {
                            return Err(FileError::new(
                                key_pos,
                                "a key must be a plain name such as `id` or `depends_on`",
                                None::<String>,
                            ))
                        }
                    };
                    if let Some((first, _)) = entries.iter().find(|(k, _)| k.text == key.text) {
                        return Err(FileError::new(
                            key_pos,
                            format!(
                                "duplicate key `{}` (first at line {})",
                                key.text, first.pos.line
                            ),
                            Some("remove one of the two: YAML keys are unique in a mapping"),
                        ));
                    }
                    let value = self.node(depth + 1)?;
                    entries.push((key, value));
                }
                Ok(Node::Map(Map { pos, entries }))
            }
            Event::Alias(_) => Err(FileError::new(
                pos,
                "aliases (`*name`) are not allowed in a spec",
                Some("write the value out where it is used"),
            )),
            _ => Err(FileError::new(
                pos,
                "invalid YAML: unexpected content",
                None::<String>,
            )),
        }
    }

    fn scalar(&self, text: Cow<'a, str>, style: ScalarStyle, pos: Pos) -> Scalar {
        let quoted = matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted);
        let start = pos.col - 1 + usize::from(quoted);
        let verbatim = match style {
            ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted
                if !text.contains('\n') =>
            {
                self.lines.get(pos.line - 1).and_then(|line| {
                    let rest: String = line.chars().skip(start).collect();
                    rest.starts_with(text.as_ref()).then_some(start + 1)
                })
            }
            _ => None,
        };
        Scalar {
            text: text.into_owned(),
            quoted,
            pos,
            verbatim,
        }
    }
}

/// The first tab on line `from` or after it. The YAML parser reports a misplaced tab where
/// the token it was reading started, which may be the line before the tab; the tab itself
/// is what to fix.
fn first_tab(lines: &[&str], from: usize) -> Option<Pos> {
    lines
        .iter()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find_map(|(index, line)| {
            line.chars().position(|c| c == '\t').map(|col| Pos {
                line: index + 1,
                col: col + 1,
            })
        })
}

fn refuse_anchor_and_tag(pos: Pos, anchor: usize, tagged: bool) -> Result<(), FileError> {
    if anchor != 0 {
        return Err(FileError::new(
            pos,
            "anchors (`&name`) are not allowed in a spec",
            Some("write the value out where it is used"),
        ));
    }
    if tagged {
        return Err(FileError::new(
            pos,
            "tags (`!name`) are not allowed in a spec",
            Some("write the value without a tag"),
        ));
    }
    Ok(())
}
