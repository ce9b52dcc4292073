//! Authorizing a resend, and the guard that keeps it from silently
//! duplicating a message the customer already has (issue 9).
//!
//! A resend belongs to a *family*: the original intention and every resend
//! authorized for it (`…:reenvio:{n}`, all related to the original). The
//! guard looks at the whole family, whichever member the supervisor
//! selected, and refuses, naming the rule:
//!
//! - while any member is still planned, dispatching or uncertain (its
//!   outcome will arrive, or must be verified first);
//! - when the family already had `max_resends_per_day` resends authorized
//!   this operating day;
//! - when any member was already delivered or read, unless the supervisor
//!   acknowledges it explicitly (the typed word in the console,
//!   `--acknowledge-delivered` on the command line). The acknowledgement is
//!   recorded with the operator action and on the new resend.
//!
//! The console's confirmation and `unavez intents resend` both show
//! [`ResendEvidence`] first and call [`authorize_resend`], so the rules are
//! the same wherever a resend is authorized.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::lock::original_of;
use super::{
    Actor, OpKind, OpOutcome, OpReport, OpsError, Record, Refusal, check, lock_intention, note_text, operator_said,
    record, write_note,
};
use crate::config::Policy;
use crate::domain::guard;
use crate::domain::history::HistorySignal;
use crate::domain::intention::{NewIntention, correlation_id, operating_day};
use crate::domain::key::IntentionKey;
use crate::domain::state::IntentionState;
use crate::store::{CommitmentRow, FamilyMember, IntentionRow, NewAcknowledgement, Tx};

/// What the supervisor brings to the guard besides the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResendGuard {
    /// The supervisor saw that an earlier message was delivered or read and
    /// resends anyway.
    pub acknowledge_delivered: bool,
    /// `[policy] max_resends_per_day`.
    pub max_per_day: u32,
}

impl ResendGuard {
    pub fn from_policy(policy: &Policy, acknowledge_delivered: bool) -> ResendGuard {
        ResendGuard {
            acknowledge_delivered,
            max_per_day: policy.max_resends_per_day,
        }
    }
}

/// What already exists for an intention's family, shown before a resend is
/// authorized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResendEvidence {
    pub original_id: i64,
    pub original_key: String,
    /// The original first, then each resend in the order authorized.
    pub messages: Vec<FamilyMember>,
    /// Resends of this family authorized in the current operating day.
    pub authorized_today: u32,
    pub max_per_day: u32,
    /// The rule that would refuse a resend now, acknowledgement aside
    /// (`None`: it would be created, after the acknowledgement if
    /// [`ResendEvidence::needs_acknowledgement`]).
    pub refusal: Option<Refusal>,
}

impl ResendEvidence {
    /// The members the customer already has (delivered or read).
    pub fn reached(&self) -> impl Iterator<Item = &FamilyMember> {
        self.messages.iter().filter(|m| has_reached(m))
    }

    /// Whether authorizing needs the explicit acknowledgement.
    pub fn needs_acknowledgement(&self) -> bool {
        self.reached().next().is_some()
    }
}

fn has_reached(m: &FamilyMember) -> bool {
    guard::has_reached(m.state, m.delivered_at.is_some(), m.read_at.is_some())
}

/// Everything the guard reads, in the caller's transaction.
pub(super) struct Family {
    /// The member the supervisor selected.
    pub row: IntentionRow,
    pub original: IntentionRow,
    pub commitment: CommitmentRow,
    pub evidence: ResendEvidence,
}

