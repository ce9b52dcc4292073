//! Booking events refused as conflicts (migration 0003): kept apart from
//! the event log, counted each time they are presented again, and shown to
//! a person until the booking system settles them with a newer version.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Result, StoreError, Tx, ms};
use crate::domain::counter::Counter;
use crate::domain::event::ConflictKind;
use crate::rows::Cols;
use crate::vals;

/// A refusal to record.
#[derive(Debug, Clone)]
pub struct NewRefusal<'a> {
    pub event_id: &'a str,
    /// The commitment it is filed under.
    pub commitment_ref: &'a str,
    /// The event's type (`appointment.scheduled`…).
    pub event_type: &'a str,
    /// The stored version the event conflicted with.
    pub version: i64,
    pub conflict: ConflictKind,
    /// JSON names of the fields that differ.
    pub fields: &'a [String],
    pub reason: &'a str,
    pub source: &'a str,
    /// The event as received (JSON).
    pub payload: &'a str,
    pub fingerprint: &'a str,
}

/// A refused event as `commitments show` and the console list it.
#[derive(Debug, Clone, Serialize)]
pub struct RefusedEventRow {
    pub id: i64,
    pub event_id: String,
    pub commitment_ref: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub version: i64,
    pub conflict: ConflictKind,
    pub fields: Vec<String>,
    pub reason: String,
    pub source: String,
    pub payload: serde_json::Value,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// How many times it was presented.
    pub times: i64,
    /// Still needs a person: the commitment is still at the version the
    /// event conflicted with (no newer version settled it).
    pub open: bool,
}

fn refused_row(r: &dyn Cols) -> std::result::Result<RefusedEventRow, String> {
    let conflict = r.text(5)?;
    let fields = r.text(6)?;
    let payload = r.text(9)?;
    Ok(RefusedEventRow {
        id: r.int(0)?,
        event_id: r.text(1)?,
        commitment_ref: r.text(2)?,
        event_type: r.text(3)?,
        version: r.int(4)?,
        conflict: ConflictKind::parse(&conflict).ok_or_else(|| format!("column 5: unknown conflict {conflict:?}"))?,
        fields: serde_json::from_str(&fields).map_err(|e| format!("column 6: {e}"))?,
        reason: r.text(7)?,
        source: r.text(8)?,
        // The payload was serialized by us; an unreadable one is kept as text.
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        first_seen_at: r.time(10)?,
        last_seen_at: r.time(11)?,
        times: r.int(12)?,
        open: r.flag(13)?,
    })
}

impl Tx<'_> {
    /// Records a refusal; the same event (id and content) presented again
    /// adds to its count instead of adding a row.
    pub fn record_refusal(&self, n: &NewRefusal<'_>, at: DateTime<Utc>) -> Result<i64> {
        let fields = serde_json::to_string(n.fields).map_err(|e| StoreError::Corrupt {
            table: "refused_events",
            detail: e.to_string(),
        })?;
        // `refused_events.times`: PostgreSQL calls the bare name ambiguous
        // with `excluded.times`.
        let id = self
            .db()
            .row(
                "INSERT INTO refused_events(event_id, commitment_ref, type, version, conflict, fields, reason, source,
                 payload, fingerprint, first_seen_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
             ON CONFLICT(event_id, fingerprint) DO UPDATE SET times = refused_events.times + 1,
                 last_seen_at = excluded.last_seen_at, version = excluded.version, fields = excluded.fields,
                 reason = excluded.reason, source = excluded.source
             RETURNING id",
                &vals![
                    n.event_id,
                    n.commitment_ref,
                    n.event_type,
                    n.version,
                    n.conflict.as_str(),
                    fields,
                    n.reason,
                    n.source,
                    n.payload,
                    n.fingerprint,
                    ms(at)
                ],
                |r| r.int(0),
            )?
            .ok_or_else(|| StoreError::Corrupt {
                table: "refused_events",
                detail: "the upsert returned no id".into(),
            })?;
        self.bump_counter(Counter::RefusedEvents, 1)?;
        Ok(id)
    }

    /// The refused events filed under `reference`, oldest first.
    pub fn refused_events(&self, reference: &str) -> Result<Vec<RefusedEventRow>> {
        // Open unless a newer version of the commitment settled it (no
        // commitment: open). `NOT EXISTS` rather than `coalesce(comparison,
        // 1)`, which PostgreSQL refuses (a boolean and an integer); `flag`
        // reads its BOOL and SQLite's 0/1 alike. `ref` is unique, so at most
        // one commitment is compared, as before.
        Ok(self.db().rows(
            "SELECT r.id, r.event_id, r.commitment_ref, r.type, r.version, r.conflict, r.fields, r.reason, r.source,
                    r.payload, r.first_seen_at, r.last_seen_at, r.times,
                    NOT EXISTS (SELECT 1 FROM commitments c WHERE c.ref = r.commitment_ref AND c.version > r.version)
             FROM refused_events r WHERE r.commitment_ref = ?1 ORDER BY r.id",
            &vals![reference],
            refused_row,
        )?)
    }
}
