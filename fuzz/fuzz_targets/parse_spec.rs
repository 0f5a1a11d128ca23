//! Fuzzes `workflow_spec::parse::parse` and, on success, the renderers.
//!
//! Two modes, chosen by the first byte:
//! - first byte < 0x80 (every text seed): the whole input, read as UTF-8 (lossily), is
//!   lexed into a `proc_macro2::TokenStream` and parsed. Inputs that do not lex are skipped.
//! - first byte >= 0x80: the rest of the input drives a generator that assembles spec text
//!   from fragments (keys, retry blocks, durations, dependency lists, conditions, ...), so
//!   the fuzzer gets past the lexer and the header and exercises the checks. With the
//!   feature `deep` it also nests types and conditions hundreds of levels deep.
//!
//! Invariants checked on every input:
//! - `parse` returns (no panic, no hang: run with `-timeout=`);
//! - `spec.is_some()` exactly when `errors` is empty;
//! - `names.is_some()` exactly when `ast.is_some()`, and no `ast` means at least one error;
//! - every retry policy of an accepted spec passes `RetryPolicy::validate` (the runtime's
//!   check) and its delay schedule has `max_attempts - 1` items;
//! - the renderers (Mermaid, DOT, SVG, with and without run states) and `fingerprint`
//!   return, and the fingerprint is deterministic.
#![no_main]

use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use proc_macro2::TokenStream;
use workflow_spec::parse::parse;
use workflow_spec::render::{self, StepMark};

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let text = if first >= 0x80 {
        Gen::new(rest).spec()
    } else {
        String::from_utf8_lossy(data).into_owned()
    };
    check(&text, data);
});

fn check(text: &str, data: &[u8]) {
    let Ok(tokens) = text.parse::<TokenStream>() else {
        return;
    };
    let parsed = parse(tokens);
    assert_eq!(
        parsed.errors.is_empty(),
        parsed.spec.is_some(),
        "`spec` must be Some exactly when there are no errors ({} errors)",
        parsed.errors.len()
    );
    assert_eq!(parsed.ast.is_some(), parsed.names.is_some());
    if parsed.ast.is_none() {
        assert!(
            !parsed.errors.is_empty(),
            "no syntax tree but no error either"
        );
    }
    if let Some(error) = parsed.error() {
        // What the macro emits next to its fallback skeleton.
        let _ = error.to_compile_error();
        for error in &parsed.errors {
            let _ = error.to_string();
        }
    }
    let Some(spec) = parsed.spec else {
        return;
    };
    for step in &spec.steps {
        if let Some(policy) = &step.retry {
            if let Err(errors) = policy.validate(step.timeout) {
                panic!("accepted spec has a retry policy the runtime rejects: {errors:?}");
            }
            let seed = data.len() as u64;
            let delays = policy.delays(seed).count();
            assert_eq!(delays as u32, policy.max_attempts.saturating_sub(1));
        }
    }
    let _ = render::mermaid(&spec);
    let _ = render::dot(&spec);
    let _ = render::svg(&spec);
    // One mark per step, and for some inputs one too many: the renderers must cope.
    let marks: Vec<StepMark> = (0..spec.steps.len() + usize::from(data.len().is_multiple_of(3)))
        .map(|i| StepMark::ALL[(data.get(i).copied().unwrap_or(0) as usize) % StepMark::ALL.len()])
        .collect();
    let _ = render::mermaid_with_states(&spec, &marks);
    let _ = render::svg_with_states(&spec, &marks);
    let fingerprint = spec.fingerprint();
    assert_eq!(fingerprint, spec.clone().fingerprint());
}

/// Builds spec text from fragments picked by the fuzz input. Most choices are valid and a
/// few are the mistakes a person makes (typos, wrong value types, duplicates, forward or
/// self references, out-of-range numbers), so generated specs get through the lexer and
/// the header and reach the checks, the lowering and the renderers. Once the input is used
/// up every choice takes its first, valid option, so any input gives a well-formed spec.
struct Gen<'a> {
    data: &'a [u8],
    out: String,
    /// The step ids, chosen before the steps are written (so references can point forward).
    ids: Vec<String>,
    /// The input names.
    inputs: Vec<String>,
    /// The step being written.
    current: usize,
}

