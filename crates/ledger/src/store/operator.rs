//! The operator action log: who did what, on what, why, and with what
//! result; and the acknowledgements a resend of a delivered message needs.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Result, StoreError, Tx, from_ms, ms};

/// One operator action to record. `reason` must be non-empty (the schema
/// refuses blank reasons too).
pub struct OperatorAction<'a> {
    pub operator: &'a str,
    pub role: &'a str,
    pub action: &'a str,
    pub intention_id: Option<i64>,
    pub commitment_id: Option<i64>,
    pub scope: Option<&'a str>,
    pub reason: &'a str,
    pub result: &'a str,
    pub detail: Option<&'a str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OperatorActionRow {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub operator: String,
    pub role: String,
    pub action: String,
    pub intention_id: Option<i64>,
    pub commitment_id: Option<i64>,
    pub scope: Option<String>,
    pub reason: String,
    pub result: String,
    pub detail: Option<String>,
}

impl Tx<'_> {
    pub fn record_operator_action(&self, a: &OperatorAction<'_>, at: DateTime<Utc>) -> Result<i64> {
        Ok(self.conn()?.query_row(
            "INSERT INTO operator_actions(at, operator, role, action, intention_id, commitment_id, scope, reason, result, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
            params![ms(at), a.operator, a.role, a.action, a.intention_id, a.commitment_id, a.scope, a.reason, a.result, a.detail],
            |r| r.get(0),
        )?)
    }

    /// Most recent first.
    pub fn operator_actions(&self, limit: u32) -> Result<Vec<OperatorActionRow>> {
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT id, at, operator, role, action, intention_id, commitment_id, scope, reason, result, detail
             FROM operator_actions ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map([limit], |r| {
                Ok(OperatorActionRow {
                    id: r.get(0)?,
                    at: from_ms(r.get(1)?),
                    operator: r.get(2)?,
                    role: r.get(3)?,
                    action: r.get(4)?,
                    intention_id: r.get(5)?,
                    commitment_id: r.get(6)?,
                    scope: r.get(7)?,
                    reason: r.get(8)?,
                    result: r.get(9)?,
                    detail: r.get(10)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

/// A supervisor's acknowledgement, recorded with the action that authorized
/// a resend, that earlier messages of the intention already reached the
/// customer.
pub struct NewAcknowledgement<'a> {
    pub action_id: i64,
    /// The new resend.
    pub intention_id: i64,
    pub original_id: i64,
    pub operator: &'a str,
    /// What was acknowledged (the delivered/read messages), kept as
    /// evidence of what the supervisor saw.
    pub evidence: &'a serde_json::Value,
}

/// A recorded acknowledgement, as `intents show --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AcknowledgementRow {
    pub action_id: i64,
    pub original_id: i64,
    pub operator: String,
    pub at: DateTime<Utc>,
    pub evidence: serde_json::Value,
}

impl Tx<'_> {
    pub fn record_resend_acknowledgement(&self, a: &NewAcknowledgement<'_>, at: DateTime<Utc>) -> Result<i64> {
        Ok(self.conn()?.query_row(
            "INSERT INTO resend_acknowledgements(action_id, intention_id, original_id, operator, evidence, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            params![
                a.action_id,
                a.intention_id,
                a.original_id,
                a.operator,
                a.evidence.to_string(),
                ms(at)
            ],
            |r| r.get(0),
        )?)
    }

    /// The acknowledgement that authorized resend `intention_id`, if it
    /// needed one.
    pub fn resend_acknowledgement(&self, intention_id: i64) -> Result<Option<AcknowledgementRow>> {
        let row: Option<(i64, i64, String, i64, String)> = self
            .conn()?
            .prepare_cached(
                "SELECT action_id, original_id, operator, at, evidence FROM resend_acknowledgements
                 WHERE intention_id = ?1",
            )?
            .query_row([intention_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()?;
        row.map(|(action_id, original_id, operator, at, evidence)| {
            let evidence = serde_json::from_str(&evidence).map_err(|e| StoreError::Corrupt {
                table: "resend_acknowledgements",
                detail: e.to_string(),
            })?;
            Ok(AcknowledgementRow {
                action_id,
                original_id,
                operator,
                at: from_ms(at),
                evidence,
            })
        })
        .transpose()
    }
}
