//! Calendar feed rows (migration 0013): each feed's status row with its
//! poller's lease, the previous successful poll's upcoming events, and
//! disappearances held for a person. Rows only: what a poll means is
//! `domain::feed`, what to write is `unavez_app::feed`'s choice.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Result, Tx, ms};
use crate::domain::feed::Seen;
use crate::rows::Cols;
use crate::vals;

/// A feed's status row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedRow {
    pub name: String,
    /// Scheme and host of its URL, never the path or query.
    pub origin: String,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub etag: Option<String>,
    #[serde(skip)]
    pub last_modified: Option<String>,
    pub last_poll_at: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_failure: Option<String>,
    /// The first failure since the last success.
    pub failing_since: Option<DateTime<Utc>>,
    pub events_seen: i64,
    pub events_applied: i64,
    /// Disappearances held for a person.
    pub held: i64,
}

const FEED_COLS: &str = "f.name, f.origin, f.lease_owner, f.lease_until, f.etag, f.last_modified, f.last_poll_at,
    f.last_success_at, f.last_failure_at, f.last_failure, f.failing_since, f.events_seen, f.events_applied,
    (SELECT count(*) FROM feed_held h WHERE h.feed = f.name)";

fn feed_row(r: &dyn Cols) -> std::result::Result<FeedRow, String> {
    Ok(FeedRow {
        name: r.text(0)?,
        origin: r.text(1)?,
        lease_owner: r.opt_text(2)?,
        lease_until: r.opt_time(3)?,
        etag: r.opt_text(4)?,
        last_modified: r.opt_text(5)?,
        last_poll_at: r.opt_time(6)?,
        last_success_at: r.opt_time(7)?,
        last_failure_at: r.opt_time(8)?,
        last_failure: r.opt_text(9)?,
        failing_since: r.opt_time(10)?,
        events_seen: r.int(11)?,
        events_applied: r.int(12)?,
        held: r.int(13)?,
    })
}

fn seen_row(r: &dyn Cols) -> std::result::Result<Seen, String> {
    Ok(Seen {
        reference: r.text(0)?,
        uid: r.text(1)?,
        starts_at: r.time(2)?,
    })
}

/// A successful poll's validators and counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedSuccess<'a> {
    pub etag: Option<&'a str>,
    pub last_modified: Option<&'a str>,
    pub events_seen: i64,
    pub events_applied: i64,
}

