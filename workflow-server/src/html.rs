//! What every page shares, written with maud's `html!`: the page shell, times, payloads
//! as fields. maud escapes every value it interpolates, so a prompt, comment or payload
//! containing `<script>` shows as text; [`escape`] is for the few places that write
//! markup outside it (the SVG diagrams).

use maud::{html, Markup, PreEscaped, DOCTYPE};

/// Escapes text for HTML content and double-quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The pages' one stylesheet, inline in each page and allowed by its hash in the
/// `Content-Security-Policy` ([`crate::headers`]).
pub(crate) const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem;color:#1a202c}\
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #cbd5e0;padding:.3rem .6rem;text-align:left;vertical-align:top}\
.task{border:1px solid #cbd5e0;border-radius:6px;padding:1rem;margin:1rem 0}\
.status{font-weight:bold}pre{background:#f7fafc;padding:.5rem;white-space:pre-wrap}\
textarea{width:100%;min-height:4rem}button{margin:.5rem .5rem 0 0;padding:.4rem 1rem}\
.error{color:#c53030}header{display:flex;justify-content:space-between}\
.confirmation{background:#f0fff4;border:1px solid #9ae6b4;padding:.6rem;border-radius:6px}\
.meta{color:#4a5568;margin:.2rem 0}.fields{margin:0}.fields th{font-weight:normal;color:#4a5568}time{border-bottom:1px dotted #a0aec0}nav a{margin-right:1rem}\
button.approve{background:#276749;color:#fff;border:1px solid #22543d;border-radius:4px}\
button.reject{background:#fff;color:#9b2c2c;border:2px solid #9b2c2c;border-radius:4px}\
form.delegate{margin-top:.8rem;padding-top:.6rem;border-top:1px dashed #cbd5e0}\
body{max-width:80rem}header nav a{margin-right:1rem}form.inline{display:inline-block;margin-right:.5rem}\
.filter label{margin-right:.4rem}.counts a{margin-right:1rem}ul.plain{margin:0;padding-left:1rem}\
figure#diagram{margin:1rem 0}figure#diagram svg{max-width:100%;height:auto}td>a,time{white-space:nowrap}.legend{font-size:.9rem;display:flex;flex-wrap:wrap;gap:.4rem .8rem}\
.state{white-space:nowrap;padding:0 .3rem;border-radius:3px;border:1px solid #cbd5e0}\
.cs-queued{background:#fff;border-style:dotted}.cs-not-started{background:#fff}\
.cs-running{background:#bee3f8;border-color:#2b6cb0}.cs-retrying{background:#fefcbf;border:2px dashed #975a16}\
.cs-waiting-person,.cs-waiting-event{background:#fbd38d;border:2px dotted #9c4221}\
.cs-succeeded{background:#d3f4dc;border-color:#2f855a}.cs-failed{background:#fed7d7;border:3px double #c53030}\
.cs-skipped{background:#edf2f7;border:1px dashed #718096}.cs-compensated{background:#e9d8fd;border:2px solid #553c9a}\
g.cs-queued>rect,g.cs-queued>polygon{fill:#fff;stroke:#4a5568;stroke-dasharray:1 3}\
g.cs-not-started>rect,g.cs-not-started>polygon{fill:#fff;stroke:#a0aec0}\
g.cs-running>rect,g.cs-running>polygon{fill:#bee3f8;stroke:#2b6cb0;stroke-width:3}\
g.cs-retrying>rect,g.cs-retrying>polygon{fill:#fefcbf;stroke:#975a16;stroke-width:3;stroke-dasharray:8 3}\
g.cs-waiting-person>rect,g.cs-waiting-person>polygon,g.cs-waiting-event>rect,g.cs-waiting-event>polygon{fill:#fbd38d;stroke:#9c4221;stroke-width:3;stroke-dasharray:2 2}\
g.cs-succeeded>rect,g.cs-succeeded>polygon{fill:#d3f4dc;stroke:#2f855a;stroke-width:2}\
g.cs-failed>rect,g.cs-failed>polygon{fill:#fed7d7;stroke:#c53030;stroke-width:5}\
g.cs-skipped>rect,g.cs-skipped>polygon{fill:#edf2f7;stroke:#718096;stroke-dasharray:3 3}\
.cs-cancelled{background:#e2e8f0;border:2px dashed #1a202c}g.cs-cancelled>rect,g.cs-cancelled>polygon{fill:#e2e8f0;stroke:#1a202c;stroke-width:3;stroke-dasharray:9 3 2 3}rect.bar.cs-cancelled{fill:#4a5568}\
g.cs-compensated>rect,g.cs-compensated>polygon{fill:#e9d8fd;stroke:#553c9a;stroke-width:4;stroke-dasharray:12 2 2 2}\
.state-done>rect,.state-done>polygon{fill:#d3f4dc;stroke:#2f855a}.state-failed>rect,.state-failed>polygon{fill:#fed7d7;stroke:#c53030}\
.state-running>rect,.state-running>polygon{fill:#bee3f8;stroke:#2b6cb0}.state-waiting>rect,.state-waiting>polygon{fill:#fbd38d;stroke:#c05621}\
.state-skipped>rect,.state-skipped>polygon{fill:#edf2f7;stroke:#a0aec0;stroke-dasharray:3 3}\
rect.bar.cs-running{fill:#2b6cb0}rect.bar.cs-succeeded{fill:#2f855a}rect.bar.cs-failed{fill:#c53030}svg.gantt text{font-size:12px}\
.run-status{white-space:nowrap}.rs-failed{color:#9b2c2c}.rs-completed{color:#22543d}.ok{color:#22543d}\
a:focus,button:focus,summary:focus{outline:3px solid #2b6cb0;outline-offset:2px}";

/// `at` relative to `now` in words ("in 3 h", "12 min ago", "now").
pub(crate) fn relative(now: u64, at: u64) -> String {
    let (ahead, ms) = if at >= now {
        (true, at - now)
    } else {
        (false, now - at)
    };
    let secs = ms / 1000;
    let amount = match secs {
        0..60 => return "now".to_owned(),
        60..3_600 => format!("{} min", secs / 60),
        3_600..172_800 => format!("{} h", secs / 3_600),
        _ => format!("{} d", secs / 86_400),
    };
    if ahead {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// `at` as a `<time>` relative to `now`, the absolute UTC time on hover.
pub(crate) fn time(now: u64, at: u64) -> Markup {
    let absolute = workflow_core::journal::rfc3339(at);
    html! { time datetime=(absolute) title=(absolute) { (relative(now, at)) } }
}

/// The most fields a payload shows as a table; past that it shows as JSON.
const MAX_FIELDS: usize = 40;

/// The leaves of a JSON value with their paths (`ticket.text`, `items[2].sku`), in order,
/// or `None` past `limit`.
fn leaves(value: &serde_json::Value, limit: usize) -> Option<Vec<(String, String)>> {
    fn walk(
        path: String,
        value: &serde_json::Value,
        out: &mut Vec<(String, String)>,
        limit: usize,
    ) -> bool {
        use serde_json::Value;
        match value {
            Value::Object(map) if !map.is_empty() => map.iter().all(|(key, value)| {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(path, value, out, limit)
            }),
            Value::Array(items) if !items.is_empty() => items
                .iter()
                .enumerate()
                .all(|(i, value)| walk(format!("{path}[{i}]"), value, out, limit)),
            Value::String(text) => {
                out.push((path, text.clone()));
                out.len() <= limit
            }
            other => {
                out.push((path, other.to_string()));
                out.len() <= limit
            }
        }
    }
    let mut out = Vec::new();
    walk(String::new(), value, &mut out, limit).then_some(out)
}

/// A payload for people: its fields as a table (strings without quotes), a lone value as
/// text, or, past [`MAX_FIELDS`] fields, pretty JSON.
pub(crate) fn value(value: &serde_json::Value) -> Markup {
    match leaves(value, MAX_FIELDS) {
        Some(fields) if fields.len() == 1 && fields[0].0.is_empty() => {
            html! { span class="value" { (fields[0].1) } }
        }
        Some(fields) => html! {
            table class="fields" {
                @for (path, text) in &fields {
                    tr { th { (path) } td { (text) } }
                }
            }
        },
        None => html! { pre { (serde_json::to_string_pretty(value).unwrap_or_default()) } },
    }
}

/// A step id in words: `approve_alert` → `Approve alert`.
pub(crate) fn words(id: &str) -> String {
    let spaced = id.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The console's pages, in the order of its navigation: path under the base, name.
pub(crate) const NAV: [(&str, &str); 6] = [
    ("/inbox", "Inbox"),
    ("/console/runs", "Runs"),
    ("/console/dead-letters", "Dead letters"),
    ("/console/schedules", "Schedules"),
    ("/console/flow", "Flow control"),
    ("/console/workers", "Workers"),
];

/// A whole page around `body`, titled `title`, for `who`.
pub(crate) fn page(title: &str, who: Option<&str>, base: &str, body: Markup) -> String {
    shell(title, who, base, body, false)
}

/// The one shell of every page (the inbox's, the console's, a decision link's): the
/// stylesheet, the navigation (the console's pages only for someone signed in), who is
/// signed in, the title and `body`; with `live`, the console's script
/// ([`crate::console`]), which only ever adds to a page that works without it.
pub(crate) fn shell(
    title: &str,
    who: Option<&str>,
    base: &str,
    body: Markup,
    live: bool,
) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width";
                title { (title) }
                style { (PreEscaped(STYLE)) }
                @if live {
                    script src={ (base) "/console/static/console.js" } defer {}
                }
            }
            body {
                header {
                    nav aria-label="Console" {
                        @for (path, name) in NAV {
                            @if who.is_some() || path == "/inbox" {
                                a href={ (base) (path) } { (name) }
                            }
                        }
                    }
                    @if let Some(who) = who {
                        span { "Signed in as " b id="who" { (who) } }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    let mut out = markup.into_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere_it_goes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        let page = page("<title>", Some("<me>"), "\"><b>", html! { p { ("<i>") } });
        assert!(
            page.contains("&lt;title&gt;") && page.contains("&lt;me&gt;"),
            "{page}"
        );
        assert!(!page.contains("<i>") && !page.contains("<b>"), "{page}");
        assert!(page.contains("<p>&lt;i&gt;</p>"), "{page}");
    }

    #[test]
    fn times_read_relative_with_the_absolute_on_hover() {
        let now = 1_784_351_400_000;
        assert_eq!(relative(now, now + 30_000), "now");
        assert_eq!(relative(now, now + 12 * 60_000), "in 12 min");
        assert_eq!(relative(now, now + 3 * 3_600_000 + 59_000), "in 3 h");
        assert_eq!(relative(now, now - 90 * 60_000), "1 h ago");
        assert_eq!(relative(now, now + 3 * 86_400_000), "in 3 d");
        assert_eq!(relative(now, now - 47 * 3_600_000), "47 h ago");
        assert_eq!(
            time(now, now + 2 * 3_600_000).into_string(),
            "<time datetime=\"2026-07-18T07:10:00.000Z\" title=\"2026-07-18T07:10:00.000Z\">in 2 h</time>"
        );
        assert_eq!(words("approve_alert"), "Approve alert");
    }

    #[test]
    fn payloads_show_as_fields() {
        let value = serde_json::json!({
            "refund": {"amount_cents": 4200, "customer": "<b>Ann</b>"},
            "items": [{"sku": "A"}, {"sku": "B"}],
            "note": null,
            "empty": {}
        });
        let out = super::value(&value).into_string();
        for row in [
            "<tr><th>refund.amount_cents</th><td>4200</td></tr>",
            "<tr><th>refund.customer</th><td>&lt;b&gt;Ann&lt;/b&gt;</td></tr>",
            "<tr><th>items[1].sku</th><td>B</td></tr>",
            "<tr><th>note</th><td>null</td></tr>",
            "<tr><th>empty</th><td>{}</td></tr>",
        ] {
            assert!(out.contains(row), "{row} in {out}");
        }
        assert_eq!(
            super::value(&serde_json::json!(true)).into_string(),
            "<span class=\"value\">true</span>"
        );
        let many: Vec<u32> = (0..100).collect();
        assert!(super::value(&serde_json::json!(many))
            .into_string()
            .starts_with("<pre>"));
        assert_eq!(words(""), "");
    }
}
