//! Validity ("vigencia"): is this intention still pertinent *now*?
//!
//! Checked by the dispatcher at claim time, inside the same write
//! transaction that claims, against the commitment and contact as they are
//! at that moment — never against the snapshot taken when the message was
//! planned. A message that was right when planned stops being right when
//! the appointment moves, is cancelled, is confirmed, or the person opts out.
//!
//! Pure: the store gathers the facts, this module decides. The order of the
//! checks matters and is part of the contract: reasons that close the
//! intention for good come first (they are the more useful explanation),
//! deferrals last (quiet hours and the daily cap never drop a message).

use chrono::{DateTime, Duration, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::commitment::CommitmentKind;
use super::key::Purpose;
use super::state::CancelReason;
use crate::templates::Category;

/// What the intention says about itself (fixed when it was reserved).
#[derive(Debug, Clone)]
pub struct IntentionFacts {
    pub commitment_version: i64,
    pub purpose: Purpose,
    pub category: Category,
    pub asks_confirmation: bool,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// The commitment as stored right now.
#[derive(Debug, Clone)]
pub struct CommitmentFacts {
    pub kind: CommitmentKind,
    pub cancelled: bool,
    pub version: i64,
    pub starts_at: Option<DateTime<Utc>>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub manual_contact_at: Option<DateTime<Utc>>,
}

/// The recipient as stored right now (`None`: no contact row, nothing known
/// against sending a transactional message).
#[derive(Debug, Clone, Default)]
pub struct ContactFacts {
    pub consent_marketing: bool,
    pub opt_out_marketing_at: Option<DateTime<Utc>>,
    pub opt_out_transactional_at: Option<DateTime<Utc>>,
}

/// Policy inputs, already parsed.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Quiet window in minutes after local midnight `(start, end)`; may wrap
    /// midnight (`21:00`–`07:00`). `start == end` means no quiet hours.
    pub quiet_hours: Option<(u32, u32)>,
    /// Messages per recipient per operating day; `0` means no cap.
    pub daily_cap: u32,
    pub tz: Tz,
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Validity {
    /// Send it now.
    Valid,
    /// Close it without sending, for this reason.
    Cancel { reason: CancelReason, explanation: String },
    /// Not now: try again at `until` (never dropped).
    Defer { until: DateTime<Utc>, why: String },
}

/// Decides whether `i` may be sent at `now`. `sent_today` counts the other
/// messages already handed to the channel for the same recipient on the
/// current operating day.
pub fn check(
    i: &IntentionFacts,
    c: &CommitmentFacts,
    contact: Option<&ContactFacts>,
    sent_today: u32,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Validity {
    let cancel = |reason, explanation: String| Validity::Cancel { reason, explanation };
    let is_cancellation_notice = i.purpose == Purpose::Cancellation;
    let appointment = c.kind == CommitmentKind::Appointment;

    if c.cancelled && !is_cancellation_notice {
        return cancel(
            CancelReason::CommitmentCancelled,
            format!("the commitment was cancelled (now v{})", c.version),
        );
    }
    // Order notices each describe a state the order really went through, so
    // a later state does not make an earlier notice false; for appointments
    // a new version means the time or place this message states is wrong.
    if appointment && i.commitment_version != c.version {
        return cancel(
            CancelReason::Superseded,
            format!(
                "planned for v{} but the commitment is now v{}",
                i.commitment_version, c.version
            ),
        );
    }
    if appointment
        && let Some(starts) = c.starts_at
        && starts <= now
    {
        return cancel(
            CancelReason::InPast,
            format!("the appointment started at {} (already past)", starts.to_rfc3339()),
        );
    }
    if i.asks_confirmation
        && let Some(at) = c.confirmed_at
    {
        return cancel(
            CancelReason::AlreadyConfirmed,
            format!("the customer or staff confirmed at {}", at.to_rfc3339()),
        );
    }
    // Staff who phoned the customer about the appointment already did what a
    // reminder would do; other notices (booking, update, cancellation) still
    // leave written evidence the customer may need.
    if i.purpose.is_reminder()
        && let Some(at) = c.manual_contact_at
        && at > i.created_at
    {
        return cancel(
            CancelReason::ManualContact,
            format!("staff contacted the customer at {}", at.to_rfc3339()),
        );
    }
    if let Some(why) = consent_refusal(i.category, contact) {
        return cancel(CancelReason::OptedOut, why);
    }
    if let Some(exp) = i.expires_at
        && exp <= now
    {
        return cancel(CancelReason::Expired, format!("expired at {}", exp.to_rfc3339()));
    }
    if let Some(until) = quiet_until(rules, now) {
        return Validity::Defer {
            until,
            why: "quiet hours: deferred to the end of the window".into(),
        };
    }
    if rules.daily_cap > 0 && sent_today >= rules.daily_cap {
        return Validity::Defer {
            until: next_local_midnight(rules.tz, now),
            why: format!(
                "daily cap of {} message(s) for this recipient reached: deferred to the next day",
                rules.daily_cap
            ),
        };
    }
    Validity::Valid
}

/// Marketing needs consent and no opt-out — an opt-out is never reactivated
/// by later consent or a later order. Transactional messages only stop on
/// an explicit transactional opt-out.
fn consent_refusal(category: Category, contact: Option<&ContactFacts>) -> Option<String> {
    match category {
        Category::Marketing => match contact {
            None => Some("marketing message without a known contact or consent".into()),
            Some(k) => match k.opt_out_marketing_at {
                Some(at) => Some(format!("opted out of marketing at {}", at.to_rfc3339())),
                None if !k.consent_marketing => Some("no marketing consent".into()),
                None => None,
            },
        },
        Category::Transactional => contact
            .and_then(|k| k.opt_out_transactional_at)
            .map(|at| format!("opted out of all messages at {}", at.to_rfc3339())),
    }
}

/// When `now` falls inside the quiet window, the instant the window ends:
/// the first occurrence of the end's wall-clock time strictly after `now`.
/// Always strictly forward, so a deferred message is never due again at
/// once: where the end falls in a repeated hour (a DST fall-back), the
/// occurrence still ahead, not the one already past; where it falls in a
/// skipped hour, the first valid instant after the gap.
pub fn quiet_until(rules: &Rules, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let (start, end) = rules.quiet_hours?;
    if start == end {
        return None;
    }
    let local = now.with_timezone(&rules.tz);
    let minute = {
        use chrono::Timelike;
        local.hour() * 60 + local.minute()
    };
    let inside = if start < end {
        minute >= start && minute < end
    } else {
        minute >= start || minute < end
    };
    if !inside {
        return None;
    }
    let t = NaiveTime::from_hms_opt(end / 60, end % 60, 0)?;
    // Today's end, else tomorrow's (a window that wraps midnight, entered
    // in the evening); the day after covers an end that a transition moved
    // behind `now`.
    let today = local.date_naive();
    let days = [
        Some(today),
        today.succ_opt(),
        today.succ_opt().and_then(|d| d.succ_opt()),
    ];
    days.into_iter()
        .flatten()
        .flat_map(|d| local_instants(rules.tz, d.and_time(t)))
        .filter(|at| *at > now)
        .min()
        .or(Some(now + Duration::minutes(1)))
}
/// Start of the next operating day in `tz`.
pub fn next_local_midnight(tz: Tz, now: DateTime<Utc>) -> DateTime<Utc> {
    let local = now.with_timezone(&tz);
    match local.date_naive().succ_opt() {
        Some(d) => local_instant(tz, d.and_time(NaiveTime::MIN)),
        None => now + Duration::days(1),
    }
}

/// Start of `now`'s operating day in `tz`.
pub fn local_midnight(tz: Tz, now: DateTime<Utc>) -> DateTime<Utc> {
    local_instant(tz, now.with_timezone(&tz).date_naive().and_time(NaiveTime::MIN))
}

/// A local wall-clock time as an instant; in a DST gap, the first valid
/// instant after it (an hour later at worst).
fn local_instant(tz: Tz, naive: chrono::NaiveDateTime) -> DateTime<Utc> {
    local_instants(tz, naive)[0]
}

/// Every instant a local wall-clock time names, earliest first: one, two
/// in a repeated hour, or, in a skipped hour, the first valid instant
/// after the gap (the transition itself).
fn local_instants(tz: Tz, naive: chrono::NaiveDateTime) -> Vec<DateTime<Utc>> {
    match tz.from_local_datetime(&naive) {
        chrono::LocalResult::Single(t) => vec![t.with_timezone(&Utc)],
        chrono::LocalResult::Ambiguous(a, b) => vec![a.with_timezone(&Utc), b.with_timezone(&Utc)],
        chrono::LocalResult::None => vec![first_after_gap(tz, naive)],
    }
}

/// The first valid instant after the gap `naive` falls in: the instant
/// the clocks jumped at (gaps are whole minutes, a few hours at most).
fn first_after_gap(tz: Tz, naive: chrono::NaiveDateTime) -> DateTime<Utc> {
    (1..=24 * 60)
        .find_map(|m| tz.from_local_datetime(&(naive + Duration::minutes(m))).earliest())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| Utc.from_utc_datetime(&naive))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::America::Lima;

    // 2026-11-29 15:00 Lima (UTC-5).
    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 20, 0, 0).unwrap()
    }
    fn lima(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Lima.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap().with_timezone(&Utc)
    }
    fn intention() -> IntentionFacts {
        IntentionFacts {
            commitment_version: 2,
            purpose: Purpose::Reminder { minutes: 1440 },
            category: Category::Transactional,
            asks_confirmation: true,
            expires_at: Some(lima(30, 9, 30)),
            created_at: lima(28, 10, 0),
        }
    }
    fn commitment() -> CommitmentFacts {
        CommitmentFacts {
            kind: CommitmentKind::Appointment,
            cancelled: false,
            version: 2,
            starts_at: Some(lima(30, 9, 30)),
            confirmed_at: None,
            manual_contact_at: None,
        }
    }
    fn rules() -> Rules {
        Rules {
            quiet_hours: Some((21 * 60, 7 * 60)),
            daily_cap: 3,
            tz: Lima,
        }
    }
    fn run(
        i: &IntentionFacts,
        c: &CommitmentFacts,
        k: Option<&ContactFacts>,
        sent: u32,
        at: DateTime<Utc>,
    ) -> Validity {
        check(i, c, k, sent, &rules(), at)
    }
    fn reason(v: &Validity) -> Option<CancelReason> {
        match v {
            Validity::Cancel { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    #[test]
    fn a_pertinent_reminder_is_valid() {
        assert_eq!(run(&intention(), &commitment(), None, 0, now()), Validity::Valid);
        assert_eq!(
            run(&intention(), &commitment(), Some(&ContactFacts::default()), 2, now()),
            Validity::Valid
        );
    }

    #[test]
    fn cancelled_commitment_closes_everything_but_its_cancellation_notice() {
        let c = CommitmentFacts {
            cancelled: true,
            version: 3,
            ..commitment()
        };
        let v = run(&intention(), &c, None, 0, now());
        assert_eq!(reason(&v), Some(CancelReason::CommitmentCancelled));
        let notice = IntentionFacts {
            purpose: Purpose::Cancellation,
            commitment_version: 3,
            asks_confirmation: false,
            ..intention()
        };
        assert_eq!(run(&notice, &c, None, 0, now()), Validity::Valid);
    }

    #[test]
    fn another_version_is_superseded_for_appointments_only() {
        let c = CommitmentFacts {
            version: 3,
            ..commitment()
        };
        let v = run(&intention(), &c, None, 0, now());
        assert_eq!(reason(&v), Some(CancelReason::Superseded));
        if let Validity::Cancel { explanation, .. } = v {
            assert!(
                explanation.contains("v2") && explanation.contains("v3"),
                "{explanation}"
            );
        }
        let order = CommitmentFacts {
            kind: CommitmentKind::Order,
            starts_at: None,
            ..c
        };
        let notice = IntentionFacts {
            purpose: Purpose::Order {
                event: "confirmado".into(),
            },
            asks_confirmation: false,
            expires_at: None,
            ..intention()
        };
        assert_eq!(run(&notice, &order, None, 0, now()), Validity::Valid);
    }

    #[test]
    fn an_appointment_already_started_is_in_the_past() {
        let c = CommitmentFacts {
            starts_at: Some(lima(29, 14, 0)),
            ..commitment()
        };
        let i = IntentionFacts {
            expires_at: None,
            ..intention()
        };
        assert_eq!(reason(&run(&i, &c, None, 0, now())), Some(CancelReason::InPast));
        // Exactly at the start is past too.
        let c = CommitmentFacts {
            starts_at: Some(now()),
            ..commitment()
        };
        assert_eq!(reason(&run(&i, &c, None, 0, now())), Some(CancelReason::InPast));
    }

    #[test]
    fn confirmation_closes_only_reminders_that_ask_for_it() {
        let c = CommitmentFacts {
            confirmed_at: Some(lima(29, 10, 0)),
            ..commitment()
        };
        assert_eq!(
            reason(&run(&intention(), &c, None, 0, now())),
            Some(CancelReason::AlreadyConfirmed)
        );
        let plain = IntentionFacts {
            asks_confirmation: false,
            purpose: Purpose::Reminder { minutes: 120 },
            ..intention()
        };
        assert_eq!(run(&plain, &c, None, 0, now()), Validity::Valid);
    }

    #[test]
    fn manual_contact_after_planning_closes_reminders_only() {
        let c = CommitmentFacts {
            manual_contact_at: Some(lima(29, 11, 0)),
            ..commitment()
        };
        assert_eq!(
            reason(&run(&intention(), &c, None, 0, now())),
            Some(CancelReason::ManualContact)
        );
        // Contact before the intention was created does not cover it.
        let newer = IntentionFacts {
            created_at: lima(29, 12, 0),
            ..intention()
        };
        assert_eq!(run(&newer, &c, None, 0, now()), Validity::Valid);
        let booking = IntentionFacts {
            purpose: Purpose::Booking,
            asks_confirmation: false,
            ..intention()
        };
        assert_eq!(run(&booking, &c, None, 0, now()), Validity::Valid);
    }

    #[test]
    fn consent_rules_per_category() {
        let marketing = IntentionFacts {
            category: Category::Marketing,
            ..intention()
        };
        let consent = ContactFacts {
            consent_marketing: true,
            ..Default::default()
        };
        assert_eq!(
            run(&marketing, &commitment(), Some(&consent), 0, now()),
            Validity::Valid
        );
        let none = ContactFacts::default();
        assert_eq!(
            reason(&run(&marketing, &commitment(), Some(&none), 0, now())),
            Some(CancelReason::OptedOut)
        );
        assert_eq!(
            reason(&run(&marketing, &commitment(), None, 0, now())),
            Some(CancelReason::OptedOut)
        );
        // A marketing opt-out is never reactivated by a later consent.
        let opted = ContactFacts {
            consent_marketing: true,
            opt_out_marketing_at: Some(lima(1, 9, 0)),
            ..Default::default()
        };
        assert_eq!(
            reason(&run(&marketing, &commitment(), Some(&opted), 0, now())),
            Some(CancelReason::OptedOut)
        );
        // …and does not stop transactional messages.
        assert_eq!(
            run(&intention(), &commitment(), Some(&opted), 0, now()),
            Validity::Valid
        );
        let all_out = ContactFacts {
            opt_out_transactional_at: Some(lima(1, 9, 0)),
            ..Default::default()
        };
        assert_eq!(
            reason(&run(&intention(), &commitment(), Some(&all_out), 0, now())),
            Some(CancelReason::OptedOut)
        );
    }

    #[test]
    fn expiry() {
        let i = IntentionFacts {
            expires_at: Some(now()),
            ..intention()
        };
        assert_eq!(
            reason(&run(&i, &commitment(), None, 0, now())),
            Some(CancelReason::Expired)
        );
        let i = IntentionFacts {
            expires_at: None,
            ..intention()
        };
        assert_eq!(run(&i, &commitment(), None, 0, now()), Validity::Valid);
    }

    #[test]
    fn closing_reasons_come_before_deferrals() {
        let c = CommitmentFacts {
            cancelled: true,
            ..commitment()
        };
        // 23:00 Lima, quiet hours, cap reached: still a cancellation.
        let v = run(&intention(), &c, None, 99, lima(29, 23, 0));
        assert_eq!(reason(&v), Some(CancelReason::CommitmentCancelled));
    }

    #[test]
    fn quiet_hours_defer_to_the_end_of_the_window() {
        let c = commitment();
        // Evening: window wraps midnight, ends tomorrow 07:00.
        match run(&intention(), &c, None, 0, lima(29, 22, 15)) {
            Validity::Defer { until, .. } => assert_eq!(until, lima(30, 7, 0)),
            v => panic!("{v:?}"),
        }
        // Early morning: ends today 07:00.
        match run(&intention(), &c, None, 0, lima(30, 3, 0)) {
            Validity::Defer { until, .. } => assert_eq!(until, lima(30, 7, 0)),
            v => panic!("{v:?}"),
        }
        // Edges: 21:00 is inside, 07:00 is outside.
        assert!(matches!(
            run(&intention(), &c, None, 0, lima(29, 21, 0)),
            Validity::Defer { .. }
        ));
        assert_eq!(run(&intention(), &c, None, 0, lima(30, 7, 0)), Validity::Valid);
        assert_eq!(run(&intention(), &c, None, 0, lima(29, 20, 59)), Validity::Valid);
        // A same-day window.
        let r = Rules {
            quiet_hours: Some((13 * 60, 14 * 60)),
            ..rules()
        };
        assert_eq!(quiet_until(&r, lima(29, 13, 30)), Some(lima(29, 14, 0)));
        assert_eq!(quiet_until(&r, lima(29, 14, 0)), None);
        // No window, or an empty one.
        let r = Rules {
            quiet_hours: None,
            ..rules()
        };
        assert_eq!(quiet_until(&r, lima(29, 23, 0)), None);
        let r = Rules {
            quiet_hours: Some((0, 0)),
            ..rules()
        };
        assert_eq!(quiet_until(&r, lima(29, 23, 0)), None);
    }

    #[test]
    fn the_daily_cap_defers_to_the_next_day() {
        match run(&intention(), &commitment(), None, 3, now()) {
            Validity::Defer { until, why } => {
                assert_eq!(until, lima(30, 0, 0));
                assert!(why.contains("daily cap"), "{why}");
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(run(&intention(), &commitment(), None, 2, now()), Validity::Valid);
        let uncapped = Rules {
            daily_cap: 0,
            ..rules()
        };
        assert_eq!(
            check(&intention(), &commitment(), None, 500, &uncapped, now()),
            Validity::Valid
        );
    }

    /// Santiago falls back at 2026-04-05 00:00 (-03) to 2026-04-04 23:00
    /// (-04): 23:00–23:59 of the 4th happens twice.
    fn santiago(h: u32, m: u32, offset_hours: i32) -> DateTime<Utc> {
        chrono::FixedOffset::west_opt(offset_hours * 3600)
            .unwrap()
            .with_ymd_and_hms(2026, 4, 4, h, m, 0)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_quiet_end_in_a_repeated_hour_is_the_occurrence_still_ahead() {
        let r = Rules {
            quiet_hours: Some((22 * 60, 23 * 60 + 30)),
            daily_cap: 0,
            tz: chrono_tz::America::Santiago,
        };
        // Before the fall-back: the first 23:30.
        assert_eq!(quiet_until(&r, santiago(22, 10, 3)), Some(santiago(23, 30, 3)));
        assert_eq!(quiet_until(&r, santiago(23, 10, 3)), Some(santiago(23, 30, 3)));
        // Past the first 23:30 (23:40 -03) the wall clock goes back to
        // 23:00 -04, inside the window again: the second 23:30, not the
        // first, which is already past (the loop of issue 24).
        assert_eq!(quiet_until(&r, santiago(23, 40, 3)), None);
        assert_eq!(quiet_until(&r, santiago(23, 10, 4)), Some(santiago(23, 30, 4)));
        assert_eq!(quiet_until(&r, santiago(23, 29, 4)), Some(santiago(23, 30, 4)));
        assert_eq!(quiet_until(&r, santiago(23, 30, 4)), None);
        // Every instant of the night defers strictly forward.
        let mut at = santiago(21, 0, 3);
        while at < santiago(23, 59, 4) {
            if let Some(until) = quiet_until(&r, at) {
                assert!(until > at, "{at}: deferred to {until}");
                assert!(until - at <= Duration::hours(2), "{at}: deferred to {until}");
            }
            at += Duration::minutes(1);
        }
    }

    #[test]
    fn a_quiet_end_in_a_skipped_hour_is_the_first_valid_instant() {
        // Santiago springs forward at 2026-09-06 00:00 (-04) to 01:00 (-03):
        // 00:00–00:59 of the 6th never happens.
        let r = Rules {
            quiet_hours: Some((22 * 60, 30)),
            daily_cap: 0,
            tz: chrono_tz::America::Santiago,
        };
        let at = |d, h, m, off: i32| {
            chrono::FixedOffset::west_opt(off * 3600)
                .unwrap()
                .with_ymd_and_hms(2026, 9, d, h, m, 0)
                .unwrap()
                .with_timezone(&Utc)
        };
        assert_eq!(quiet_until(&r, at(5, 23, 0, 4)), Some(at(6, 1, 0, 3)));
        assert!(quiet_until(&r, at(6, 1, 0, 3)).is_none());
        assert_eq!(next_local_midnight(r.tz, at(5, 12, 0, 4)), at(6, 1, 0, 3));
    }

    #[test]
    fn local_day_boundaries() {
        assert_eq!(local_midnight(Lima, now()), lima(29, 0, 0));
        assert_eq!(next_local_midnight(Lima, now()), lima(30, 0, 0));
    }
}
