use chrono::{Duration, TimeZone};

use super::*;
use crate::domain::heartbeat::DispatcherState;
use crate::templates::Category;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 15, 0, 0).unwrap()
}

fn beat(id: &str, state: DispatcherState, ago_s: i64, instance: &str) -> Heartbeat {
    Heartbeat {
        id: id.into(),
        host: "caja".into(),
        pid: 7,
        owner: None,
        state,
        last_error: None,
        last_error_at: None,
        started_at: now() - Duration::hours(1),
        beat_at: now() - Duration::seconds(ago_s),
        interval: Duration::seconds(5),
        channel: None,
        channel_instance: Some(instance.into()),
    }
}

#[test]
fn a_ledger_others_can_read_fails() {
    assert_eq!(file_mode(0o100600).status, Status::Ok);
    assert_eq!(file_mode(0o660).status, Status::Ok);
    assert_eq!(file_mode(0o644).finding, Finding::ModeOpen { mode: 0o644 });
    assert_eq!(file_mode(0o604).status, Status::Fail);
}

#[test]
fn disk_schema_and_clock_thresholds() {
    assert_eq!(disk(100, 100).status, Status::Ok);
    assert_eq!(disk(99, 100).status, Status::Fail);
    assert_eq!(schema(14, 14).status, Status::Ok);
    assert_eq!(schema(12, 14).finding, Finding::SchemaStale { found: 12, known: 14 });
    assert_eq!(schema(15, 14).finding, Finding::SchemaTooNew { found: 15, known: 14 });
    assert_eq!(clock(-1_500).status, Status::Ok);
    assert_eq!(clock(5_000).status, Status::Warn);
    assert_eq!(clock(-120_000).status, Status::Fail);
}

#[test]
fn dispatchers_never_ran_alive_stopped_and_on_two_instances() {
    use DispatcherState::*;
    assert_eq!(
        dispatchers(&[], "motor/i1", now()).finding,
        Finding::Skipped(SkipReason::NoDispatcherYet)
    );
    let alive = dispatchers(&[beat("a", Running, 1, "motor/i1")], "motor/i1", now());
    assert_eq!(alive.status, Status::Ok);
    let dead = dispatchers(
        &[beat("a", Running, 600, "motor/i1"), beat("b", Stopped, 60, "motor/i1")],
        "motor/i1",
        now(),
    );
    assert_eq!(dead.status, Status::Fail);
    assert_eq!(
        dead.finding,
        Finding::DispatcherStopped {
            host: "caja".into(),
            pid: 7,
            ago_s: 60,
            crashed: false
        }
    );
    let crashed = dispatchers(&[beat("a", Running, 600, "motor/i1")], "motor/i1", now());
    assert!(matches!(
        crashed.finding,
        Finding::DispatcherStopped { crashed: true, .. }
    ));
    let two = dispatchers(
        &[beat("a", Running, 1, "motor/i1"), beat("b", Paused, 2, "motor/otra")],
        "motor/i1",
        now(),
    );
    assert_eq!(two.status, Status::Warn);
    assert_eq!(
        two.finding,
        Finding::DispatchersOtherInstance {
            instances: vec!["motor/otra".into()]
        }
    );
}

#[test]
fn a_template_too_long_for_the_engine_fails_and_health_counts_warnings() {
    let t = |name: &str, body: String| Template {
        name: name.into(),
        purpose: name.into(),
        category: Category::Transactional,
        language: "es_PE".into(),
        body,
    };
    let ok = template_lengths(&[t("corta", "Hola {{1}}".into())]);
    assert_eq!(ok.finding, Finding::TemplatesOk { count: 1 });
    let long = template_lengths(&[t("corta", "Hola {{1}}".into()), t("larga", "x".repeat(4090) + "{{1}}")]);
    assert_eq!(
        long.finding,
        Finding::TemplatesTooLong {
            names: vec!["larga".into()]
        }
    );
    assert!(healthy(&[
        ok.clone(),
        Check::skip(CheckId::Clock, SkipReason::NotPostgres)
    ]));
    assert!(!healthy(&[ok, clock(5_000)]));
}
