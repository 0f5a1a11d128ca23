//! The behavioural fingerprint of a spec.
//!
//! A run is pinned to the fingerprint of the spec it started on: a resumed run whose spec
//! behaves differently is parked instead of being driven by the wrong machine. So the
//! fingerprint must change with behaviour and with nothing else. It is a hash of an
//! explicit projection of the model, [`Spec::behaviour`], written field by field:
//!
//! - in: the inputs (names and types), the environment type, and per step its index, id,
//!   kind, output type, dependencies, call paths and arguments, `on_failure`, timeout,
//!   retry policy, condition, effect, `idempotent`, compensation and reconciliation,
//!   assignee, `on_timeout`, `approvals` and `self_approval`; a map's source, concurrency and `on_item_failure`; a
//!   child's workflow path and its inputs by field; an event's `on_timeout`;
//! - out: doc comments, a human step's prompt, `title` and `show`, the Rust type name and the journaled name
//!   (so that renaming `UserOnboarding` to `UserOnboardingV1` under
//!   `#[workflow(name = "UserOnboarding")]` keeps its runs), a map's binding name (local
//!   to its step), a child's journaled name (filled in at run time), and anything derived
//!   from the rest (`optional`), and flow control (a workflow's `concurrency`, `priority`
//!   and `debounce`, a step's `concurrency: { .. }` and `rate`: they govern admission);
//! - types, paths, literals and conditions are compared as normalised tokens: whitespace
//!   only separates two words, so how the spec was formatted, or how the token printer
//!   spaces `Vec < User >` or `| a |`, does not matter; string and character literals are
//!   kept as written;
//! - lists whose order means nothing (`depends_on`, `retry_on`, a child's fields) are
//!   sorted.
//!
//! Fields added to the model later are projected only when a spec uses them, so a new
//! release does not re-fingerprint the specs of runs already in flight.

use std::fmt::Write as _;
use std::time::Duration;

use crate::model::{Arg, Call, ChildStep, OnTimeout, Spec, Step, StepKind};
use crate::retry::RetryPolicy;

/// The version of the projection, its first line. Changing the projection in a way that
/// changes the fingerprint of an existing spec means a new version.
const VERSION: &str = "workflow-behaviour 1";

impl Spec {
    /// A stable fingerprint of the spec's behaviour: 16 hex digits of FNV-1a over
    /// [`Spec::behaviour`].
    ///
    /// Computed at compile time by the macro and recorded with every run, so that a run
    /// started under one spec is never driven by the machine of another, while editing a
    /// doc comment, a prompt or the formatting parks nothing.
    pub fn fingerprint(&self) -> String {
        format!("{:016x}", fnv1a(self.behaviour().as_bytes()))
    }

    /// The canonical text the fingerprint hashes: one line per behavioural fact, in
    /// declaration order. Two specs with the same text behave the same; diff two texts to
    /// see why a fingerprint changed.
    pub fn behaviour(&self) -> String {
        let mut out = String::new();
        line(&mut out, 0, VERSION);
        for input in &self.inputs {
            line(
                &mut out,
                0,
                &format!("input {}: {}", input.name, normalise(&input.ty)),
            );
        }
        match &self.env {
            Some(env) => line(&mut out, 0, &format!("env {}", normalise(env))),
            None => line(&mut out, 0, "env -"),
        }
        for (index, step) in self.steps.iter().enumerate() {
            step_behaviour(&mut out, index, step);
        }
        out
    }
}

