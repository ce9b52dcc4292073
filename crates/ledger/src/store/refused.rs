//! Booking events refused as conflicts (migration 0003): kept apart from
//! the event log, counted each time they are presented again, and shown to
//! a person until the booking system settles them with a newer version.

use chrono::{DateTime, Utc};
use rusqlite::{Row, params};
use serde::Serialize;

use super::{Result, StoreError, Tx, from_ms, ms};
use crate::domain::counter::Counter;
use crate::domain::event::ConflictKind;

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

fn refused_row(r: &Row<'_>) -> rusqlite::Result<RefusedEventRow> {
    let corrupt =
        |detail: String| rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, detail.into());
    let conflict: String = r.get(5)?;
    let fields: String = r.get(6)?;
    let payload: String = r.get(9)?;
    Ok(RefusedEventRow {
        id: r.get(0)?,
        event_id: r.get(1)?,
        commitment_ref: r.get(2)?,
        event_type: r.get(3)?,
        version: r.get(4)?,
        conflict: ConflictKind::parse(&conflict).ok_or_else(|| corrupt(format!("unknown conflict {conflict:?}")))?,
        fields: serde_json::from_str(&fields).map_err(|e| corrupt(e.to_string()))?,
        reason: r.get(7)?,
        source: r.get(8)?,
        // The payload was serialized by us; an unreadable one is kept as text.
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        first_seen_at: from_ms(r.get(10)?),
        last_seen_at: from_ms(r.get(11)?),
        times: r.get(12)?,
        open: r.get(13)?,
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
        let id = self.conn()?.query_row(
            "INSERT INTO refused_events(event_id, commitment_ref, type, version, conflict, fields, reason, source,
                 payload, fingerprint, first_seen_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
             ON CONFLICT(event_id, fingerprint) DO UPDATE SET times = times + 1,
                 last_seen_at = excluded.last_seen_at, version = excluded.version, fields = excluded.fields,
                 reason = excluded.reason, source = excluded.source
             RETURNING id",
            params![
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
            |r| r.get(0),
        )?;
        self.bump_counter(Counter::RefusedEvents, 1)?;
        Ok(id)
    }

    /// The refused events filed under `reference`, oldest first.
    pub fn refused_events(&self, reference: &str) -> Result<Vec<RefusedEventRow>> {
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT r.id, r.event_id, r.commitment_ref, r.type, r.version, r.conflict, r.fields, r.reason, r.source,
                    r.payload, r.first_seen_at, r.last_seen_at, r.times,
                    coalesce((SELECT c.version <= r.version FROM commitments c WHERE c.ref = r.commitment_ref), 1)
             FROM refused_events r WHERE r.commitment_ref = ?1 ORDER BY r.id",
        )?;
        let rows = stmt
            .query_map([reference], refused_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}
