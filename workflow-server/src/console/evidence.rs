//! The evidence of failed browser steps: a screenshot and the page's HTML that a browser
//! step saved in its attempt's artifact directory, `<dir>/run-<id>/<step>/attempt-<n>/`,
//! and named in the attempt's failure message.

use std::path::{Component, Path as FsPath, PathBuf};

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use workflow_core::RunId;

use super::failing;
use crate::error::ApiError;
use crate::inbox::{query_escape, PageCaller, PageError};
use crate::permissions::Action;
use crate::view::parse_run;
use crate::{App, Shared};

/// The largest file of evidence served, in bytes.
pub const MAX_EVIDENCE: u64 = 32 << 20;

/// Whether `name` is a file of evidence: letters, digits, `-`, `_` and `.`, not starting
/// with a dot, ending in `.png` or `.html`.
fn evidence_file(name: &str) -> bool {
    !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && (name.ends_with(".png") || name.ends_with(".html"))
}

/// The console's link to the evidence at `path` (as a failure message names it) of
/// `run`'s step `step`, attempt `attempt`, when the server serves evidence and the path
/// ends in that attempt's directory and a file of evidence.
pub(crate) fn link(app: &App, run: RunId, step: &str, attempt: u32, path: &str) -> Option<String> {
    app.evidence_dir.as_ref()?;
    let parts: Vec<&str> = FsPath::new(path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    let [.., dir, s, a, file] = parts.as_slice() else {
        return None;
    };
    let ours = *dir == run.to_string()
        && *s == step
        && *a == format!("attempt-{attempt}")
        && evidence_file(file);
    ours.then(|| {
        format!(
            "{}/console/runs/{run}/evidence/{}/{attempt}/{file}",
            app.base,
            query_escape(step)
        )
    })
}

fn not_found(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_evidence",
        format!("no evidence {what}"),
    )
}

pub(super) async fn serve(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path((run, step, attempt, file)): Path<(String, String, String, String)>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    // Load, then check, then validate: a run the caller may not see is a 404 whatever
    // the rest of the path says.
    let seen = app.visible_run(&caller, run).await.map_err(&fail)?;
    app.require(
        &caller,
        Action::ViewPayloads,
        &seen.stored.record.workflow,
        seen.approver,
    )
    .await
    .map_err(&fail)?;
    let Some(dir) = app.evidence_dir.clone() else {
        return Err(fail(not_found(
            "is served here (no evidence directory is set)",
        )));
    };
    let known_step = seen
        .spec
        .as_ref()
        .is_some_and(|spec| spec.step_index(&step).is_some());
    let attempt: u32 = attempt
        .parse()
        .map_err(|_| fail(not_found(&format!("for attempt `{attempt}`"))))?;
    if !known_step || !evidence_file(&file) {
        return Err(fail(not_found(&format!("`{file}` of step `{step}`"))));
    }
    let path: PathBuf = dir
        .join(run.to_string())
        .join(&step)
        .join(format!("attempt-{attempt}"))
        .join(&file);
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Vec<u8>>> {
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        if !meta.is_file() || meta.len() > MAX_EVIDENCE {
            return Ok(None);
        }
        std::fs::read(&path).map(Some)
    })
    .await;
    let bytes = match read {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return Err(fail(not_found(&format!("`{file}` of step `{step}`")))),
        Ok(Err(error)) => {
            tracing::warn!(%run, %step, attempt, file, %error, "cannot read evidence");
            return Err(fail(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "evidence_unavailable",
                "the evidence cannot be read now",
            )));
        }
        Err(_) => {
            return Err(fail(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "evidence_unavailable",
                "the evidence cannot be read now",
            )))
        }
    };
    // A captured page is shown as its source: rendered here, it would run as this site.
    let kind = if file.ends_with(".png") {
        "image/png"
    } else {
        "text/plain; charset=utf-8"
    };
    Ok(([(header::CONTENT_TYPE, kind)], bytes).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_screenshots_and_pages_are_evidence() {
        for good in ["failure-1.png", "failure-1.html", "shot.PNG.png"] {
            assert!(evidence_file(good), "{good}");
        }
        for bad in [
            "..",
            ".hidden.png",
            "../secret.png",
            "a/b.png",
            "notes.txt",
            "x.png\0",
            "",
        ] {
            assert!(!evidence_file(bad), "{bad}");
        }
    }
}
