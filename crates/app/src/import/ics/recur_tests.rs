//! Unit tests of `recur.rs`: recurrence expansion.

use super::*;

fn at(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%S").unwrap()
}

#[test]
fn weekly_with_exdate_within_a_window() {
    let (dates, more) = expand(
        "FREQ=WEEKLY;BYDAY=TU",
        at("20270105T093000"),
        &[at("20270119T093000")],
        at("20270110T000000"),
        at("20270201T000000"),
        100,
    )
    .unwrap();
    let shown: Vec<String> = dates.iter().map(|d| d.to_string()).collect();
    assert_eq!(shown, ["2027-01-12 09:30:00", "2027-01-26 09:30:00"]);
    assert!(more, "an endless rule goes on past the window");
    let (_, more) = expand(
        "FREQ=WEEKLY;COUNT=2",
        at("20270105T093000"),
        &[],
        at("20270101T000000"),
        at("20270201T000000"),
        100,
    )
    .unwrap();
    assert!(!more);
}

#[test]
fn until_in_utc_is_read_as_local_time() {
    // Lima (−5): UNTIL 14:30Z is 09:30 local, so the 09:30 occurrence counts.
    let series = Series {
        rule: "FREQ=DAILY;UNTIL=20270107T143000Z",
        start: at("20270105T093000"),
        rdates: &[],
        exdates: &[],
    };
    let (dates, _) = expand_with(&series, at("20270101T000000"), at("20270201T000000"), 100, &|t| {
        t - chrono::Duration::hours(5)
    })
    .unwrap();
    assert_eq!(dates.len(), 3);
    assert!(
        expand(
            "FREQ=SOMETIMES",
            at("20270105T093000"),
            &[],
            at("20270101T000000"),
            at("20270201T000000"),
            9
        )
        .is_err()
    );
}
