use super::*;
use chrono::TimeZone;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 3, 10, 12, 0, 0).unwrap()
}

fn limits() -> Limits {
    Limits {
        window: Duration::days(60),
        mass_pct: 20,
        mass_max: 10,
    }
}

/// Event `n`, starting `days` from now.
fn seen(n: usize, days: i64) -> Seen {
    Seen {
        reference: format!("cita-{n}"),
        uid: format!("uid-{n}@clinic"),
        starts_at: now() + Duration::days(days),
    }
}

fn uids(s: &[Seen]) -> BTreeSet<String> {
    s.iter().map(|s| s.uid.clone()).collect()
}

fn refs(s: &[Seen]) -> Vec<&str> {
    s.iter().map(|s| s.reference.as_str()).collect()
}

#[test]
fn an_untrusted_body_is_named() {
    let ok = BodyShape {
        bytes: 100,
        has_vcalendar: true,
        vevents: 3,
    };
    assert_eq!(trust(ok), Ok(()));
    assert_eq!(trust(BodyShape { bytes: 0, ..ok }), Err(Untrusted::EmptyBody));
    assert_eq!(
        trust(BodyShape {
            has_vcalendar: false,
            ..ok
        }),
        Err(Untrusted::NoCalendar)
    );
    assert_eq!(trust(BodyShape { vevents: 0, ..ok }), Err(Untrusted::NoEvents));
    // Emptiness wins over the rest: it is what a person should read.
    assert_eq!(
        trust(BodyShape {
            bytes: 0,
            has_vcalendar: false,
            vevents: 0
        }),
        Err(Untrusted::EmptyBody)
    );
    assert_eq!(Untrusted::Status { code: 500 }.to_string(), "HTTP 500");
}

#[test]
fn one_vanished_event_of_ten_is_cancelled() {
    let before: Vec<Seen> = (0..10).map(|n| seen(n, 1 + n as i64)).collect();
    let now_list: Vec<Seen> = before[1..].to_vec();
    let j = judge(&before, &uids(&now_list), &now_list, &[], now(), &limits());
    assert_eq!(j.disappearance, Disappearance::Cancel { gone: vec![seen(0, 1)] });
    assert_eq!(j.baseline, now_list);
    assert!(j.returned.is_empty());
}

#[test]
fn nothing_vanished_is_nothing() {
    let before: Vec<Seen> = (0..3).map(|n| seen(n, 2)).collect();
    let j = judge(&before, &uids(&before), &before, &[], now(), &limits());
    assert_eq!(j.disappearance, Disappearance::None);
    assert_eq!(j.baseline, before);
}

#[test]
fn a_refused_event_is_present_and_stays_in_the_baseline() {
    let before: Vec<Seen> = (0..10).map(|n| seen(n, 3)).collect();
    // Event 4 is in the body (its UID) but did not import this time.
    let imported: Vec<Seen> = before.iter().filter(|s| s.reference != "cita-4").cloned().collect();
    let j = judge(&before, &uids(&before), &imported, &[], now(), &limits());
    assert_eq!(j.disappearance, Disappearance::None);
    assert!(refs(&j.baseline).contains(&"cita-4"), "{:?}", j.baseline);
    // When it then vanishes, it is seen.
    let j2 = judge(&j.baseline, &uids(&imported), &imported, &[], now(), &limits());
    assert_eq!(j2.disappearance, Disappearance::Cancel { gone: vec![seen(4, 3)] });
}

#[test]
fn only_upcoming_events_inside_the_window_can_vanish() {
    let before = vec![
        seen(0, -1),
        seen(1, 61),
        seen(2, 5),
        seen(3, 6),
        seen(4, 7),
        seen(5, 8),
        seen(6, 9),
    ];
    let kept = before[2..].to_vec();
    let j = judge(&before, &uids(&kept), &kept, &[], now(), &limits());
    assert_eq!(
        j.disappearance,
        Disappearance::None,
        "past and beyond-window events are not judged"
    );
    // Past or beyond-window events leave the baseline.
    let also = vec![seen(7, 80)];
    let j = judge(&before, &uids(&also), &also, &[], now(), &limits());
    assert!(j.baseline.is_empty(), "{:?}", j.baseline);
}

#[test]
fn the_mass_thresholds_are_exclusive() {
    let l = limits();
    // 20 % of 10 is 2: two vanishing is not more than 20 %.
    assert!(!is_mass(2, 10, &l));
    assert!(is_mass(3, 10, &l));
    // 10 of 100 is 10 %, and not more than 10 events.
    assert!(!is_mass(10, 100, &l));
    assert!(is_mass(11, 100, &l));
    // One of four is 25 %.
    assert!(is_mass(1, 4, &l));
    assert!(!is_mass(1, 5, &l));
    let strict = Limits { mass_max: 0, ..l };
    assert!(is_mass(1, 1000, &strict));
    let loose = Limits {
        mass_pct: 100,
        mass_max: u32::MAX,
        ..l
    };
    assert!(!is_mass(1000, 1000, &loose));
}

