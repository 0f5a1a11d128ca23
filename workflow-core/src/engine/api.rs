//! The operations on existing runs: inspect, read the journal, list, decide, cancel,
//! retry, restart. Each carries out what the run's machine rules; operations on runs this
//! engine does not drive go through [`crate::admin`], the same code the CLI uses.

use super::driver::Msg;
use super::registry::DecisionHooks;
use super::{Engine, RunView, StepView};
use crate::admin;
use crate::engine::human::DecisionOptions;
use crate::error::{DecisionError, EventError, RunError, RunId};
use crate::journal::{Event, Value};
use crate::machine::{Accepted, Authorize, Machine, NoHooks};
use crate::store::{DeadLetter, Message, RunFilter, RunRecord, RunStatus, StoreError, Submitted};

impl Engine {
    /// A run's state, rebuilt from its journal.
    pub async fn inspect(&self, run: RunId) -> Result<RunView, RunError> {
        let stored = self.stored(run).await?;
        let spec = self
            .spec_of(&stored.record)
            .await?
            .ok_or_else(|| RunError::NotRegistered(stored.record.workflow.clone()))?;
        let machine = Machine::replay(&spec, &stored.events);
        let steps = spec
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| StepView {
                id: step.id.clone(),
                state: machine.states()[index].clone(),
                attempts: machine.attempts()[index],
            })
            .collect();
        Ok(RunView {
            record: stored.record,
            steps,
        })
    }

    /// A run's journal: every transition, in order (the timeline and the audit trail).
    pub async fn events(&self, run: RunId) -> Result<Vec<Event>, RunError> {
        Ok(self.stored(run).await?.events)
    }

    /// Runs in the store, newest first (page with [`RunFilter::before`]).
    pub async fn runs(&self, filter: RunFilter) -> Result<Vec<RunRecord>, RunError> {
        Ok(self.inner.store.runs(filter).await?)
    }

    /// Decides a human task by step id, with the decision as JSON (the untyped path; typed
    /// code uses the run handle's task methods).
    ///
    /// A run this engine drives, or can take up, decides at once with this engine's
    /// authorizer, and a refusal comes back typed. A run another engine drives gets the
    /// decision through its inbox once the machine found nothing against it here: that
    /// engine admits the approver with its own authorizer and journals a refusal.
    pub async fn decide(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        decision: Value,
    ) -> Result<(), DecisionError> {
        self.decide_with(run, step, by, decision, DecisionOptions::default())
            .await
    }

    /// [`Engine::decide`], with how the decision was made (`options.via`, such as a
    /// signed link), which the run's machine journals with the decision.
    pub async fn decide_with(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        decision: Value,
        options: DecisionOptions,
    ) -> Result<(), DecisionError> {
        let via = options.via;
        let asked = self
            .ask(run, |reply| Msg::Decide {
                step: step.to_owned(),
                by: by.to_owned(),
                decision: decision.clone(),
                via: via.clone(),
                reply,
            })
            .await
            .map_err(decision_error(run))?;
        if let Some(answer) = asked {
            return answer;
        }
        // Not driven here: the machine's word from the journal, then the owner's inbox.
        let stored = self.stored(run).await.map_err(decision_error(run))?;
        let record = &stored.record;
        let registered = self
            .inner
            .registry
            .version(&record.workflow, &record.fingerprint);
        let spec = self
            .spec_of(record)
            .await?
            .ok_or_else(|| DecisionError::UnknownTask {
                run,
                step: step.to_owned(),
            })?;
        let machine = Machine::replay(&spec, &stored.events);
        if record.status == RunStatus::Running {
            if let Some(registered) = &registered {
                let authorize = &*self.inner.authorizer;
                machine.decide(
                    run,
                    step,
                    by,
                    decision.clone(),
                    via.as_deref(),
                    self.now(),
                    authorize,
                    &DecisionHooks(&**registered),
                )?;
            }
        }
        admin::submit_decision(
            &*self.inner.store,
            run,
            &spec,
            step,
            by,
            decision,
            via.as_deref(),
            self.now(),
        )
        .await?;
        Ok(())
    }

    /// The form of the decision of human step `step` of the newest registered version of
    /// `workflow`, when its decision type derives [`DecisionForm`](crate::form::DecisionForm);
    /// `None` for `Approval` and other types, or a workflow not registered here.
    pub fn decision_form(&self, workflow: &str, step: &str) -> Option<Vec<crate::form::FormField>> {
        let registered = self.inner.registry.any(workflow)?;
        let index = registered.spec().step_index(step)?;
        registered.decision_form(index)
    }

    /// Hands human step `step` of `run` to `to` (a person or a group), on behalf of `by`,
    /// who must be allowed to decide it now. Journaled (`TaskDelegated`); the delegate
    /// decides from then on, before the same deadline. A run another engine drives gets
    /// the delegation through its inbox, as a decision does.
    pub async fn delegate(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        to: &str,
    ) -> Result<(), DecisionError> {
        let asked = self
            .ask(run, |reply| Msg::Delegate {
                step: step.to_owned(),
                by: by.to_owned(),
                to: to.to_owned(),
                reply,
            })
            .await
            .map_err(decision_error(run))?;
        if let Some(answer) = asked {
            return answer;
        }
        let stored = self.stored(run).await.map_err(decision_error(run))?;
        let spec =
            self.spec_of(&stored.record)
                .await?
                .ok_or_else(|| DecisionError::UnknownTask {
                    run,
                    step: step.to_owned(),
                })?;
        let registered = self
            .inner
            .registry
            .version(&stored.record.workflow, &stored.record.fingerprint);
        let machine = Machine::replay(&spec, &stored.events);
        let authorizer: Authorize<'_> = &*self.inner.authorizer;
        let authorize = registered.is_some().then_some(authorizer);
        machine.delegate(run, step, by, to, self.now(), authorize)?;
        admin::submit_delegation(&*self.inner.store, run, &spec, step, by, to, self.now()).await?;
        Ok(())
    }

    /// Sends an event into a run: the payload of event step `step`, with the sender's
    /// `event_id`. The run's machine checks it first (the run must be running, the step an
    /// event step that has not taken another event; with the workflow registered here, the
    /// payload must be of the step's type), so a refused event changes nothing. It is then
    /// kept in the run's durable inbox: taken as soon as the step waits, or right away if
    /// it waits already. The same `event_id` sent again is taken once (`Ok`).
    pub async fn send_event(
        &self,
        run: RunId,
        step: &str,
        event_id: &str,
        payload: Value,
    ) -> Result<(), EventError> {
        let asked = self
            .ask(run, |reply| Msg::Event {
                step: step.to_owned(),
                event_id: event_id.to_owned(),
                payload: payload.clone(),
                reply,
            })
            .await
            .map_err(|error| match error {
                RunError::Store(error) => EventError::Store(error),
                _ => EventError::UnknownRun(run),
            })?;
        if let Some(answer) = asked {
            return answer;
        }
        // Not driven here: the machine's word from the journal, then the owner's inbox.
        let stored = self.stored(run).await.map_err(|error| match error {
            RunError::Store(error) => EventError::Store(error),
            _ => EventError::UnknownRun(run),
        })?;
        let record = &stored.record;
        if record.status != RunStatus::Running {
            return Err(EventError::Finished(run));
        }
        let spec = self
            .spec_of(record)
            .await?
            .ok_or_else(|| EventError::UnknownEvent {
                run,
                step: step.to_owned(),
            })?;
        let machine = Machine::replay(&spec, &stored.events);
        let registered = self
            .inner
            .registry
            .version(&record.workflow, &record.fingerprint);
        let checked = match &registered {
            Some(registered) => {
                machine.accept_event(run, step, event_id, payload, &DecisionHooks(&**registered))
            }
            None => machine.accept_event(run, step, event_id, payload, &NoHooks),
        };
        let payload = match checked {
            Ok(Accepted::Received(_, payload) | Accepted::Early(_, payload)) => payload,
            Err(EventError::Duplicate { .. }) => return Ok(()),
            Err(error) => return Err(error),
        };
        let message = Message::Event {
            step: step.to_owned(),
            event_id: event_id.to_owned(),
            payload,
        };
        let key = format!("event:{step}:{event_id}");
        match self
            .inner
            .store
            .submit(run, &message, Some(&key), self.now())
            .await
        {
            Ok(Submitted::New(_)) => {}
            Ok(Submitted::Duplicate(_)) => return Ok(()),
            Err(StoreError::Finished(run)) => return Err(EventError::Finished(run)),
            Err(error) => return Err(EventError::Store(error)),
        }
        Ok(())
    }

    /// Asks the driver of `run` (waking it, or taking the run up when nobody drives it) and
    /// returns its answer; `None` when another engine drives the run.
    async fn ask<T: Send + 'static>(
        &self,
        run: RunId,
        message: impl Fn(tokio::sync::oneshot::Sender<T>) -> Msg,
    ) -> Result<Option<T>, RunError> {
        for _ in 0..2 {
            let answer = std::sync::Mutex::new(None);
            let make = || {
                let (reply, receiver) = tokio::sync::oneshot::channel();
                *answer.lock().unwrap_or_else(|p| p.into_inner()) = Some(receiver);
                Box::new(message(reply))
            };
            if self.send(run, make).await? {
                let receiver = answer.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(receiver) = receiver {
                    if let Ok(answer) = receiver.await {
                        return Ok(Some(answer));
                    }
                }
            }
            if !self.take_up(run).await? {
                break;
            }
        }
        Ok(None)
    }

    /// Cancels a run: no step starts any more; an internal step's attempt in flight is
    /// dropped at once and settles `cancelled`; an external effect in flight is told
    /// (`StepContext::cancelled`) and stopped after the cancel's grace
    /// ([`EngineBuilder::cancel_grace`]), settling by what is known of it; then
    /// compensations run. A parked run is marked cancelled directly; a run another engine
    /// drives is asked to stop through its inbox, and that engine stops it the same way.
    ///
    /// [`EngineBuilder::cancel_grace`]: crate::EngineBuilder::cancel_grace
    pub async fn cancel(&self, run: RunId, by: &str) -> Result<(), RunError> {
        let asked = self
            .ask(run, |reply| Msg::Cancel {
                by: by.to_owned(),
                reply,
            })
            .await?;
        if let Some(answer) = asked {
            return answer;
        }
        let record = self.stored(run).await?.record;
        match record.status {
            RunStatus::Parked => {
                admin::cancel_parked(&*self.inner.store, run, by, self.now()).await
            }
            RunStatus::Running => admin::submit_cancel(&*self.inner.store, run, by, self.now())
                .await
                .map(drop),
            _ => Err(RunError::Finished(run)),
        }
    }

    /// Every dead letter, newest first.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, RunError> {
        Ok(self.inner.store.dead_letters().await?)
    }

    /// Retries a failed run from its failed step: completed outputs are reused, steps whose
    /// compensation ran are run again. One store transaction ([`admin::retry_dead_letter`]),
    /// then this engine takes the run up (when it has the workflow registered).
    ///
    /// A run that failed because an interrupted external effect's outcome is unknown is
    /// refused with [`RunError::TooSoon`] until its previous owner can no longer be inside
    /// the effect; [`Engine::retry_dead_letter_insisting`] retries it anyway.
    pub async fn retry_dead_letter(&self, run: RunId, by: &str) -> Result<(), RunError> {
        self.retry_failed(run, by, false).await
    }

    /// [`Engine::retry_dead_letter`], even before a previous owner's lease and margin
    /// passed: for an operator who knows that owner is gone (its process was killed).
    pub async fn retry_dead_letter_insisting(&self, run: RunId, by: &str) -> Result<(), RunError> {
        self.retry_failed(run, by, true).await
    }

    async fn retry_failed(&self, run: RunId, by: &str, insist: bool) -> Result<(), RunError> {
        let record = self.stored(run).await?.record;
        // The versions this engine registers; without the workflow, those engines
        // registered most recently (as the CLI does).
        let mut current: Vec<String> = self
            .inner
            .registry
            .fingerprints(&record.workflow)
            .into_iter()
            .map(str::to_owned)
            .collect();
        if current.is_empty() {
            current = admin::current_fingerprints(&*self.inner.store, &record.workflow).await?;
        }
        let current: Vec<&str> = current.iter().map(String::as_str).collect();
        let spec = self
            .spec_of(&record)
            .await?
            .ok_or_else(|| RunError::NotRegistered(record.workflow.clone()))?;
        admin::retry_dead_letter(
            &*self.inner.store,
            run,
            by,
            self.now(),
            &spec,
            &current,
            insist,
        )
        .await?;
        self.take_up(run).await?;
        Ok(())
    }

    /// Restarts a parked run under the current spec: a new run with the same inputs; the
    /// parked run is marked cancelled with a note naming the new one's key. One store
    /// transaction ([`admin::restart_parked`]), then this engine takes the new run up (when
    /// it has the workflow registered). Without the workflow here, the new run starts on the
    /// newest version engines registered.
    pub async fn restart_parked(&self, run: RunId, by: &str) -> Result<RunId, RunError> {
        let record = self.stored(run).await?.record;
        let fingerprint = match self.inner.registry.any(&record.workflow) {
            Some(registered) => {
                registered.store_spec(self).await?;
                registered.fingerprint().to_owned()
            }
            None => self
                .inner
                .store
                .specs(&record.workflow)
                .await?
                .into_iter()
                .next()
                .map(|spec| spec.fingerprint)
                .ok_or_else(|| RunError::NotRegistered(record.workflow.clone()))?,
        };
        let new = admin::restart_parked(
            &*self.inner.store,
            run,
            by,
            self.now(),
            &fingerprint,
            self.next_seed(),
        )
        .await?;
        if !self.take_up(new).await? {
            // Gated by its workflow's limits: the admission takes it up.
            self.inner.wake_notify.notify_one();
        }
        Ok(new)
    }
}

fn decision_error(run: RunId) -> impl Fn(RunError) -> DecisionError {
    move |error| match error {
        RunError::Store(error) => DecisionError::Store(error),
        _ => DecisionError::UnknownRun(run),
    }
}
