//! Every key of maps, child workflows and events in one workflow: a map of external
//! effects with a reconciler and a compensation that take the item, a skipping map over a
//! map's output with a condition, a child workflow with literal and shorthand inputs and
//! every key a child step takes, and events with every key an event takes.

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Batch {
    id: u64,
    emails: Vec<String>,
    urgent: bool,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Sent {
    to: String,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Bounce {
    to: String,
}

pub struct Mailer;

mod mail {
    use super::*;

    pub async fn send(env: &Mailer, ctx: &StepContext, to: String) -> Result<Sent, StepError> {
        let _ = (env, &ctx.idempotency_key);
        Ok(Sent { to })
    }

    pub async fn find(ctx: &StepContext, to: String) -> Result<Option<Sent>, StepError> {
        let _ = (&ctx.idempotency_key, to);
        Ok(None)
    }

    pub async fn recall(env: &Mailer, sent: Sent, to: String) -> Result<(), StepError> {
        let _ = (env, sent.to, to);
        Ok(())
    }

    pub async fn verify(sent: Sent, strict: bool) -> Result<u32, StepError> {
        Ok(u32::from(strict) + sent.to.len() as u32)
    }

    pub async fn archive(batch: u64, copies: u32, urgent: bool, label: &str) -> Result<String, StepError> {
        Ok(format!("{batch}:{copies}:{urgent}:{label}"))
    }

    pub async fn close(
        report: Option<ArchiveOutputs>,
        bounce: Option<Bounce>,
        receipt: Sent,
    ) -> Result<(), StepError> {
        let _ = (report.map(|r| r.store), bounce.map(|b| b.to), receipt.to);
        Ok(())
    }
}

workflow! {
    /// Archives a batch.
    pub workflow Archive(batch: u64, copies: u32, urgent: bool) {
        step store -> String {
            action: mail::archive(batch, copies, urgent, "archive"),
        }
    }
}

workflow! {
    /// Mails a batch and follows up.
    pub workflow Campaign(batch: Batch) env Mailer {
        step send_all -> Sent {
            for_each: to in batch.emails,
            action: mail::send(env, ctx, to),
            compensate: mail::recall(env, send_all, to),
            reconcile: mail::find(ctx, to),
            effect: external,
            retry: { max_attempts: 4, backoff: fixed, initial: 1s, max: 1s },
            timeout: 10s,
            concurrency: 2,
            on_item_failure: abort,
            on_failure: abort,
        }
        step verify_each -> u32 {
            for_each: sent in send_all,
            action: mail::verify(sent, true),
            on_item_failure: skip,
            condition: batch.urgent,
            on_failure: continue,
        }
        step report -> ArchiveOutputs {
            workflow: Archive(batch: 7, copies: 2, urgent: false),
            depends_on: [verify_each],
            condition: !send_all.is_empty(),
            on_failure: continue,
            timeout: 2d,
        }
        event bounce -> Bounce {
            depends_on: [send_all],
            condition: batch.urgent,
            timeout: 30m,
            on_timeout: continue,
        }
        event receipt -> Sent {
            timeout: 7d,
            on_timeout: abort,
        }
        step close -> () {
            action: mail::close(report, bounce, receipt),
        }
    }
}

fn main() {
    let spec = Campaign::spec();
    assert_eq!(spec.steps.len(), 6);
    assert_eq!(spec.steps[0].for_each().map(|map| map.concurrency), Some(2));
    assert_eq!(spec.steps[1].output_type(), "Vec<Option<u32>>");
    assert_eq!(spec.steps[2].deps, [1]);
    assert!(spec.steps[2].optional && spec.steps[3].optional && !spec.steps[4].optional);
    assert!(spec.steps[5].optional, "it reads maybe-absent outputs");
    let _: fn(CampaignOutputs) -> (Vec<Sent>, Option<Vec<Option<u32>>>, Option<Box<ArchiveOutputs>>) =
        |outputs| (outputs.send_all, outputs.verify_each, outputs.report);
}