/// Odd names: duplicates of other kinds, reserved words, keywords, raw identifiers.
const ODD_NAMES: &[&str] = &[
    "a", "s0", "s1", "in0", "env", "ctx", "_x", "r#type", "unsafe", "Upper", "self", "__",
];
const TYPES: &[&str] = &[
    "()",
    "u32",
    "Signup",
    "Vec<String>",
    "Option<u8>",
    "Approval",
    "(u8, String)",
    "&'static str",
    "[u8; 4]",
    "fn() -> u8",
    "<T as Tr>::Out",
    "impl Trait",
    "dyn Tr + Send",
    "!",
    "_",
];
const STEP_KEYS: &[&str] = &[
    "depends_on",
    "on_failure",
    "compensate",
    "retry",
    "timeout",
    "condition",
    "effect",
    "idempotent",
    "reconcile",
];
const HUMAN_KEYS: &[&str] = &["prompt", "depends_on", "condition", "on_failure"];
/// Keys that are wrong somewhere: typos, the other kind's keys, retry keys, raw idents.
const ODD_KEYS: &[&str] = &[
    "action",
    "assignee",
    "on_timeout",
    "prompt",
    "retry",
    "effect",
    "acton",
    "retyr",
    "timout",
    "depend_on",
    "max_attempts",
    "r#action",
    "Action",
];
const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "backoff",
    "initial",
    "max",
    "multiplier",
    "jitter",
    "deadline",
    "retry_on",
];
const ODD_RETRY_KEYS: &[&str] = &["max_attempt", "intial", "jiter", "timeout", "r#max"];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "10",
    "30",
    "48",
    "60",
    "99",
    "100",
    "101",
    "255",
    "256",
    "1000",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1_000",
    "0x10",
    "0o7",
    "0b11",
    "1.5",
    "0.5",
    "1e3",
    "1e308",
    "1e309",
    "1e999",
    "0.0000001",
    "2.5e-3",
    "315360000000",
    "315360000",
    "3650",
    "3651",
    "525600",
    "87600",
    "5256000",
    "1_0.0_1",
    "00",
    "0.0",
];
const UNITS: &[&str] = &["ms", "s", "m", "h", "d"];
const ODD_UNITS: &[&str] = &[
    "", "sec", "min", "hours", "us", "ns", "x", "u32", "f64", "i8", "e5", "_s", "dd", "M", "S",
];
const KINDS: &[&str] = &[
    "timeout",
    "rate_limited",
    "unavailable",
    "not_found",
    "internal",
];
const ODD_KINDS: &[&str] = &[
    "validation",
    "unauthorized",
    "unsafe",
    "timout",
    "Timeout",
    "other",
    "r#timeout",
    "1",
];
/// Condition templates; `$` and `@` stand for names of the spec.
const CONDITIONS: &[&str] = &[
    "$.approved",
    "!$",
    "$ && @",
    "*$ > 80",
    "$.len() > 3",
    "$.is_some()",
    "matches!($, Some(_))",
    "matches!($, @)",
    "$.is_none_or(|v| v.approved)",
    "|v| v == $",
    "if let Some(v) = $ { v } else { @ }",
    "match $ { v => v, _ => @ }",
    "{ let v = $; v && @ }",
    "for v in $ { @ }",
    "$.iter().any(|v| v == @)",
    "f($)(@)",
    "Status::Ok == $",
    "format!(\"{}\", $)",
    "vec![$; 3]",
    "($, @).0",
    "$?",
    "async { $ }",
    "loop { break $ }",
    "true",
    "env.flag",
    "ctx.attempt",
    "let v = $",
    "$ = @",
    "while let Some(v) = $ { @ }",
];