#[test]
fn forty_percent_vanishing_is_held_not_cancelled() {
    let before: Vec<Seen> = (0..10).map(|n| seen(n, 1 + n as i64)).collect();
    let kept = before[4..].to_vec();
    let j = judge(&before, &uids(&kept), &kept, &[], now(), &limits());
    match &j.disappearance {
        Disappearance::Hold { gone, upcoming } => {
            assert_eq!(refs(gone), ["cita-0", "cita-1", "cita-2", "cita-3"]);
            assert_eq!(*upcoming, 10);
        }
        other => panic!("expected a hold, got {other:?}"),
    }
    // The current body is the baseline: a discard keeps it.
    assert_eq!(j.baseline, kept);
    // Held events are not judged again, and come back released.
    let held = before[..4].to_vec();
    let j2 = judge(&j.baseline, &uids(&kept), &kept, &held, now(), &limits());
    assert_eq!(j2.disappearance, Disappearance::None);
    assert!(j2.returned.is_empty());
    let back: Vec<Seen> = before[2..].to_vec();
    let j3 = judge(&j.baseline, &uids(&back), &back, &held, now(), &limits());
    assert_eq!(refs(&j3.returned), ["cita-2", "cita-3"]);
    assert_eq!(j3.disappearance, Disappearance::None);
}

#[test]
fn more_than_the_maximum_is_held_even_when_a_small_share() {
    let before: Vec<Seen> = (0..100).map(|n| seen(n, 1 + (n as i64 % 50))).collect();
    let kept = before[11..].to_vec();
    let j = judge(&before, &uids(&kept), &kept, &[], now(), &limits());
    assert!(matches!(j.disappearance, Disappearance::Hold { ref gone, .. } if gone.len() == 11));
    let kept = before[10..].to_vec();
    let j = judge(&before, &uids(&kept), &kept, &[], now(), &limits());
    assert!(matches!(j.disappearance, Disappearance::Cancel { ref gone } if gone.len() == 10));
}

#[test]
fn occurrences_of_a_series_share_their_uid() {
    let series = |n: usize, days: i64| Seen {
        reference: format!("serie/{n}"),
        uid: "serie@clinic".into(),
        starts_at: now() + Duration::days(days),
    };
    let mut before: Vec<Seen> = (0..10).map(|n| seen(n, 1)).collect();
    before.extend([series(1, 2), series(2, 9)]);
    // The series is still in the body, with one occurrence less (EXDATE):
    // that occurrence is the import's to handle, not a disappearance.
    let mut now_list: Vec<Seen> = (0..10).map(|n| seen(n, 1)).collect();
    now_list.push(series(2, 9));
    let j = judge(&before, &uids(&now_list), &now_list, &[], now(), &limits());
    assert_eq!(j.disappearance, Disappearance::None);
    // The series vanishing whole cancels every upcoming occurrence.
    let plain: Vec<Seen> = (0..10).map(|n| seen(n, 1)).collect();
    let j = judge(&before, &uids(&plain), &plain, &[], now(), &limits());
    assert_eq!(
        j.disappearance,
        Disappearance::Cancel {
            gone: vec![series(1, 2), series(2, 9)]
        }
    );
}

#[test]
fn the_first_poll_has_nothing_to_lose() {
    let list: Vec<Seen> = (0..3).map(|n| seen(n, 1)).collect();
    let j = judge(&[], &uids(&list), &list, &[], now(), &limits());
    assert_eq!(j.disappearance, Disappearance::None);
    assert_eq!(j.baseline, list);
}

#[test]
fn a_feed_is_stale_after_its_minutes_of_failing() {
    assert!(!is_stale(None, now(), 30));
    assert!(!is_stale(Some(now() - Duration::minutes(29)), now(), 30));
    assert!(is_stale(Some(now() - Duration::minutes(30)), now(), 30));
    assert!(!is_stale(Some(now() - Duration::days(3)), now(), 0), "0 turns it off");
}

#[test]
fn only_a_feed_s_own_vanishing_is_undone_when_the_event_returns() {
    let ours = format!("{}abc:1", vanished_prefix("agenda"));
    assert!(revives(true, true, Some(&ours), "agenda"));
    assert!(
        !revives(false, true, Some(&ours), "agenda"),
        "a cancelled event stays cancelled"
    );
    assert!(
        !revives(true, false, Some(&ours), "agenda"),
        "a live commitment needs nothing"
    );
    assert!(
        !revives(true, true, Some("cita-1-cancel"), "agenda"),
        "cancelled by someone else"
    );
    assert!(!revives(true, true, Some(&ours), "other-feed"));
    assert!(!revives(true, true, None, "agenda"));
}
