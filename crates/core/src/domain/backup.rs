//! Backups of a SQLite ledger (`unavez ledger backup`, `[backup]` in
//! `serve`): the rules only, no I/O. A backup file is named after the UTC
//! time it was taken, so a listing sorts oldest to newest and retention can
//! tell the files it made from anything else a technician keeps in the same
//! directory; how often backups run and whether they are late or failing is
//! decided here too, so `/metrics` and the console judge them alike.

use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use serde::Serialize;

/// Every backup file starts with this.
pub const PREFIX: &str = "unavez-backup-";
/// And ends with this.
pub const SUFFIX: &str = ".db";
/// The UTC time between them, to the millisecond (two backups in one
/// second must not collide), fixed-width so names sort by time.
const TIME_FORMAT: &str = "%Y%m%dT%H%M%S%.3fZ";

/// The file name of a backup taken at `at`:
/// `unavez-backup-20261201T203512.345Z.db`.
pub fn file_name(at: DateTime<Utc>) -> String {
    format!("{PREFIX}{}{SUFFIX}", at.format(TIME_FORMAT))
}

/// When the backup named `name` was taken, if `name` is exactly a name
/// [`file_name`] gives; anything else (a copy a person renamed, another
/// tool's file) is not ours, and retention never touches it.
pub fn parse_name(name: &str) -> Option<DateTime<Utc>> {
    let time = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let at = NaiveDateTime::parse_from_str(time, TIME_FORMAT).ok()?.and_utc();
    (file_name(at) == name).then_some(at)
}

/// The backups to delete so that only the newest `keep` remain, oldest
/// first. Names that are not backups ([`parse_name`]) are never chosen;
/// `keep` 0 keeps everything (retention off).
pub fn to_prune(names: &[String], keep: u32) -> Vec<String> {
    if keep == 0 {
        return Vec::new();
    }
    let mut ours: Vec<(DateTime<Utc>, &String)> = names.iter().filter_map(|n| Some((parse_name(n)?, n))).collect();
    ours.sort();
    let surplus = ours.len().saturating_sub(keep as usize);
    ours.into_iter().take(surplus).map(|(_, n)| n.clone()).collect()
}

/// The newest backup among `names`, and when it was taken.
pub fn newest(names: &[String]) -> Option<DateTime<Utc>> {
    names.iter().filter_map(|n| parse_name(n)).max()
}

/// When the next periodic backup is due: `every` after the newest one, or
/// at once when there is none (or it is older than that). A restarted
/// `serve` neither takes a backup it does not need nor waits a whole
/// period for one it does.
pub fn next_due(newest: Option<DateTime<Utc>>, every: Duration, now: DateTime<Utc>) -> DateTime<Utc> {
    match newest {
        // A backup "from the future" (the clock went back) waits no more
        // than one period.
        Some(at) => (at + every).clamp(now, now + every),
        None => now,
    }
}

/// The shortest `[backup] every`: a backup reads the whole ledger.
pub const MIN_EVERY: Duration = Duration::minutes(1);

/// Parses a period written as a number and a unit: `90s`, `30m`, `1h`,
/// `1d` (whitespace between them allowed). At least [`MIN_EVERY`].
pub fn parse_every(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a period: write a number and a unit, like \"1h\", \"30m\" or \"1d\""))?;
    let unit_secs = match unit.trim() {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3_600,
        "d" => 86_400,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use s, m, h or d, like \"1h\")"
            ));
        }
    };
    // A year is far beyond any useful backup period; the cap keeps the
    // product from overflowing.
    let secs = n
        .checked_mul(unit_secs)
        .filter(|s| *s <= 366 * 86_400)
        .ok_or_else(|| format!("{text:?} is longer than a year"))?;
    let every = Duration::seconds(secs);
    if every < MIN_EVERY {
        return Err(format!(
            "{text:?} is shorter than a minute: a backup reads the whole ledger"
        ));
    }
    Ok(every)
}

/// What the backup alerts look at: the periodic backups' promise and how
/// they went (filled in by whoever runs or can see them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackupMeasure {
    /// `[backup] every`: the reader judges staleness by this promise.
    pub every: Duration,
    /// Since when backups are expected (the service's start): a ledger that
    /// never had a backup is late counting from here.
    pub watched_since: DateTime<Utc>,
    pub last_success: Option<DateTime<Utc>>,
    pub last_failure: Option<DateTime<Utc>>,
}

