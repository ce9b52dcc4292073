//! The operator action log: who did what, on what, why, and with what result.

use chrono::{DateTime, Utc};
use rusqlite::params;
use serde::Serialize;

use super::{Result, Tx, from_ms, ms};

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
        Ok(self.conn().query_row(
            "INSERT INTO operator_actions(at, operator, role, action, intention_id, commitment_id, scope, reason, result, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
            params![ms(at), a.operator, a.role, a.action, a.intention_id, a.commitment_id, a.scope, a.reason, a.result, a.detail],
            |r| r.get(0),
        )?)
    }

    /// Most recent first.
    pub fn operator_actions(&self, limit: u32) -> Result<Vec<OperatorActionRow>> {
        let mut stmt = self.conn().prepare_cached(
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
