//! Requests a driver answers: decisions, events, cancellations and delegations sent
//! through the engine's API, and messages other processes left in the run's inbox. The
//! machine rules on each; the driver journals what it ruled.

use tokio::sync::oneshot;

use super::driver::{Driver, Msg};
use super::registry::WorkflowHooks;
use crate::engine::workflow::Workflow;
use crate::error::{EventError, RunError};
use crate::journal::Event;
use crate::store::StoreError;

impl<W: Workflow> Driver<W> {
    pub(super) async fn message(&mut self, msg: Msg) -> Result<(), StoreError> {
        let now = self.now();
        match msg {
            Msg::Decide {
                step,
                by,
                decision,
                via,
                reply,
            } => {
                let authorize = &*self.engine.inner.authorizer;
                let ruled = {
                    let hooks = WorkflowHooks::<W> { input: &self.input };
                    let via = via.as_deref();
                    self.machine
                        .decide(self.run, &step, &by, decision, via, now, authorize, &hooks)
                };
                if let Err(refusal) = &ruled {
                    tracing::warn!(
                        step = step.as_str(),
                        by = by.as_str(),
                        code = refusal.code(),
                        "decision refused"
                    );
                }
                self.carry_out(ruled.map(Some), reply).await
            }
            Msg::Event {
                step,
                event_id,
                payload,
                reply,
            } => {
                let ruled = {
                    let hooks = WorkflowHooks::<W> { input: &self.input };
                    self.machine
                        .accept_event(self.run, &step, &event_id, payload, &hooks)
                };
                let ruled = match ruled {
                    Ok(accepted) => Ok(Some(
                        self.machine.event_taken(accepted, &event_id, None, now),
                    )),
                    // The same event again: taken once already.
                    Err(EventError::Duplicate { .. }) => Ok(None),
                    Err(error) => Err(error),
                };
                self.carry_out(ruled, reply).await
            }
            Msg::Cancel { by, reply } => {
                let ruled = self
                    .machine
                    .cancel(&by, now)
                    .map(Some)
                    .ok_or(RunError::Finished(self.run));
                self.carry_out(ruled, reply).await
            }
            Msg::Inbox => self.take_inbox().await,
            Msg::Delegate {
                step,
                by,
                to,
                reply,
            } => {
                let authorize = &*self.engine.inner.authorizer;
                let ruled = self
                    .machine
                    .delegate(self.run, &step, &by, &to, now, Some(authorize));
                self.carry_out(ruled.map(Some), reply).await
            }
        }
    }

    /// Carries out what the machine ruled on a request: journals the event it returned
    /// (committing it with what follows), then answers; a refusal is answered as it is.
    async fn carry_out<E: From<StoreError>>(
        &mut self,
        ruled: Result<Option<Event>, E>,
        reply: oneshot::Sender<Result<(), E>>,
    ) -> Result<(), StoreError> {
        match ruled {
            Ok(Some(event)) => {
                self.record(event);
                let stepped = self.step().await;
                let _ = reply.send(stepped.clone().map(drop).map_err(E::from));
                stepped.map(drop)
            }
            Ok(None) => {
                let _ = reply.send(Ok(()));
                Ok(())
            }
            Err(refusal) => {
                let _ = reply.send(Err(refusal));
                Ok(())
            }
        }
    }

    /// Takes in the messages other processes left in the run's inbox: each becomes the
    /// decision, cancellation or event it asks for, or a refusal, as the machine rules.
    pub(super) async fn take_inbox(&mut self) -> Result<(), StoreError> {
        self.inbox_by_commit = false;
        let items = self
            .engine
            .inner
            .store
            .inbox(self.run, self.machine.inbox_cursor())
            .await?;
        for item in items {
            let now = self.now();
            let authorize = &*self.engine.inner.authorizer;
            let event = {
                let hooks = WorkflowHooks::<W> { input: &self.input };
                self.machine
                    .take_in(self.run, &item, now, authorize, &hooks)
            };
            tracing::info!(
                inbox = item.id,
                "took in a message sent from outside the run"
            );
            self.record(event);
        }
        Ok(())
    }
}