pub(super) fn load(
    tx: &Tx<'_>,
    intention_id: i64,
    max_per_day: u32,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<Family, OpsError> {
    let row = tx.intention(intention_id)?;
    let original = original_of(tx, &row)?;
    let commitment = tx.commitment_by_id(original.commitment_id)?;
    let messages = tx.resend_family(original.id)?;
    let facts = family_of(&original, &commitment, &messages).facts(max_per_day, tz, now);
    let evidence = ResendEvidence {
        original_id: original.id,
        original_key: original.key.clone(),
        messages,
        authorized_today: facts.authorized_today,
        max_per_day,
        refusal: guard::resend_refusal(&facts, commitment.commitment.is_cancelled()),
    };
    Ok(Family {
        row,
        original,
        commitment,
        evidence,
    })
}

/// The family as the resend rules see it (`domain::guard::Family`).
fn family_of(original: &IntentionRow, commitment: &CommitmentRow, messages: &[FamilyMember]) -> guard::Family {
    guard::Family {
        original: original.state,
        planned_version: original.commitment_version,
        current_version: commitment.commitment.version,
        expires_at: original.expires_at,
        resends: messages
            .iter()
            .filter(|m| m.id != original.id)
            .map(|m| guard::FamilyResend {
                key: m.key.clone(),
                state: m.state,
                authorized_by: m.authorized_by.clone(),
                created_at: m.created_at,
            })
            .collect(),
    }
}

/// What the resend rules read about a family.
pub(super) fn resend_facts(
    original: &IntentionRow,
    commitment: &CommitmentRow,
    ev: &ResendEvidence,
    tz: Tz,
    now: DateTime<Utc>,
) -> guard::ResendFacts {
    family_of(original, commitment, &ev.messages).facts(ev.max_per_day, tz, now)
}

/// The evidence a supervisor sees before authorizing a resend of
/// `intention_id` (any member of the family). Reads only.
pub fn resend_evidence(
    tx: &Tx<'_>,
    intention_id: i64,
    max_per_day: u32,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<ResendEvidence, OpsError> {
    Ok(load(tx, intention_id, max_per_day, tz, now)?.evidence)
}

/// Supervisors only: a NEW intention related to the original, same
/// content, key `{original}:reenvio:{n}`, with reason and responsible, if
/// the guard allows it (see the module header). A refusal is recorded as
/// the action's result and in the selected intention's history.
pub fn authorize_resend(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    reason: &str,
    guard: ResendGuard,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::AuthorizeResend, reason)?;
    // The guard's facts (pending members, today's count, what reached the
    // customer, the commitment) are read only once the case is locked: a
    // second supervisor decides on what the first one committed.
    lock_intention(tx, intention_id)?;
    let fam = load(tx, intention_id, guard.max_per_day, tz, now)?;
    let last_reached = fam.evidence.reached().last().cloned();
    if let Some(r) = crate::domain::guard::authorization_refusal(
        fam.evidence.refusal.clone(),
        last_reached.as_ref().map(|m| (m.key.as_str(), m.state)),
        guard.acknowledge_delivered,
    ) {
        let rec = Record::on(OpKind::AuthorizeResend, &fam.row, reason, OpOutcome::Refused(r));
        return record(tx, actor, rec, now);
    }
    let new = resend_of(tx, actor, &fam.original, reason, tz, now)?;
    let id = crate::planning::reserve(tx, &new, fam.original.commitment_id, fam.commitment.contact_id, now)?.id();
    let outcome = OpOutcome::Done {
        state: Some(IntentionState::Planned),
        new_intention: Some((id, new.key.to_string())),
        closed: 0,
    };
    let acknowledged = last_reached.is_some().then(|| {
        let list = fam
            .evidence
            .reached()
            .map(|m| format!("#{} {} ({})", m.id, m.key, m.state))
            .collect::<Vec<_>>()
            .join(", ");
        format!("delivery acknowledged: the customer already has {list}")
    });
    let rec = Record {
        extra: acknowledged.as_deref(),
        ..Record::on(OpKind::AuthorizeResend, &fam.row, reason, outcome)
    };
    let report = record(tx, actor, rec, now)?;
    if let Some(what) = &acknowledged {
        acknowledge(tx, actor, &fam, id, report.action_id, what, now)?;
    }
    Ok(report)
}

/// The new intention: the original's content under the next free
/// `…:reenvio:{n}` key.
fn resend_of(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    original: &IntentionRow,
    reason: &str,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<NewIntention, OpsError> {
    let original_key = IntentionKey::parse(&original.key)?;
    let mut n = u32::try_from(tx.resend_count(original.id)?).unwrap_or(0) + 1;
    let mut key = IntentionKey::resend(&original_key, n)?;
    while tx.intention_id(key.as_str())?.is_some() {
        n += 1;
        key = IntentionKey::resend(&original_key, n)?;
    }
    Ok(NewIntention {
        commitment_ref: original.commitment_ref.clone(),
        commitment_version: original.commitment_version,
        purpose: original.purpose(),
        recipient: original.recipient.clone(),
        category: original.category(),
        channel: original.channel.clone(),
        template: original.template.clone(),
        language: original.language.clone(),
        parameters: original.parameters.clone(),
        body: original.body.clone(),
        due_at: now,
        expires_at: original.expires_at,
        asks_confirmation: original.asks_confirmation,
        correlation_id: correlation_id(&key),
        day: operating_day(now, tz),
        created_by: actor.name.to_string(),
        authorized_by: Some(actor.name.to_string()),
        reason: Some(note_text(actor, reason)),
        related_key: Some(original_key),
        key,
    })
}

/// Records what the supervisor acknowledged: a row tied to the action and
/// the new resend, and a note in the new resend's history.
fn acknowledge(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    fam: &Family,
    new_id: i64,
    action_id: i64,
    what: &str,
    now: DateTime<Utc>,
) -> Result<(), OpsError> {
    let reached: Vec<&FamilyMember> = fam.evidence.reached().collect();
    let evidence = serde_json::to_value(&reached).unwrap_or(serde_json::Value::Null);
    tx.record_resend_acknowledgement(
        &NewAcknowledgement {
            action_id,
            intention_id: new_id,
            original_id: fam.original.id,
            operator: actor.name,
            evidence: &evidence,
        },
        now,
    )?;
    let note = format!("{} ({}): {what}", actor.name, actor.role.as_str());
    let said = operator_said(
        HistorySignal::AcknowledgedDelivery,
        action_id,
        fam.original.commitment_version,
    );
    write_note(tx, new_id, said.note(note), now)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_its_rule_as_its_json_tag() {
        let all = Refusal::examples();
        for r in all {
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["refusal"], r.rule(), "{r:?}");
        }
    }
}