fn step_behaviour(out: &mut String, index: usize, step: &Step) {
    let kind = match &step.kind {
        StepKind::Action(_) => "action",
        StepKind::Human(_) => "human",
        StepKind::Child(_) => "child",
        StepKind::Event(_) => "event",
    };
    line(out, 0, &format!("step {index} {} {kind}", step.id));
    line(out, 1, &format!("output {}", normalise(&step.output)));
    let mut deps = step.deps.clone();
    deps.sort_unstable();
    deps.dedup();
    let deps: Vec<String> = deps.iter().map(ToString::to_string).collect();
    line(out, 1, &format!("deps [{}]", deps.join(",")));
    line(out, 1, &format!("on_failure {:?}", step.on_failure));
    line(out, 1, &format!("timeout {}", duration(step.timeout)));
    match &step.retry {
        Some(retry) => line(out, 1, &retry_behaviour(retry)),
        None => line(out, 1, "retry -"),
    }
    match &step.condition {
        Some(condition) => line(out, 1, &format!("condition {}", normalise(condition))),
        None => line(out, 1, "condition -"),
    }
    match &step.kind {
        StepKind::Action(action) => {
            line(out, 1, &format!("action {}", call(&action.call)));
            line(
                out,
                1,
                &format!("compensate {}", optional_call(&action.compensate)),
            );
            line(
                out,
                1,
                &format!("reconcile {}", optional_call(&action.reconcile)),
            );
            line(out, 1, &format!("effect {:?}", action.effect));
            line(out, 1, &format!("idempotent {}", action.idempotent));
            // Projected only for map steps (and without the binding's name, which is
            // local to the step), so plain steps keep their fingerprint.
            if let Some(for_each) = &action.for_each {
                line(
                    out,
                    1,
                    &format!(
                        "for_each {} concurrency={} on_item_failure={:?}",
                        normalise(&for_each.source),
                        for_each.concurrency,
                        for_each.on_item_failure
                    ),
                );
            }
        }
        StepKind::Human(human) => {
            line(out, 1, &format!("assignee {}", quote(&human.assignee)));
            let on_timeout = match &human.on_timeout {
                OnTimeout::Escalate(group) => format!("escalate {}", quote(group)),
                OnTimeout::Abort => "abort".to_owned(),
                OnTimeout::Approve => "approve".to_owned(),
                OnTimeout::Reject => "reject".to_owned(),
            };
            line(out, 1, &format!("on_timeout {on_timeout}"));
            // Projected only when a spec sets them, so existing specs keep their
            // fingerprint; `title` and `show` are presentation, like the prompt.
            if human.approvals != 1 {
                line(out, 1, &format!("approvals {}", human.approvals));
            }
            if !human.self_approval {
                line(out, 1, "self_approval false");
            }
        }
        StepKind::Child(child) => line(out, 1, &format!("workflow {}", child_call(child))),
        StepKind::Event(event) => line(out, 1, &format!("on_timeout {:?}", event.on_timeout)),
    }
}

/// `path(field=arg, ...)` with the fields sorted: a struct literal's order means nothing.
/// The child's journaled name is left out: the generated `spec()` fills it in at run time.
fn child_call(child: &ChildStep) -> String {
    let mut args: Vec<String> = child
        .args
        .iter()
        .map(|input| format!("{}={}", input.field, arg(&input.arg)))
        .collect();
    args.sort();
    format!("{}({})", normalise(&child.workflow), args.join(", "))
}

fn retry_behaviour(retry: &RetryPolicy) -> String {
    let mut kinds = retry.retry_on.clone();
    kinds.sort_unstable();
    kinds.dedup();
    let kinds: Vec<&str> = kinds.iter().map(|kind| kind.as_str()).collect();
    format!(
        "retry max_attempts={} backoff={} initial={} max={} multiplier={} jitter={} deadline={} retry_on=[{}]",
        retry.max_attempts,
        retry.backoff.as_str(),
        duration(Some(retry.initial)),
        duration(Some(retry.max)),
        retry.multiplier,
        retry.jitter,
        duration(retry.deadline),
        kinds.join(",")
    )
}

fn call(call: &Call) -> String {
    let args: Vec<String> = call.args.iter().map(arg).collect();
    format!("{}({})", normalise(&call.path), args.join(", "))
}

fn optional_call(optional: &Option<Call>) -> String {
    optional.as_ref().map_or_else(|| "-".to_owned(), call)
}

fn arg(arg: &Arg) -> String {
    match arg {
        Arg::Step(step) => format!("step#{step}"),
        Arg::Input(input) => format!("input#{input}"),
        Arg::Env => "env".to_owned(),
        Arg::Ctx => "ctx".to_owned(),
        Arg::Literal(literal) => format!("literal {}", normalise(literal)),
        Arg::Item => "item".to_owned(),
    }
}

fn duration(duration: Option<Duration>) -> String {
    duration.map_or_else(|| "-".to_owned(), |d| format!("{}us", d.as_micros()))
}

fn line(out: &mut String, indent: usize, text: &str) {
    let _ = writeln!(out, "{:indent$}{text}", "", indent = indent * 2);
}

