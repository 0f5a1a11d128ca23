//! The workflow seed's human-in-the-loop flow: screen content automatically; when the
//! screen asks for a person, wait up to 48 hours for a moderator, escalate to the leads if
//! nobody decides, then publish or not.
//!
//! Two posts go through it. The clean one is published without a person. The flagged one
//! waits for the moderators, who do not answer: after 48 (simulated) hours the task is
//! escalated to `moderation_leads`; a moderator's late decision is refused; a lead rejects
//! it, and it is not published. Run on paused tokio time, the 48 hours pass at once.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow::journal::Event;
use workflow::prelude::*;
use workflow::DecisionError;

use crate::{fmt_duration, journal, wait_for_task, Log, Progress};

/// A post submitted for publication.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Post {
    /// The post id.
    pub id: String,
    /// Its text.
    pub text: String,
}

/// What the automatic screen found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Screening {
    /// Whether a person must look at it.
    pub requires_human_review: bool,
    /// The rules it tripped.
    pub flags: Vec<String>,
}

/// Where a post was published.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Publication {
    /// Its URL.
    pub url: String,
}

/// The environment: the site the posts are published on.
#[derive(Debug, Default)]
pub struct Site {
    published: Arc<Mutex<Vec<String>>>,
}

/// The steps' implementations.
pub mod moderation {
    use super::*;

    /// The automatic screen: rules standing in for a classifier.
    pub async fn auto_screen(_env: &Site, post: Post) -> Result<Screening, StepError> {
        let text = post.text.to_lowercase();
        let flags: Vec<String> = ["miracle cure", "guaranteed returns", "click here"]
            .into_iter()
            .filter(|rule| text.contains(rule))
            .map(str::to_owned)
            .collect();
        Ok(Screening {
            requires_human_review: !flags.is_empty(),
            flags,
        })
    }

    /// Publishes the post (idempotent: the site keys publications by the step's key).
    pub async fn publish(
        env: &Site,
        ctx: &StepContext,
        post: Post,
    ) -> Result<Publication, StepError> {
        let mut published = env.published.lock().unwrap_or_else(|p| p.into_inner());
        if !published.contains(&ctx.idempotency_key) {
            published.push(ctx.idempotency_key.clone());
        }
        Ok(Publication {
            url: format!("https://example.invalid/posts/{}", post.id),
        })
    }
}

workflow! {
    /// Publish user content after an automatic screen and, when it asks, a person's review.
    pub workflow ContentModeration(post: Post) env Site {
        step auto_screen -> Screening {
            action: moderation::auto_screen(env, post),
        }
        human review -> Approval {
            assignee: "moderators",
            depends_on: [auto_screen],
            condition: auto_screen.requires_human_review,
            timeout: 48h,
            on_timeout: escalate("moderation_leads"),
            prompt: "The automatic screen flagged this post. Publish it?",
        }
        step publish -> Publication {
            action: moderation::publish(env, ctx, post),
            depends_on: [review],
            condition: review.is_none_or(|r| r.approved),
            effect: external,
            idempotent: true,
        }
    }
}

/// How one post went.
#[derive(Debug, Clone)]
pub struct PostOutcome {
    /// The post.
    pub post: String,
    /// The run.
    pub run: RunId,
    /// What the screen found.
    pub screening: Screening,
    /// The decision, when a person was asked.
    pub review: Option<Approval>,
    /// Where it was published, if it was.
    pub publication: Option<Publication>,
    /// The human-task events of the run, with their time after the task opened.
    pub task_events: Vec<(Duration, String)>,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The clean post.
    pub clean: PostOutcome,
    /// The flagged post.
    pub flagged: PostOutcome,
    /// Why the moderator's late decision was refused.
    pub late_moderator: Option<DecisionError>,
    /// Who the task was assigned to after the escalation.
    pub escalated_to: String,
}

async fn outcome(
    engine: &Engine,
    run: &RunHandle<ContentModeration>,
    post: &Post,
) -> Result<PostOutcome, Box<dyn Error>> {
    let outputs = run.outputs().await?;
    let events = journal(engine, run.id()).await?;
    let opened = events.iter().find_map(|e| match e {
        Event::TaskOpened { at, .. } => Some(*at),
        _ => None,
    });
    let task_events = events
        .iter()
        .filter_map(|event| {
            let line = match event {
                Event::TaskOpened { assignee, .. } => format!("opened for {assignee}"),
                Event::TaskEscalated { to, .. } => format!("escalated to {to}"),
                Event::TaskDecided { by, .. } => format!("decided by {by}"),
                Event::TaskExpired { .. } => "expired".to_owned(),
                _ => return None,
            };
            let after = Duration::from_millis(event.at().saturating_sub(opened?));
            Some((after, line))
        })
        .collect();
    Ok(PostOutcome {
        post: post.id.clone(),
        run: run.id(),
        screening: outputs.auto_screen,
        review: outputs.review,
        publication: outputs.publish,
        task_events,
    })
}

/// Moderates a clean and a flagged post. Call it on paused tokio time.
pub async fn run(log: &Log) -> Result<Summary, Box<dyn Error>> {
    let engine = Engine::builder().seed(48).build();
    engine.register::<ContentModeration>(Site::default())?;
    let progress = Progress::start(&engine, ContentModeration::spec(), log);

    let clean = Post {
        id: "post-1".into(),
        text: "Our community garden opens on Saturday.".into(),
    };
    let flagged = Post {
        id: "post-2".into(),
        text: "This miracle cure works, click here!".into(),
    };
    log.line(format!("Submitting {} and {}.", clean.id, flagged.id));
    let clean_run = engine
        .start::<ContentModeration>(ContentModerationInput {
            post: clean.clone(),
        })
        .await?;
    let flagged_run = engine
        .start::<ContentModeration>(ContentModerationInput {
            post: flagged.clone(),
        })
        .await?;
    let clean_outcome = outcome(&engine, &clean_run, &clean).await?;

    let task = wait_for_task(&engine, flagged_run.id(), "review", Duration::from_secs(60)).await?;
    log.line(format!(
        "{} waits for {}: {}",
        flagged.id,
        task.assignee,
        task.prompt.as_deref().unwrap_or("")
    ));
    log.line("(the moderators do not answer; 48 simulated hours pass)".to_owned());
    tokio::time::sleep(Duration::from_secs(48 * 3600 + 60)).await;

    let task = flagged_run
        .review()
        .info()
        .await
        .ok_or("the review task should still be open, escalated")?;
    log.line(format!(
        "the task is now assigned to {} (escalated: {}), due in {}",
        task.assignee,
        task.escalated,
        fmt_duration(Duration::from_millis(
            task.deadline.saturating_sub(engine.now())
        ))
    ));
    let moderator = "sam@moderators";
    let late = flagged_run
        .review()
        .approve(moderator, Some("looks fine"))
        .await;
    match &late {
        Err(refused) => log.line(format!(
            "{moderator} tries to approve late: refused ({refused})"
        )),
        Ok(()) => log.line(format!("{moderator} approved late (unexpected)")),
    }
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    let lead = "lee@moderation_leads";
    log.line(format!("[simulated lead] {lead} rejects {}", flagged.id));
    flagged_run
        .review()
        .reject(lead, Some("health misinformation"))
        .await?;
    let flagged_outcome = outcome(&engine, &flagged_run, &flagged).await?;
    progress.finish().await;

    Ok(Summary {
        clean: clean_outcome,
        flagged: flagged_outcome,
        late_moderator: late.err(),
        escalated_to: task.assignee,
    })
}
