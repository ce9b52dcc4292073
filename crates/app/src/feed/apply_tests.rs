//! One poll's body on a real SQLite ledger: what is trusted, what vanishes,
//! what is present though refused.

use chrono::{Duration, Utc};

use super::*;
use crate::config::{FeedConfig, ImportConfig, Policy};
use crate::domain::lifecycle::CommitmentStatus;
use crate::templates::Templates;

fn feed() -> FeedConfig {
    FeedConfig {
        name: "agenda".into(),
        url_env: "U".into(),
        every: "1s".into(),
        headers_env: Default::default(),
        window_days: 60,
        mass_disappearance_pct: 20,
        mass_disappearance_max: 10,
    }
}

fn vevent(n: usize, tzid: Option<&str>) -> String {
    let day = (Utc::now() + Duration::days(n as i64 + 2)).format("%Y%m%d");
    let start = match tzid {
        Some(z) => format!("DTSTART;TZID={z}:{day}T100000"),
        None => format!("DTSTART:{day}T150000Z"),
    };
    format!(
        "BEGIN:VEVENT\r\nUID:cita-{n}\r\n{start}\r\nSUMMARY:Control\r\nX-UNAVEZ-PHONE:+5199{n:07}\r\nEND:VEVENT\r\n"
    )
}

fn calendar(events: &[String]) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{}END:VCALENDAR\r\n", events.concat())
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    policy: Policy,
    templates: Templates,
    calendar: ImportConfig,
    feed: FeedConfig,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("l.db")).unwrap();
        let now = Utc::now();
        store
            .write(|tx| tx.feed_lease("agenda", "https://cal.test", "me", now + Duration::minutes(1), now))
            .unwrap();
        Fixture {
            _dir: dir,
            store,
            policy: Policy::default(),
            templates: Templates::embedded(),
            calendar: ImportConfig::default(),
            feed: feed(),
        }
    }

    fn poll(&mut self, body: &str) -> PollOutcome {
        let planner = Planner::new(&self.policy, &self.templates, chrono_tz::America::Lima);
        let env = FeedEnv {
            feed: &self.feed,
            planner: &planner,
            calendar: &self.calendar,
            lease: None,
        };
        apply_body(
            &mut self.store,
            &env,
            body.as_bytes(),
            (Some("\"e\""), None),
            Utc::now(),
        )
        .unwrap()
    }

    fn status(&mut self, n: usize) -> Option<CommitmentStatus> {
        let c = self.store.read(|tx| tx.commitment(&format!("cita-{n}"))).unwrap();
        c.map(|c| c.commitment.status)
    }
}

fn untrusted(o: &PollOutcome) -> &str {
    match o {
        PollOutcome::Untrusted { reason } => reason,
        other => panic!("expected an untrusted poll, got {other:?}"),
    }
}

#[test]
fn an_untrusted_body_imports_and_cancels_nothing() {
    let mut f = Fixture::new();
    let all: Vec<String> = (0..10).map(|n| vevent(n, None)).collect();
    assert!(matches!(f.poll(&calendar(&all)), PollOutcome::Applied(ref p) if p.applied == 10));
    for (body, why) in [
        ("<html><body>Sign in</body></html>", "no VCALENDAR"),
        ("  \r\n", "empty body"),
        (
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n",
            "without any VEVENT",
        ),
    ] {
        let o = f.poll(body);
        assert!(untrusted(&o).contains(why), "{o:?}");
        let row = f.store.read(|tx| tx.feed("agenda")).unwrap().unwrap();
        assert!(row.last_failure.as_deref().unwrap_or("").contains(why), "{row:?}");
        assert!(row.failing_since.is_some());
        assert!((0..10).all(|n| f.status(n) == Some(CommitmentStatus::Scheduled)));
    }
    // The validators of a failure are not kept: the next poll fetches whole.
    let row = f.store.read(|tx| tx.feed("agenda")).unwrap().unwrap();
    assert_eq!(row.etag.as_deref(), Some("\"e\""));
}

#[test]
fn a_refused_event_is_present_and_a_missing_one_is_cancelled() {
    let mut f = Fixture::new();
    let all: Vec<String> = (0..10).map(|n| vevent(n, None)).collect();
    f.poll(&calendar(&all));
    // cita-4 is still there, with a zone nobody knows; cita-7 is gone.
    let next: Vec<String> = (0..10)
        .filter(|n| *n != 7)
        .map(|n| vevent(n, (n == 4).then_some("Mars/Olympus_Mons")))
        .collect();
    match f.poll(&calendar(&next)) {
        PollOutcome::Applied(p) => {
            assert_eq!(p.cancelled, ["cita-7"]);
            assert_eq!(p.refused, 1, "{p:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.status(4), Some(CommitmentStatus::Scheduled), "refused is not gone");
    assert_eq!(f.status(7), Some(CommitmentStatus::Cancelled));
    // A poller whose lease another serve took writes nothing.
    let now = Utc::now();
    f.store
        .write(|tx| {
            tx.feed_lease(
                "agenda",
                "https://cal.test",
                "other",
                now + Duration::minutes(5),
                now + Duration::minutes(2),
            )
        })
        .unwrap();
    let planner = Planner::new(&f.policy, &f.templates, chrono_tz::America::Lima);
    let env = FeedEnv {
        feed: &f.feed,
        planner: &planner,
        calendar: &f.calendar,
        lease: Some(("me", "https://cal.test", now + Duration::minutes(1))),
    };
    let o = apply_body(
        &mut f.store,
        &env,
        calendar(&[vevent(0, None)]).as_bytes(),
        (None, None),
        now,
    )
    .unwrap();
    assert_eq!(o, PollOutcome::LeaseLost);
    assert_eq!(f.status(1), Some(CommitmentStatus::Scheduled));
    // cita-4 stays in the baseline: when it does vanish, it is seen.
    let without_4: Vec<String> = (0..10)
        .filter(|n| *n != 7 && *n != 4)
        .map(|n| vevent(n, None))
        .collect();
    match f.poll(&calendar(&without_4)) {
        PollOutcome::Applied(p) => assert_eq!(p.cancelled, ["cita-4"]),
        other => panic!("{other:?}"),
    }
}