/// A string value, quoted and escaped so that no value can end its line early.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Rust tokens as text with formatting taken out: whitespace is dropped except a single
/// space between two word characters (`dyn Trait`, `a as u32`), and string, byte-string,
/// raw-string and character literals are kept verbatim, so `Vec < User >` and
/// `Vec<User>` normalise alike while `"a  b"` and `"a b"` do not. Line breaks inside a
/// literal are escaped so the result is one line.
pub fn normalise(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            pending_space = true;
            i += 1;
            continue;
        }
        if pending_space && out.chars().next_back().is_some_and(is_word) && is_word(c) {
            out.push(' ');
        }
        pending_space = false;
        let end = literal_end(&chars, i);
        if end > i {
            for &c in &chars[i..end] {
                match c {
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// If a string or character literal starts at `start`, the index just past it; else
/// `start`. Handles `"..."`, `b"..."`, `c"..."`, `r#"..."#` (any number of `#`, with a
/// `b` or `c` prefix), `'x'`, `'\n'`, `b'x'`; a lifetime (`'a`) is not a literal.
fn literal_end(chars: &[char], start: usize) -> usize {
    let at = |i: usize| chars.get(i).copied();
    // A prefix letter only starts a literal when it does not end a longer word.
    let word_before = start > 0 && is_word(chars[start - 1]);
    let mut i = start;
    if !word_before
        && matches!(at(i), Some('b' | 'c'))
        && matches!(at(i + 1), Some('"' | '\'' | 'r'))
    {
        i += 1;
    }
    if !word_before && at(i) == Some('r') && matches!(at(i + 1), Some('"' | '#')) {
        let mut hashes = 0;
        let mut j = i + 1;
        while at(j) == Some('#') {
            hashes += 1;
            j += 1;
        }
        if at(j) != Some('"') {
            return start;
        }
        j += 1;
        while j < chars.len() {
            if chars[j] == '"' && (1..=hashes).all(|k| at(j + k) == Some('#')) {
                return j + 1 + hashes;
            }
            j += 1;
        }
        return chars.len();
    }
    match at(i) {
        Some('"') => {
            let mut j = i + 1;
            while j < chars.len() {
                match chars[j] {
                    '\\' => j += 2,
                    '"' => return j + 1,
                    _ => j += 1,
                }
            }
            chars.len()
        }
        Some('\'') => {
            // `'\n'`, `'\u{1F600}'`, `'x'`: a char literal; `'a` (no closing quote right
            // after one character) is a lifetime.
            if at(i + 1) == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                return (j + 1).min(chars.len());
            }
            if at(i + 2) == Some('\'') {
                return i + 3;
            }
            start
        }
        _ => start,
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_is_normalised_away() {
        assert_eq!(normalise("Vec < User >"), "Vec<User>");
        assert_eq!(normalise("Vec<User>"), "Vec<User>");
        assert_eq!(
            normalise("a . is_some_and ( | a | a . ok )"),
            "a.is_some_and(|a|a.ok)"
        );
        assert_eq!(
            normalise("a.is_some_and(|a| a.ok)"),
            "a.is_some_and(|a|a.ok)"
        );
        assert_eq!(normalise("x  as\n  u32"), "x as u32");
        assert_eq!(normalise("& 'a str"), "&'a str");
        assert_eq!(normalise("&'a str"), "&'a str");
    }

    #[test]
    fn literals_are_kept_as_written() {
        assert_eq!(normalise(r#"f ( "a  b" )"#), r#"f("a  b")"#);
        assert_ne!(normalise(r#""a  b""#), normalise(r#""a b""#));
        assert_eq!(normalise("c == ' '"), "c==' '");
        assert_eq!(normalise(r"c == '\n'"), r"c=='\n'");
        assert_eq!(normalise(r##"r#"x " y"# == s"##), r##"r#"x " y"#==s"##);
        assert_eq!(normalise(r#"b" x" "#), r#"b" x""#);
        assert_eq!(normalise("\"two\nlines\""), "\"two\\nlines\"");
        // An escaped quote does not end the literal.
        assert_eq!(normalise(r#""a \" b" + c"#), r#""a \" b"+c"#);
    }

    #[test]
    fn unterminated_literals_do_not_panic() {
        for text in ["\"abc", "r#\"abc", "'\\", "'", "b'", "r#", "c\""] {
            let _ = normalise(text);
        }
    }

    #[test]
    fn quoted_values_stay_on_their_line() {
        assert_eq!(quote("a\"b\\c\nd\u{7}"), "\"a\\\"b\\\\c\\nd\\u{7}\"");
    }
}
