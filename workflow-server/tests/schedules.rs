//! Schedules over the JSON API, over real loopback TCP: listed with their next fire times
//! in their zone, created, paused, resumed, triggered, backfilled (a dry run first) and
//! deleted; a scheduled run's tick in the run detail and on the run page; the ticks a
//! schedule missed; and every refusal with its stable code, changing nothing.

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::{json, Value};
use workflow_core::store::{MissedTicks, RunFilter, ScheduleChange};

/// The week of 2026-03-23 (Monday) to 2026-03-30, in UTC.
const FROM: &str = "2026-03-23T00:00:00Z";
const TO: &str = "2026-03-30T00:00:00Z";

async fn nightly_runs(engine: &workflow_core::Engine) -> usize {
    engine
        .runs(RunFilter {
            workflow: Some("Nightly".into()),
            ..RunFilter::default()
        })
        .await
        .unwrap()
        .len()
}

async fn send(addr: std::net::SocketAddr, method: Method, path: &str, body: Value) -> Answer {
    request(
        addr,
        method,
        path,
        &[
            ("x-forwarded-user", LEAD.to_owned()),
            ("content-type", "application/json".to_owned()),
        ],
        body.to_string().into_bytes(),
    )
    .await
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_is_created_listed_paused_triggered_backfilled_and_deleted() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let created = post_json(
        addr,
        "/api/schedules",
        Some(LEAD),
        json!({
            "id": "weekday-report",
            "workflow": "Nightly",
            "cron": "0 9 * * MON-FRI",
            "tz": "Europe/Berlin",
            "overlap": "buffer_one",
            "catchup": "all(max: 3)",
            "window": "6h",
            "jitter": "30s",
        }),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let created = created.json();
    assert_eq!(created["overlap"], "buffer_one");
    assert_eq!(created["catchup"], "all(max: 3)");
    assert_eq!(created["window_s"], 21_600);
    assert_eq!(created["jitter_s"], 30);

    // Listed with its next fire times, in its zone.
    let listed = get(addr, "/api/schedules?next=4", Some(LEAD)).await.json();
    let schedule = &listed["schedules"][0];
    assert_eq!(schedule["id"], "weekday-report");
    assert_eq!(schedule["workflow"], "Nightly");
    assert_eq!(schedule["paused"], false);
    assert_eq!(schedule["missed"], 0);
    assert!(schedule["last_run"].is_null());
    let next = strings(&schedule["next"]);
    assert_eq!(next.len(), 4, "{schedule}");
    for at in &next {
        assert!(
            at.contains("T09:00:00+0") && at.ends_with("[Europe/Berlin]"),
            "09:00 Berlin time: {at}"
        );
    }
    let one = get(addr, "/api/schedules/weekday-report", Some(LEAD))
        .await
        .json();
    assert_eq!(strings(&one["next"]), next[..3]);

    // Paused: no next fire times; resumed: back.
    let paused = post_json(
        addr,
        "/api/schedules/weekday-report/pause",
        Some(LEAD),
        json!({}),
    )
    .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    let one = get(addr, "/api/schedules/weekday-report", Some(LEAD))
        .await
        .json();
    assert_eq!(one["paused"], true);
    assert_eq!(one["next"], json!([]));
    post_json(
        addr,
        "/api/schedules/weekday-report/resume",
        Some(LEAD),
        json!({}),
    )
    .await;
    let one = get(addr, "/api/schedules/weekday-report", Some(LEAD))
        .await
        .json();
    assert_eq!(one["paused"], false);
    assert_eq!(strings(&one["next"]).len(), 3);

    // Triggered now: a run, whose detail and page name the tick.
    let triggered = post_json(
        addr,
        "/api/schedules/weekday-report/trigger",
        Some(LEAD),
        json!({}),
    )
    .await;
    assert_eq!(triggered.status, StatusCode::CREATED, "{}", triggered.body);
    let run = triggered.json()["run"].as_str().unwrap().to_owned();
    let detail = get(addr, &format!("/api/runs/{run}"), Some(LEAD))
        .await
        .json();
    assert_eq!(detail["tick"]["schedule"], "weekday-report");
    let scheduled = detail["tick"]["scheduled"].as_u64().unwrap();
    assert_eq!(triggered.json()["scheduled_ms"].as_u64(), Some(scheduled));
    assert!(detail["tick"]["fired"].as_u64().unwrap() >= scheduled);
    let page = get(addr, &format!("/inbox/runs/{run}"), Some(LEAD)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains("<p id=\"tick\">Started by schedule <b>weekday-report</b>"),
        "{}",
        page.body
    );
    let listed = get(addr, "/api/schedules/weekday-report", Some(LEAD))
        .await
        .json();
    assert_eq!(listed["last_run"], run.as_str());

    // Backfill: the dry run lists the five weekdays and starts nothing; then each starts
    // once, and a second backfill starts nothing more.
    let before = nightly_runs(&engine).await;
    let dry = post_json(
        addr,
        "/api/schedules/weekday-report/backfill",
        Some(LEAD),
        json!({"from": FROM, "to": TO, "dry_run": true}),
    )
    .await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    let ticks: Vec<String> = dry.json()["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["scheduled"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ticks,
        [
            "2026-03-23T09:00:00+01:00[Europe/Berlin]",
            "2026-03-24T09:00:00+01:00[Europe/Berlin]",
            "2026-03-25T09:00:00+01:00[Europe/Berlin]",
            "2026-03-26T09:00:00+01:00[Europe/Berlin]",
            "2026-03-27T09:00:00+01:00[Europe/Berlin]",
        ]
    );
    assert!(dry.json()["ticks"][0]["run"].is_null());
    assert_eq!(
        nightly_runs(&engine).await,
        before,
        "a dry run starts nothing"
    );
    for (round, created) in [(1, true), (2, false)] {
        let done = post_json(
            addr,
            "/api/schedules/weekday-report/backfill",
            Some(LEAD),
            json!({"from": FROM, "to": TO}),
        )
        .await;
        assert_eq!(done.status, StatusCode::OK, "{}", done.body);
        let ticks = done.json()["ticks"].as_array().unwrap().clone();
        assert_eq!(ticks.len(), 5);
        assert!(
            ticks
                .iter()
                .all(|t| t["created"] == created && t["run"].is_string()),
            "round {round}: {ticks:?}"
        );
        assert_eq!(nightly_runs(&engine).await, before + 5, "round {round}");
    }

    // Deleted: gone, its runs kept.
    let deleted = request(
        addr,
        Method::DELETE,
        "/api/schedules/weekday-report",
        &[
            ("x-forwarded-user", LEAD.to_owned()),
            ("content-type", "application/json".to_owned()),
        ],
        Vec::new(),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    let gone = get(addr, "/api/schedules/weekday-report", Some(LEAD)).await;
    assert_eq!(
        (gone.status, gone.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_schedule")
    );
    assert_eq!(nightly_runs(&engine).await, before + 5);
    assert_eq!(
        get(addr, "/api/schedules", Some(LEAD)).await.json()["schedules"],
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ticks_a_schedule_missed_are_listed() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let row = engine
        .schedules()
        .create(
            "hourly",
            "Nightly",
            workflow_core::schedule::Schedule::new("0 * * * *"),
        )
        .await
        .unwrap();
    let empty = get(addr, "/api/schedules/hourly/missed", Some(VIEWER))
        .await
        .json();
    assert_eq!(empty["missed"], json!([]));
    // What the scheduler writes when it finds ticks too old to run.
    let missed = MissedTicks {
        first: 1_767_578_400_000,
        last: 1_767_830_400_000,
        count: 71,
        recorded_at: 1_767_834_000_000,
    };
    assert!(engine
        .store()
        .update_schedule(
            "hourly",
            row.version,
            ScheduleChange {
                missed: Some(missed),
                ..ScheduleChange::default()
            },
        )
        .await
        .unwrap());
    let listed = get(addr, "/api/schedules/hourly/missed", Some(VIEWER))
        .await
        .json();
    assert_eq!(
        listed["missed"],
        json!([{
            "first_ms": 1_767_578_400_000u64,
            "first": "2026-01-05T02:00:00.000Z",
            "last_ms": 1_767_830_400_000u64,
            "last": "2026-01-08T00:00:00.000Z",
            "count": 71,
            "recorded_at": 1_767_834_000_000u64,
        }])
    );
    let bad = get(
        addr,
        "/api/schedules/hourly/missed?limit=many",
        Some(VIEWER),
    )
    .await;
    assert_eq!(
        (bad.status, bad.code().as_str()),
        (StatusCode::BAD_REQUEST, "bad_request")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedule_requests_get_typed_errors_and_change_nothing() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let create = |body: Value| post_json(addr, "/api/schedules", Some(LEAD), body);
    let cases: Vec<(Value, StatusCode, &str, &str)> = vec![
        (
            json!({"id": "r", "workflow": "Nightly", "cron": "0 9 * * MON-FRY"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
            "FRY",
        ),
        (
            json!({"id": "r", "workflow": "Nightly", "cron": "0 9 * * *", "tz": "Europe/Berlinn"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
            "Europe/Berlinn",
        ),
        (
            json!({"id": "r", "workflow": "Nightly", "cron": "0 9 * * *", "window": "6 hours"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
            "window",
        ),
        (
            json!({"id": "r", "workflow": "Nightly", "cron": "0 9 * * *", "overlap": "queue"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
            "buffer_one",
        ),
        (
            json!({"id": "r", "workflow": "Nightly", "cron": "0 9 * * *", "catchup": "all"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
            "all(max: N)",
        ),
        (
            json!({"id": "r", "workflow": "Triage", "cron": "0 9 * * *"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_schedulable",
            "Ticket",
        ),
        (
            json!({"id": "r", "workflow": "Payroll", "cron": "0 9 * * *"}),
            StatusCode::NOT_FOUND,
            "unknown_workflow",
            "Payroll",
        ),
        (
            json!({"id": "", "workflow": "Nightly", "cron": "0 9 * * *"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "schedule id",
        ),
        (
            json!({"id": "r", "workflow": "Nightly", "cron": "0 9 * * *", "color": "red"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_json",
            "color",
        ),
    ];
    for (body, status, code, mentions) in cases {
        let answer = create(body.clone()).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (status, code),
            "{body}: {}",
            answer.body
        );
        assert!(answer.body.contains(mentions), "{body}: {}", answer.body);
    }
    assert_eq!(
        get(addr, "/api/schedules", Some(LEAD)).await.json()["schedules"],
        json!([])
    );

    // A schedule id taken by another workflow's schedule (every minute, paused).
    engine
        .schedules()
        .create(
            "taken",
            "Nightly",
            workflow_core::schedule::Schedule::new("* * * * *"),
        )
        .await
        .unwrap();
    engine.schedules().pause("taken").await.unwrap();
    let before = nightly_runs(&engine).await;
    let clash = create(json!({"id": "taken", "workflow": "Shipment", "cron": "0 9 * * *"})).await;
    assert_eq!(
        (clash.status, clash.code().as_str()),
        (StatusCode::CONFLICT, "schedule_exists")
    );

    // Backfills that cannot be.
    let backfill = |body: Value| post_json(addr, "/api/schedules/taken/backfill", Some(LEAD), body);
    for (body, status, code) in [
        (
            json!({"from": TO, "to": FROM}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json!({"from": "monday", "to": TO}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            // Every minute for a week: more ticks than one backfill starts.
            json!({"from": FROM, "to": TO, "dry_run": true}),
            StatusCode::BAD_REQUEST,
            "too_many_ticks",
        ),
    ] {
        let answer = backfill(body.clone()).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (status, code),
            "{body}: {}",
            answer.body
        );
    }
    assert_eq!(
        nightly_runs(&engine).await,
        before,
        "no backfill started a run"
    );
    let unknown = post_json(addr, "/api/schedules/nope/pause", Some(LEAD), json!({})).await;
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_schedule")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_the_caller_may_not_see_answers_as_a_missing_one() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    engine
        .schedules()
        .create(
            "secret",
            "Nightly",
            workflow_core::schedule::Schedule::new("0 0 1 1 *"),
        )
        .await
        .unwrap();
    for (method, suffix) in [
        (Method::GET, ""),
        (Method::GET, "/missed"),
        (Method::POST, "/pause"),
        (Method::POST, "/trigger"),
        (Method::DELETE, ""),
    ] {
        let ask = |id: &str| {
            let path = format!("/api/schedules/{id}{suffix}");
            let method = method.clone();
            async move {
                request(
                    addr,
                    method,
                    &path,
                    &[
                        ("x-forwarded-user", OTHER_OPERATOR.to_owned()),
                        ("content-type", "application/json".to_owned()),
                    ],
                    b"{}".to_vec(),
                )
                .await
            }
        };
        let hidden = ask("secret").await;
        let missing = ask("absent").await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{method} {suffix}");
        assert_eq!(hidden.status, missing.status, "{method} {suffix}");
        assert_eq!(
            hidden.body.replace("secret", "absent"),
            missing.body,
            "{method} {suffix}"
        );
    }
    assert!(
        !engine
            .schedules()
            .get("secret", 1)
            .await
            .unwrap()
            .row
            .paused
    );
    assert_eq!(nightly_runs(&engine).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_changes_are_json_only_and_same_site_only() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    engine
        .schedules()
        .create(
            "nightly",
            "Nightly",
            workflow_core::schedule::Schedule::new("0 0 1 1 *"),
        )
        .await
        .unwrap();
    let form = request(
        addr,
        Method::POST,
        "/api/schedules/nightly/trigger",
        &[
            ("x-forwarded-user", LEAD.to_owned()),
            ("content-type", "text/plain".to_owned()),
        ],
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(
        (form.status, form.code().as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "json_required")
    );
    let cross = request(
        addr,
        Method::POST,
        "/api/schedules/nightly/pause",
        &[
            ("x-forwarded-user", LEAD.to_owned()),
            ("content-type", "application/json".to_owned()),
            ("origin", "http://evil.example".to_owned()),
        ],
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(
        (cross.status, cross.code().as_str()),
        (StatusCode::FORBIDDEN, "cross_site")
    );
    let row = engine.schedules().get("nightly", 1).await.unwrap().row;
    assert!(!row.paused, "a refused change changed nothing");
    let delete = send(addr, Method::DELETE, "/api/schedules/nightly", json!({})).await;
    assert_eq!(delete.status, StatusCode::OK, "{}", delete.body);
    assert_eq!(nightly_runs(&engine).await, 0);
}
