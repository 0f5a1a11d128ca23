//! The ticket triage behind the front door: the helpdesk's webhook is verified by
//! `workflow-server` on its raw bytes before anything parses it, so a forged delivery is a
//! 401 and journals nothing (where [`ticket_triage`](crate::ticket_triage) verified it
//! inside the run, so a forged delivery still made a run and a dead letter). The event id
//! is the start's idempotency key; a lead approves the alert in the inbox.

use std::net::SocketAddr;
use std::sync::Arc;

use workflow::prelude::*;
use workflow::server::{Server, TrustedHeader, WebhookConfig};

use crate::ticket_triage::{triage, AlertId, AlertService, Helpdesk, Ticket, Triage};
use crate::Log;

/// The Standard Webhooks secret the helpdesk signs with (`whsec_` and base64).
pub const SECRET: &str = "whsec_dGlja2V0LXRyaWFnZS1leGFtcGxlLXNlY3JldA==";

/// The path of the webhook.
pub const HOOK: &str = "/hooks/tickets";

workflow! {
    /// Triage a ticket that arrived through a verified webhook; an urgent alert needs a
    /// lead's approval.
    pub workflow TicketIntake(ticket: Ticket) env Helpdesk {
        step classify -> Triage {
            action: triage::classify(env, ticket),
        }
        human approve_alert -> Approval {
            assignee: "support_leads",
            depends_on: [classify],
            condition: classify.urgent,
            timeout: 2h,
            on_timeout: escalate("on_call"),
            prompt: "The classifier proposes an urgent alert. Send it?",
        }
        step send_alert -> AlertId {
            action: triage::send_alert(env, ctx, ticket, classify),
            depends_on: [approve_alert],
            condition: approve_alert.is_some_and(|a| a.approved),
            effect: external,
            reconcile: triage::find_alert(env, ctx),
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 30s, jitter: full },
            timeout: 10s,
        }
    }
}

/// The webhook's verification: Standard Webhooks with [`SECRET`].
pub fn webhook() -> WebhookConfig {
    // SECRET is a valid `whsec_` secret; a typo in it fails the example's test.
    WebhookConfig::standard(SECRET).unwrap_or_else(|error| panic!("SECRET: {error}"))
}

/// Registers the workflow on `engine` and returns the router: intake at [`HOOK`], the API
/// and the inbox, people signed in by `X-Forwarded-User`.
pub fn router(
    engine: &Engine,
    alerts: Arc<AlertService>,
    log: &Log,
) -> Result<axum::Router, RunError> {
    engine.register::<TicketIntake>(Helpdesk::new(SECRET, alerts, log.clone()))?;
    Ok(Server::new(engine.clone())
        .webhook::<TicketIntake, Ticket>(HOOK, webhook(), |ticket| TicketIntakeInput { ticket })
        .authenticator(TrustedHeader::new())
        .router())
}

/// The seed's ticket as a webhook body.
pub const BODY: &str = r#"{"ticket_id":"T-91","text":"Maybe locked out; payroll closes today"}"#;

/// A `curl` line that delivers [`BODY`] as event `event_id` at `timestamp` (unix seconds),
/// correctly signed, or with a forged signature.
pub fn curl(addr: SocketAddr, event_id: &str, timestamp: i64, forged: bool) -> String {
    let mut headers = webhook().sign(event_id, timestamp, BODY.as_bytes());
    if forged {
        for (name, value) in &mut headers {
            if *name == "webhook-signature" {
                *value = "v1,Zm9yZ2VkLXNpZ25hdHVyZS1ub3QtbWFkZS13aXRoLXRoZS1zZWNyZXQ=".into();
            }
        }
    }
    let mut line =
        format!("curl -i -X POST http://{addr}{HOOK} -H 'content-type: application/json'");
    for (name, value) in headers {
        line.push_str(&format!(" -H '{name}: {value}'"));
    }
    line.push_str(&format!(" --data-binary '{BODY}'"));
    line
}