impl Tx<'_> {
    /// Takes (or renews) the lease on feed `name` for `owner` until
    /// `until`, creating its row: granted when no one holds it, `owner`
    /// already does, or the holder's lease lapsed before `now`. Returns
    /// whether `owner` holds it now.
    pub fn feed_lease(
        &self,
        name: &str,
        origin: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let n = self.db().exec(
            "INSERT INTO feeds(name, origin, lease_owner, lease_until) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(name) DO UPDATE SET origin = excluded.origin, lease_owner = excluded.lease_owner,
                 lease_until = excluded.lease_until
             WHERE feeds.lease_owner IS NULL OR feeds.lease_owner = excluded.lease_owner
                 OR feeds.lease_until IS NULL OR feeds.lease_until < ?5",
            &vals![name, origin, owner, ms(until), ms(now)],
        )?;
        Ok(n > 0)
    }

    /// Gives the lease up (a stopping `serve`), if `owner` holds it.
    pub fn feed_release_lease(&self, name: &str, owner: &str) -> Result<()> {
        self.db().exec(
            "UPDATE feeds SET lease_owner = NULL, lease_until = NULL WHERE name = ?1 AND lease_owner = ?2",
            &vals![name, owner],
        )?;
        Ok(())
    }

    pub fn feed(&self, name: &str) -> Result<Option<FeedRow>> {
        Ok(self.db().row(
            &format!("SELECT {FEED_COLS} FROM feeds f WHERE f.name = ?1"),
            &vals![name],
            feed_row,
        )?)
    }

    /// Every feed's row, by name.
    pub fn feeds(&self) -> Result<Vec<FeedRow>> {
        Ok(self.db().rows(
            &format!("SELECT {FEED_COLS} FROM feeds f ORDER BY f.name"),
            &[],
            feed_row,
        )?)
    }

    /// A poll answered 304: only the poll time moves (and it counts as a
    /// success: the feed is reachable and unchanged).
    pub fn feed_unchanged(&self, name: &str, now: DateTime<Utc>) -> Result<()> {
        self.db().exec(
            "UPDATE feeds SET last_poll_at = ?2, last_success_at = ?2, failing_since = NULL WHERE name = ?1",
            &vals![name, ms(now)],
        )?;
        Ok(())
    }

    /// A successful poll: its validators and counts.
    pub fn feed_success(&self, name: &str, s: &FeedSuccess<'_>, now: DateTime<Utc>) -> Result<()> {
        self.db().exec(
            "UPDATE feeds SET last_poll_at = ?2, last_success_at = ?2, failing_since = NULL, etag = ?3,
                 last_modified = ?4, events_seen = ?5, events_applied = ?6
             WHERE name = ?1",
            &vals![name, ms(now), s.etag, s.last_modified, s.events_seen, s.events_applied],
        )?;
        Ok(())
    }

    /// A failed poll and why; the first failure since the last success is
    /// kept as `failing_since`.
    pub fn feed_failure(&self, name: &str, reason: &str, now: DateTime<Utc>) -> Result<()> {
        self.db().exec(
            "UPDATE feeds SET last_poll_at = ?2, last_failure_at = ?2, last_failure = ?3,
                 failing_since = coalesce(failing_since, ?2)
             WHERE name = ?1",
            &vals![name, ms(now), reason],
        )?;
        Ok(())
    }

    /// The previous successful poll's upcoming events.
    pub fn feed_seen(&self, name: &str) -> Result<Vec<Seen>> {
        Ok(self.db().rows(
            "SELECT ref, uid, starts_at FROM feed_seen WHERE feed = ?1 ORDER BY ref",
            &vals![name],
            seen_row,
        )?)
    }

    /// Replaces the baseline with `rows`.
    pub fn feed_replace_seen(&self, name: &str, rows: &[Seen]) -> Result<()> {
        let db = self.db();
        db.exec("DELETE FROM feed_seen WHERE feed = ?1", &vals![name])?;
        for s in rows {
            db.exec(
                "INSERT INTO feed_seen(feed, ref, uid, starts_at) VALUES (?1, ?2, ?3, ?4)",
                &vals![name, s.reference.as_str(), s.uid.as_str(), ms(s.starts_at)],
            )?;
        }
        Ok(())
    }

    /// Disappearances held for a person.
    pub fn feed_held(&self, name: &str) -> Result<Vec<Seen>> {
        Ok(self.db().rows(
            "SELECT ref, uid, starts_at FROM feed_held WHERE feed = ?1 ORDER BY starts_at, ref",
            &vals![name],
            seen_row,
        )?)
    }

    /// Holds `rows` (their commitments' planned messages wait too).
    pub fn feed_hold(&self, name: &str, rows: &[Seen], now: DateTime<Utc>) -> Result<()> {
        for s in rows {
            self.db().exec(
                "INSERT INTO feed_held(feed, ref, uid, starts_at, commitment_id, held_at)
                 VALUES (?1, ?2, ?3, ?4, (SELECT id FROM commitments WHERE ref = ?2), ?5)
                 ON CONFLICT(feed, ref) DO NOTHING",
                &vals![name, s.reference.as_str(), s.uid.as_str(), ms(s.starts_at), ms(now)],
            )?;
        }
        Ok(())
    }

    /// Lets held rows go (confirmed, discarded or back in the feed).
    pub fn feed_unhold(&self, name: &str, references: &[&str]) -> Result<usize> {
        let mut n = 0;
        for r in references {
            n += self
                .db()
                .exec("DELETE FROM feed_held WHERE feed = ?1 AND ref = ?2", &vals![name, *r])?;
        }
        Ok(n)
    }
}