impl BackupMeasure {
    /// The last attempt failed: no success since the last failure.
    pub fn failing(&self) -> bool {
        match (self.last_failure, self.last_success) {
            (Some(f), Some(s)) => f > s,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// How old the newest good backup is (or how long backups have been
    /// expected without one); never negative.
    pub fn age(&self, now: DateTime<Utc>) -> Duration {
        (now - self.last_success.unwrap_or(self.watched_since)).max(Duration::zero())
    }

    /// Two periods without a good backup: one missed run can be a reboot,
    /// two are a problem.
    pub fn stale_after(&self) -> Duration {
        self.every * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, h, m, s).unwrap()
    }

    #[test]
    fn names_carry_the_utc_time_and_sort_by_it() {
        let t = at(20, 35, 12) + Duration::milliseconds(345);
        let name = file_name(t);
        assert_eq!(name, "unavez-backup-20261201T203512.345Z.db");
        assert_eq!(parse_name(&name), Some(t));
        let later = file_name(at(20, 35, 12) + Duration::milliseconds(346));
        assert!(later > name);
        for foreign in [
            "unavez.db",
            "unavez-backup-20261201T203512.345Z.db.bak",
            "unavez-backup-20261201T203512Z.db",
            "unavez-backup-2026-12-01.db",
            "copia-unavez-backup-20261201T203512.345Z.db",
            "unavez-backup-20261301T203512.345Z.db",
        ] {
            assert_eq!(parse_name(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn retention_deletes_only_our_oldest_files() {
        let names: Vec<String> = vec![
            file_name(at(3, 0, 0)),
            "notas.txt".into(),
            file_name(at(1, 0, 0)),
            file_name(at(2, 0, 0)),
            "unavez-backup-manual.db".into(),
            file_name(at(4, 0, 0)),
        ];
        assert_eq!(
            to_prune(&names, 2),
            vec![file_name(at(1, 0, 0)), file_name(at(2, 0, 0))]
        );
        assert!(to_prune(&names, 4).is_empty());
        assert!(to_prune(&names, 0).is_empty(), "0 keeps everything");
        assert_eq!(newest(&names), Some(at(4, 0, 0)));
        assert_eq!(newest(&["notas.txt".to_string()]), None);
    }

    #[test]
    fn the_next_backup_is_one_period_after_the_newest() {
        let h = Duration::hours(1);
        let now = at(12, 0, 0);
        assert_eq!(next_due(None, h, now), now);
        assert_eq!(next_due(Some(at(11, 30, 0)), h, now), at(12, 30, 0));
        assert_eq!(next_due(Some(at(9, 0, 0)), h, now), now, "overdue: at once");
        assert_eq!(next_due(Some(at(15, 0, 0)), h, now), at(13, 0, 0), "future: one period");
    }

    #[test]
    fn periods_are_a_number_and_a_unit() {
        assert_eq!(parse_every("1h"), Ok(Duration::hours(1)));
        assert_eq!(parse_every(" 30 m "), Ok(Duration::minutes(30)));
        assert_eq!(parse_every("90s"), Ok(Duration::seconds(90)));
        assert_eq!(parse_every("1d"), Ok(Duration::days(1)));
        for bad in ["", "h", "1", "1w", "-1h", "30s", "1.5h", "99999999999999999d", "400d"] {
            assert!(parse_every(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_failure_after_the_last_success_is_failing_and_age_counts_from_the_start() {
        let m = BackupMeasure {
            every: Duration::hours(1),
            watched_since: at(8, 0, 0),
            last_success: None,
            last_failure: None,
        };
        assert!(!m.failing());
        assert_eq!(m.age(at(9, 0, 0)), Duration::hours(1));
        assert_eq!(m.age(at(7, 0, 0)), Duration::zero());
        let failed = BackupMeasure {
            last_failure: Some(at(9, 0, 0)),
            ..m
        };
        assert!(failed.failing());
        let recovered = BackupMeasure {
            last_success: Some(at(10, 0, 0)),
            ..failed
        };
        assert!(!recovered.failing());
        assert_eq!(recovered.age(at(10, 30, 0)), Duration::minutes(30));
        assert_eq!(recovered.stale_after(), Duration::hours(2));
    }
}
