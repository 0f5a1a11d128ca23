//! The path the generated code names the runtime by: `::workflow_core` when the calling
//! crate depends on `workflow-core` itself, `::workflow` when it depends only on the
//! `workflow` facade (which re-exports workflow-core whole).

use std::sync::OnceLock;

use proc_macro2::{Span, TokenStream};

/// `::workflow_core` or `::workflow`, by the calling crate's manifest.
pub(crate) fn name() -> &'static str {
    static NAME: OnceLock<&'static str> = OnceLock::new();
    NAME.get_or_init(|| {
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(|dir| std::path::Path::new(&dir).join("Cargo.toml"))
            .and_then(|path| std::fs::read_to_string(path).ok());
        match manifest {
            Some(text) if !depends_on(&text, "workflow-core") && depends_on(&text, "workflow") => {
                "::workflow"
            }
            _ => "::workflow_core",
        }
    })
}

/// The runtime's path as tokens.
pub(crate) fn path() -> TokenStream {
    name().parse().unwrap_or_default()
}

/// `<runtime>::__private`, every token spanned at `span` (so an error in the generated
/// code that names it points where the tokens it stands for were written).
pub(crate) fn private_at(span: Span) -> TokenStream {
    format!("{}::__private", name())
        .parse::<TokenStream>()
        .unwrap_or_default()
        .into_iter()
        .map(|mut token| {
            token.set_span(span);
            token
        })
        .collect()
}

/// Whether a manifest names the package `package` as a dependency of any kind (normal,
/// dev, build, per target), by key (`name = …`), by table (`[dependencies.name]`) or by
/// rename (`package = "name"`).
pub(crate) fn depends_on(manifest: &str, package: &str) -> bool {
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            if let Some((table, key)) = header.rsplit_once('.') {
                if table.ends_with("dependencies") && unquote(key) == package {
                    return true;
                }
            }
            in_dependencies = header.ends_with("dependencies");
            continue;
        }
        if !in_dependencies {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if unquote(key.trim()) == package || renames_to(value, package) {
            return true;
        }
    }
    false
}

/// Whether an inline dependency table says `package = "name"`.
fn renames_to(value: &str, package: &str) -> bool {
    value
        .split([',', '{', '}'])
        .filter_map(|part| part.split_once('='))
        .any(|(key, name)| key.trim() == "package" && unquote(name.trim()) == package)
}

fn unquote(text: &str) -> &str {
    text.trim_matches('"')
}
