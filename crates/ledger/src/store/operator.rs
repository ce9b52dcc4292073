//! The operator action log: who did what, on what, why, and with what
//! result; and the acknowledgements a resend of a delivered message needs.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Result, StoreError, Tx, ms};
use crate::rules_sql::{RESEND_ASK_ACTIONS, Sql};
use crate::vals;

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
        let id = self.db().row(
            "INSERT INTO operator_actions(at, operator, role, action, intention_id, commitment_id, scope, reason, result, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
            &vals![ms(at), a.operator, a.role, a.action, a.intention_id, a.commitment_id, a.scope, a.reason, a.result, a.detail],
            |r| r.int(0),
        )?;
        returned(id, "operator_actions")
    }

    /// Most recent first.
    pub fn operator_actions(&self, limit: u32) -> Result<Vec<OperatorActionRow>> {
        Ok(self.db().rows(
            "SELECT id, at, operator, role, action, intention_id, commitment_id, scope, reason, result, detail
             FROM operator_actions ORDER BY id DESC LIMIT ?1",
            &vals![limit],
            |r| {
                Ok(OperatorActionRow {
                    id: r.int(0)?,
                    at: r.time(1)?,
                    operator: r.text(2)?,
                    role: r.text(3)?,
                    action: r.text(4)?,
                    intention_id: r.opt_int(5)?,
                    commitment_id: r.opt_int(6)?,
                    scope: r.opt_text(7)?,
                    reason: r.text(8)?,
                    result: r.text(9)?,
                    detail: r.opt_text(10)?,
                })
            },
        )?)
    }
}

/// The latest resend request, decline or authorization on `?1`.
static RESEND_ASK: Sql = Sql::new(|| {
    format!(
        "SELECT a.action, a.operator, a.reason FROM operator_actions a
             WHERE a.intention_id = ?1 AND a.result = 'done'
               AND a.action IN {RESEND_ASK_ACTIONS}
             ORDER BY a.id DESC LIMIT 1"
    )
});

impl Tx<'_> {
    /// Issue 25 §3: the latest resend request, decline or authorization
    /// done on intention `id` (`action`, `operator`, `reason`).
    pub fn resend_ask(&self, id: i64) -> Result<Option<(String, String, String)>> {
        Ok(self
            .db()
            .row(&RESEND_ASK, &vals![id], |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)))?)
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
        let id = self.db().row(
            "INSERT INTO resend_acknowledgements(action_id, intention_id, original_id, operator, evidence, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            &vals![
                a.action_id,
                a.intention_id,
                a.original_id,
                a.operator,
                a.evidence.to_string(),
                ms(at)
            ],
            |r| r.int(0),
        )?;
        returned(id, "resend_acknowledgements")
    }

    /// The acknowledgement that authorized resend `intention_id`, if it
    /// needed one.
    pub fn resend_acknowledgement(&self, intention_id: i64) -> Result<Option<AcknowledgementRow>> {
        let row = self.db().row(
            "SELECT action_id, original_id, operator, at, evidence FROM resend_acknowledgements
             WHERE intention_id = ?1",
            &vals![intention_id],
            |r| Ok((r.int(0)?, r.int(1)?, r.text(2)?, r.time(3)?, r.text(4)?)),
        )?;
        row.map(|(action_id, original_id, operator, at, evidence)| {
            let evidence = serde_json::from_str(&evidence).map_err(|e| StoreError::Corrupt {
                table: "resend_acknowledgements",
                detail: e.to_string(),
            })?;
            Ok(AcknowledgementRow {
                action_id,
                original_id,
                operator,
                at,
                evidence,
            })
        })
        .transpose()
    }
}

/// The id an `INSERT … RETURNING id` gave back (it always gives one: no
/// `ON CONFLICT` skips these rows).
fn returned(id: Option<i64>, table: &'static str) -> Result<i64> {
    id.ok_or_else(|| StoreError::Corrupt {
        table,
        detail: "the insert returned no id".into(),
    })
}
