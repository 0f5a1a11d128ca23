//! The flow-control page's rate buckets: each bucket the store keeps (up to [`BUCKETS`]),
//! with the step rate it counts for, read from its workflow's most recently registered
//! spec, its tokens now and when the next one comes.

use std::collections::BTreeMap;

use maud::{html, Markup};
use workflow_core::spec::flow::{LimitKey, Rate};
use workflow_core::spec::Spec;
use workflow_core::store::limits::{RateBucket, RateLimit};
use workflow_core::store::RunRecord;

use super::states::duration;
use crate::error::ApiError;
use crate::permissions::Caller;
use crate::view::REDACTED;
use crate::App;

/// The most rate buckets the page reads.
pub const BUCKETS: usize = 200;

/// A bucket as the page shows it.
struct Row {
    /// `workflow.step` of each step whose rate it counts for.
    limits: Vec<String>,
    key: String,
    rate: Rate,
    /// Whole tokens in it now.
    tokens: u64,
    /// How long until its next token; `None` when it is full.
    next: Option<u64>,
}

/// The workflow and step a path key's scope (`{workflow}.{step}.rate`) names.
fn named(scope: &str) -> Option<(&str, &str)> {
    scope.strip_suffix(".rate")?.rsplit_once('.')
}

/// The spec engines registered last for `workflow`, read once per page.
async fn spec<'a>(
    app: &App,
    specs: &'a mut BTreeMap<String, Option<Spec>>,
    workflow: &str,
) -> Result<Option<&'a Spec>, ApiError> {
    if !specs.contains_key(workflow) {
        let store = &**app.engine.store();
        let newest = store.specs(workflow).await?.into_iter().next();
        let spec = match newest {
            Some(record) => workflow_core::admin::stored_spec(store, &record.fingerprint).await?,
            None => None,
        };
        specs.insert(workflow.to_owned(), spec);
    }
    Ok(specs.get(workflow).and_then(Option::as_ref))
}

/// The steps of `spec` (of `workflow`) whose rate `bucket` counts for: the step its scope
/// names for a path key; every step naming its key for a static key.
fn steps<'s>(workflow: &str, spec: &'s Spec, bucket: &RateBucket) -> Vec<(String, &'s Rate)> {
    spec.steps
        .iter()
        .filter_map(|step| {
            let rate = step.rate.as_ref()?;
            let counts = match &rate.key {
                LimitKey::Static(key) => bucket.scope.is_empty() && *key == bucket.key,
                LimitKey::Path(_) => named(&bucket.scope) == Some((workflow, step.id.as_str())),
            };
            counts.then(|| (format!("{workflow}.{}", step.id), rate))
        })
        .collect()
}

/// The section of the page: the buckets of the limits of workflows `caller` may view (a
/// path key's workflow is in its scope; a static key is looked for in the workflows of
/// `runs`, the running runs the page read, and of the other buckets), key values only
/// with `payloads`.
pub(super) async fn section(
    app: &App,
    caller: &Caller,
    runs: &[(RunRecord, bool)],
) -> Result<Markup, ApiError> {
    let buckets = app.engine.store().rate_buckets(BUCKETS + 1).await?;
    let more = buckets.len() > BUCKETS;
    let mut specs = BTreeMap::new();
    let mut workflows: Vec<String> = runs.iter().map(|(r, _)| r.workflow.clone()).collect();
    workflows.extend(
        buckets
            .iter()
            .filter_map(|b| named(&b.scope).map(|(w, _)| w.to_owned())),
    );
    workflows.sort();
    workflows.dedup();
    let now = app.engine.now();
    // Per workflow: whether the caller may view it, and see its key values.
    let mut access: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    let mut rows = Vec::new();
    for bucket in buckets.iter().take(BUCKETS) {
        let mut limits = Vec::new();
        let mut counted: Option<Rate> = None;
        let mut entitled = false;
        for workflow in &workflows {
            let Some(spec) = spec(app, &mut specs, workflow).await? else {
                continue;
            };
            let found = steps(workflow, spec, bucket);
            if found.is_empty() {
                continue;
            }
            let (view, payloads) = match access.get(workflow.as_str()) {
                Some(known) => *known,
                None => {
                    let view = app.may_view(caller, workflow, Some(spec)).await?;
                    let known = (view, view && app.entitled(caller, workflow).await?);
                    access.insert(workflow.as_str(), known);
                    known
                }
            };
            if !view {
                continue;
            }
            entitled |= payloads;
            for (name, rate) in found {
                counted.get_or_insert_with(|| rate.clone());
                limits.push(name);
            }
        }
        let Some(rate) = counted else {
            continue;
        };
        let limit = RateLimit {
            name: "",
            scope: &bucket.scope,
            key: &bucket.key,
            limit: rate.limit,
            per_ms: rate.per.as_millis() as u64,
            burst: rate.burst,
        };
        let (tokens, next) = bucket.bucket.level(&limit, now);
        rows.push(Row {
            limits,
            key: if entitled {
                bucket.key.clone()
            } else {
                REDACTED.to_owned()
            },
            rate,
            tokens,
            next,
        });
    }
    Ok(html! {
        h2 id="rates-heading" { "Rate buckets" }
        @if rows.is_empty() {
            p id="no-rates" { "No rate bucket of a workflow you may see is in use." }
        } @else {
            @if more { p class="meta" { "The first " (BUCKETS) " buckets the store keeps." } }
            table id="rates" aria-labelledby="rates-heading" {
                thead { tr { th scope="col" { "Limit" } th scope="col" { "Key" } th scope="col" { "Rate" } th scope="col" { "Tokens available" } th scope="col" { "Used" } th scope="col" { "Next token" } } }
                tbody {
                    @for row in &rows {
                        @let burst = u64::from(row.rate.burst.max(1));
                        tr {
                            td { (row.limits.join(", ")) }
                            td { code { (row.key) } }
                            td { (row.rate.limit) " per " (duration(row.rate.per.as_millis() as u64)) ", at most " (burst) }
                            td class="tokens" { (row.tokens) " of " (burst) }
                            td class="used" { (burst.saturating_sub(row.tokens)) }
                            td class="next" {
                                @match row.next { Some(ms) => { "in " (duration(ms)) }, None => "full" }
                            }
                        }
                    }
                }
            }
        }
    })
}