impl<'a> Gen<'a> {
    fn new(data: &'a [u8]) -> Self {
        Gen {
            data,
            out: String::new(),
            ids: Vec::new(),
            inputs: Vec::new(),
            current: 0,
        }
    }

    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// A number in `0..n` (n > 0); 0 once the input is used up.
    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n
    }

    /// True one time in 16: a mistake. False once the input is used up.
    fn rare(&mut self) -> bool {
        self.byte() % 16 == 15
    }

    /// True one time in 4. False once the input is used up.
    fn sometimes(&mut self) -> bool {
        self.byte() % 4 == 3
    }

    fn pick(&mut self, items: &[&'static str]) -> &'static str {
        items[self.below(items.len())]
    }

    /// One of the first `n` step ids (n > 0).
    fn id(&mut self, n: usize) -> String {
        let i = self.below(n);
        self.ids[i].clone()
    }

    fn push(&mut self, text: &str) {
        self.out.push_str(text);
    }

    /// Up to 15 raw bytes of the input as text: lets the fuzzer write anything in a value.
    fn raw(&mut self) {
        let len = self.below(16).min(self.data.len());
        let (raw, rest) = self.data.split_at(len);
        self.data = rest;
        let text = String::from_utf8_lossy(raw).into_owned();
        self.push(&text);
    }

    fn spec(mut self) -> String {
        if self.sometimes() {
            self.push("/// A workflow.\n");
        }
        if self.rare() {
            self.push("#[derive(Clone)]\n");
        }
        let vis = self.pick(&["pub ", "", "pub(crate) ", "pub(in crate::x) "]);
        self.push(vis);
        let kw = if self.rare() {
            self.pick(&["workflw ", "Workflow ", "step ", ""])
        } else {
            "workflow "
        };
        self.push(kw);
        let name = if self.rare() {
            self.pick(&["r#type", "flow", "_", "Self", "1"])
        } else {
            "Flow"
        };
        self.push(name);
        self.push("(");
        for i in 0..self.below(4) {
            let name = if self.rare() {
                self.pick(ODD_NAMES).to_owned()
            } else {
                format!("in{i}")
            };
            let ty = self.ty();
            let sep = if self.rare() { " " } else { ", " };
            let _ = write!(self.out, "{name}: {ty}{sep}");
            self.inputs.push(name);
        }
        self.push(")");
        match self.below(4) {
            0 | 1 => self.push(" env Services"),
            2 => {}
            _ => {
                if self.rare() {
                    let odd = self.pick(&[" ev Services", " env", " env Vec<", " env ()"]);
                    self.push(odd);
                }
            }
        }
        self.push(" {\n");
        let steps = 1 + self.below(8);
        for i in 0..steps {
            let id = if self.rare() {
                self.pick(ODD_NAMES).to_owned()
            } else {
                format!("s{i}")
            };
            self.ids.push(id);
        }
        for i in 0..steps {
            self.current = i;
            self.step();
        }
        self.push("}");
        if self.rare() && self.rare() {
            self.raw();
        }
        self.out
    }

    fn step(&mut self) {
        if self.sometimes() {
            self.push("    /// A step.\n");
        }
        if self.rare() {
            self.push("    #[allow(unused)]\n");
        }
        let human = self.sometimes();
        let kw = match (self.rare(), human) {
            (true, _) => self.pick(&["stp", "humn", "Step", "fn", "r#step"]),
            (false, true) => "human",
            (false, false) => "step",
        };
        let id = self.ids[self.current].clone();
        let _ = write!(self.out, "    {kw} {id}");
        let output = match (self.below(4), human) {
            (3, true) => None,
            (_, true) => Some("Approval".to_owned()),
            (3, false) if self.rare() => None,
            _ => Some(self.ty()),
        };
        if let Some(ty) = output {
            let _ = write!(self.out, " -> {ty}");
        }
        self.push(" {\n");
        let mut keys: Vec<&'static str> = Vec::new();
        if human {
            for key in ["assignee", "timeout", "on_timeout"] {
                if !self.rare() {
                    keys.push(key);
                }
            }
            for &key in HUMAN_KEYS {
                if self.sometimes() {
                    keys.push(key);
                }
            }
        } else {
            if !self.rare() {
                keys.push("action");
            }
            for &key in STEP_KEYS {
                if self.sometimes() {
                    keys.push(key);
                }
            }
        }
        while self.rare() {
            let odd = self.pick(ODD_KEYS);
            let at = self.below(keys.len() + 1);
            keys.insert(at, odd);
        }
        if keys.len() > 1 && self.rare() {
            // A duplicate key.
            let at = self.below(keys.len());
            keys.push(keys[at]);
        }
        for key in keys {
            let _ = write!(self.out, "        {key}: ");
            self.value(key);
            let sep = if self.rare() {
                self.pick(&[";", "", ",,", " ,"])
            } else {
                ","
            };
            self.push(sep);
            self.push("\n");
        }
        self.push("    }\n");
    }

    fn value(&mut self, key: &str) {
        if self.rare() {
            if self.sometimes() {
                return self.raw();
            }
            // A value of another key: the type confusion a person makes.
            let other = self.pick(ODD_KEYS);
            return self.value_of(other);
        }
        self.value_of(key);
    }

    fn value_of(&mut self, key: &str) {
        match key {
            "action" | "compensate" | "reconcile" | "acton" | "r#action" | "Action" => self.call(),
            "depends_on" | "depend_on" => self.depends_on(),
            "on_failure" => {
                let v = if self.rare() {
                    self.pick(&["retry", "contine", "\"abort\"", "abort()", "r#continue"])
                } else {
                    self.pick(&["abort", "continue"])
                };
                self.push(v);
            }
            "retry" | "retyr" => self.retry(),
            "timeout" | "timout" => self.duration(),
            "condition" => self.condition(0),
            "effect" => {
                let v = if self.rare() {
                    self.pick(&["extern", "External", "\"external\"", "external internal"])
                } else {
                    self.pick(&["internal", "external"])
                };
                self.push(v);
            }
            "idempotent" => {
                let v = if self.rare() {
                    self.pick(&["1", "yes", "\"true\"", "!false", "true false"])
                } else {
                    self.pick(&["true", "false"])
                };
                self.push(v);
            }
            "assignee" | "prompt" => {
                if self.rare() {
                    let v = self.pick(&["\"\"", "\" \"", "ops", "r\"ops\"", "b\"ops\"", "'o'"]);
                    self.push(v);
                } else {
                    let team = self.pick(&["ops", "leads", "fraud_team", "ünï\\u{1F600}"]);
                    let _ = write!(self.out, "\"{team}\"");
                }
            }
            "on_timeout" => {
                let v = if self.rare() {
                    self.pick(&[
                        "escalate(\"\")",
                        "escalate",
                        "escalate(leads)",
                        "escalate(\"a\", \"b\")",
                        "escalate()",
                        "rejct",
                        "x::escalate(\"a\")",
                        "escalate(\"ops\")",
                        "escalate(r\"x\")",
                        "escalate(1)",
                    ])
                } else {
                    self.pick(&["escalate(\"leads\")", "abort", "approve", "reject"])
                };
                self.push(v);
            }
            _ => self.number(),
        }
    }

    /// A name an argument or a condition may read: mostly an upstream step or an input.
    fn name_ref(&mut self) -> String {
        let upstream = self.current;
        if self.rare() {
            return match self.below(3) {
                0 => self.pick(ODD_NAMES).to_owned(),
                // Any step: itself, or one declared later.
                _ => self.id(self.ids.len()),
            };
        }
        let choices = upstream + self.inputs.len() + 2;
        let n = self.below(choices);
        if n < upstream {
            self.ids[n].clone()
        } else if n < upstream + self.inputs.len() {
            self.inputs[n - upstream].clone()
        } else if n == choices - 2 {
            "ctx".to_owned()
        } else {
            "env".to_owned()
        }
    }

    fn call(&mut self) {
        let path = if self.rare() {
            self.pick(&[
                "<T as U>::f",
                "f::<u8>",
                "x.f",
                "|| f",
                "crate::a::b",
                "(f)",
                "f()",
            ])
        } else {
            self.pick(&["f", "accounts::create", "payments::charge"])
        };
        self.push(path);
        if self.rare() {
            return; // a path without a call
        }
        self.push("(");
        for i in 0..self.below(5) {
            if i > 0 {
                self.push(", ");
            }
            match self.below(8) {
                0 => {
                    let v =
                        self.pick(&["1", "-2", "\"s\"", "1.5", "true", "'c'", "b\"x\"", "-\"s\""]);
                    self.push(v);
                }
                1 if self.rare() => {
                    let v = self.pick(&[
                        "x.y", "f(x)", "&x", "x + 1", "-x", "[x]", "x as u8", "..", "_",
                    ]);
                    self.push(v);
                }
                _ => {
                    let name = self.name_ref();
                    self.push(&name);
                }
            }
        }
        self.push(")");
    }

    fn depends_on(&mut self) {
        if self.rare() {
            let odd = self.pick(&[
                "s0", "[s0 s1]", "[,]", "[]", "(s0)", "[s0,,]", "[1]", "[[s0]]",
            ]);
            return self.push(odd);
        }
        self.push("[");
        let n = self.below(4);
        for i in 0..n {
            if i > 0 {
                self.push(", ");
            }
            let id = if self.rare() {
                self.name_ref()
            } else if self.current > 0 {
                self.id(self.current)
            } else {
                self.id(self.ids.len())
            };
            self.push(&id);
        }
        if self.sometimes() {
            self.push(",");
        }
        self.push("]");
    }

    fn number(&mut self) {
        if self.rare() {
            let n = self.pick(NUMBERS);
            self.push(n);
        } else {
            let n = 1 + self.below(6);
            let _ = write!(self.out, "{n}");
        }
    }

    fn duration(&mut self) {
        if self.rare() {
            match self.below(3) {
                0 => {
                    let v = self.pick(&[
                        "\"30s\"", "\"\"", "30 s", "-1s", "s", "1.5.5s", "'s'", "1s + 1s", "0s",
                        "1.5s", "1e3ms", "0.0001ms", "3650d", "3651d", "87601h",
                    ]);
                    self.push(v);
                }
                1 => {
                    let n = self.pick(NUMBERS);
                    let unit = self.pick(UNITS);
                    self.push(n);
                    self.push(unit);
                }
                _ => {
                    let n = self.pick(NUMBERS);
                    let unit = self.pick(ODD_UNITS);
                    self.push(n);
                    // A float's exponent or a unit starting with `e` may not lex; fine.
                    self.push(unit);
                }
            }
        } else {
            let n = self.byte();
            let unit = self.pick(UNITS);
            let _ = write!(self.out, "{n}{unit}");
        }
    }

    fn retry(&mut self) {
        if self.rare() {
            let v = self.pick(&[
                "3",
                "[max_attempts: 3]",
                "{ }",
                "{ 3 }",
                "{ max_attempts 3 }",
                "{,}",
            ]);
            return self.push(v);
        }
        self.push("{ ");
        let mut keys: Vec<&'static str> = Vec::new();
        for &key in RETRY_KEYS {
            if self.sometimes() {
                keys.push(key);
            }
        }
        while self.rare() {
            let odd = if self.sometimes() {
                self.pick(RETRY_KEYS) // a duplicate, most likely
            } else {
                self.pick(ODD_RETRY_KEYS)
            };
            let at = self.below(keys.len() + 1);
            keys.insert(at, odd);
        }
        for key in keys {
            let _ = write!(self.out, "{key}: ");
            match key {
                "max_attempts" | "max_attempt" => self.number(),
                "backoff" => {
                    let v = if self.rare() {
                        self.pick(&["exponentail", "2", "\"fixed\"", "r#fixed", "Fixed"])
                    } else {
                        self.pick(&["exponential", "fixed", "linear"])
                    };
                    self.push(v);
                }
                "initial" | "max" | "deadline" | "intial" | "timeout" | "r#max" => self.duration(),
                "multiplier" => {
                    let v = if self.rare() {
                        self.pick(NUMBERS)
                    } else {
                        self.pick(&["2", "1.5", "1", "3", "2.0", "1.0"])
                    };
                    self.push(v);
                }
                "jitter" | "jiter" => {
                    if self.rare() {
                        let v =
                            self.pick(&["half", "10", "%", "10 %", "-5%", "1.5%", "0x10%", "101%"]);
                        self.push(v);
                    } else if self.sometimes() {
                        let n = self.byte();
                        let _ = write!(self.out, "{n}%");
                    } else {
                        let v = self.pick(&["none", "full", "equal", "10%", "0%", "100%"]);
                        self.push(v);
                    }
                }
                _ => self.kinds(),
            }
            let sep = if self.rare() { " " } else { ", " };
            self.push(sep);
        }
        self.push("}");
    }

    fn kinds(&mut self) {
        self.push("[");
        for i in 0..self.below(4) {
            if i > 0 {
                self.push(", ");
            }
            let kind = if self.rare() {
                self.pick(ODD_KINDS)
            } else {
                self.pick(KINDS)
            };
            self.push(kind);
        }
        self.push("]");
    }

    /// A type: one of `TYPES`, or with the `deep` feature now and then a deeply nested one.
    fn ty(&mut self) -> String {
        if let Some(deep) = self.deep(&["&", "Vec<", "[", "(", "fn() -> ", "*const ", "&dyn Tr<"]) {
            return deep;
        }
        self.pick(TYPES).to_owned()
    }

    /// With the `deep` feature, one time in 32: a prefix repeated 32 to 2072 times around
    /// `u8`, closed as the prefix needs. syn parses such nesting by recursion; see README.
    fn deep(&mut self, prefixes: &[&'static str]) -> Option<String> {
        if !(cfg!(feature = "deep") && self.below(32) == 31) {
            return None;
        }
        let prefix = self.pick(prefixes);
        let n = 32 + 8 * self.byte() as usize;
        let close = match prefix {
            "Vec<" | "&dyn Tr<" => ">",
            "[" => "]",
            "(" => ")",
            "{" => "}",
            _ => "",
        };
        if prefix == "x as &" {
            return Some(format!("x as {}u8", "&".repeat(n)));
        }
        Some(format!("{}u8{}", prefix.repeat(n), close.repeat(n)))
    }

    fn condition(&mut self, depth: usize) {
        if let Some(deep) = self.deep(&["!", "&", "-", "(", "{", "|v| ", "x as &", "[", "return "])
        {
            return self.push(&deep);
        }
        let template = self.pick(CONDITIONS);
        let mut out = String::new();
        for c in template.chars() {
            match c {
                '$' | '@' => {
                    let name = self.name_ref();
                    out.push_str(&name);
                }
                _ => out.push(c),
            }
        }
        self.push(&out);
        if depth < 4 && self.sometimes() {
            let op = self.pick(&[" || ", " && ", " == "]);
            self.push(op);
            self.condition(depth + 1);
        }
    }
}
