//! A reconciliation repeat is a send. With an idempotent channel the
//! reconciler resolves an unknown outcome by repeating the request with the
//! same key; if the first request never arrived, that repeat *is* the first
//! delivery. So, exactly like a claim, it passes the validity check in the
//! write transaction that records its attempt ([`repeat_plan`]), and the
//! pre-send check right before it leaves ([`crate::dispatch::presend`]). No
//! longer valid → nothing is sent: an engine command known for it is
//! withdrawn and the engine's answer recorded ([`withdrawal`]), otherwise a
//! person confirms with the customer (`review`, with a reason the console
//! names in the operator's language).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{ItemResult, Settled, recovery};
use crate::channel::{CancelOutcome, Capabilities, Channel, SendOutcome};
use crate::dispatch::claim::evaluate;
use crate::dispatch::finish::{abandon_unsent, finish_attempt};
use crate::dispatch::presend::Clearance;
use crate::dispatch::presend::Holder;
use crate::dispatch::request::{attempt_result, evidence_for, send_request};
use crate::dispatch::{Db, Result, Settings};
use crate::domain::history::{self, HistorySignal, Said};
use crate::domain::recovery::ToReview;
use crate::domain::state::{CancelReason, IntentionState, ReviewReason, Signal};
use crate::domain::validity::Validity;
use crate::store::{Cause, NewAttempt, UncertainItem};

/// What the validity check before a repeat allows. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RepeatPlan {
    /// Still valid: repeat with the same key (it may be the first delivery).
    Send,
    /// Not valid, and the engine may hold the command queued: ask it to
    /// withdraw the command, and record its answer.
    Withdraw {
        command_id: String,
        reason: CancelReason,
        explanation: String,
    },
    /// Not valid and nothing to withdraw: the first request may or may not
    /// have gone out, so a person confirms with the customer.
    Review { reason: CancelReason, explanation: String },
    /// Not now (quiet hours, daily cap): send nothing, look again then.
    Hold { until: DateTime<Utc>, why: String },
}

/// Decides a repeat from the validity verdict (the same rules as a claim,
/// for the intention's own commitment version) and the engine command id
/// known for it, if any.
pub(crate) fn repeat_plan(verdict: Validity, command_id: Option<&str>, caps: Capabilities) -> RepeatPlan {
    match verdict {
        Validity::Valid => RepeatPlan::Send,
        Validity::Defer { until, why } => RepeatPlan::Hold { until, why },
        Validity::Cancel { reason, explanation } => match command_id {
            Some(id) if caps.cancel => RepeatPlan::Withdraw {
                command_id: id.to_string(),
                reason,
                explanation,
            },
            _ => RepeatPlan::Review { reason, explanation },
        },
    }
}

/// What the engine's answer to a withdrawal means for the intention. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Withdrawal {
    /// Evidence to apply: withdrawn (cancelled), or the command's real
    /// state when it was too late.
    Evidence(Signal, String),
    /// This channel cannot withdraw after all: a person decides.
    Review(String),
    /// No answer, or the engine does not know yet: ask again later.
    Wait(String),
}

pub(crate) fn withdrawal(answer: &CancelOutcome, command_id: &str) -> Withdrawal {
    match answer {
        CancelOutcome::Cancelled => Withdrawal::Evidence(
            Signal::Cancel(CancelReason::Withdrawn),
            format!("the engine withdrew command {command_id} before it went out"),
        ),
        CancelOutcome::TooLate { state } => match evidence_for(*state) {
            Some(sig) => Withdrawal::Evidence(
                sig,
                format!("too late to withdraw command {command_id}: the engine reports it {state:?}"),
            ),
            None => Withdrawal::Wait(format!(
                "command {command_id} could not be withdrawn: the engine reports it ambiguous"
            )),
        },
        CancelOutcome::Unsupported => Withdrawal::Review(format!("the channel cannot withdraw command {command_id}")),
        CancelOutcome::Unavailable { detail } => {
            Withdrawal::Wait(format!("withdrawing command {command_id} failed: {detail}"))
        }
    }
}

/// How a repeat began, decided in the transaction that would record it.
enum Start {
    /// The intention left `uncertain` meanwhile (evidence arrived).
    Moved,
    /// Valid: attempt recorded, send it (after the pre-send check).
    Go(i64),
    /// Not sent; the plan already written to the ledger, and the version
    /// validity read.
    Refused(RepeatPlan, i64),
}

/// The validity check of a repeat and what it decides, in one write
/// transaction with the attempt it records (exactly as a claim does).
fn start_repeat(
    tx: &crate::store::Tx<'_>,
    id: i64,
    s: &Settings,
    channel: (&str, Capabilities),
    command_id: Option<&str>,
    now: DateTime<Utc>,
) -> std::result::Result<Start, crate::store::StoreError> {
    let i = tx.intention(id)?;
    if i.state != IntentionState::Uncertain {
        return Ok(Start::Moved);
    }
    let (verdict, version, _) = evaluate(tx, &i, &s.rules, now)?;
    let plan = repeat_plan(verdict, command_id, channel.1);
    let said = |signal, note: String| {
        Said::new(signal, Cause::Reconciler)
            .evidence("validity_before_repeat")
            .note(note)
            .version(version)
    };
    match &plan {
        RepeatPlan::Send => {
            recovery::note(
                tx,
                id,
                &format!("repeating with the same key and content (valid at v{version}; it may be the first delivery)"),
                None,
                now,
            )?;
            // The repeat may be the first request that reaches the channel,
            // so it records the version it was validated against, exactly
            // as a claim does.
            let attempt = NewAttempt {
                intention_id: id,
                n: i.attempt_count + 1,
                worker: format!("{}/reconciler", s.owner),
                channel: channel.0.to_string(),
                version_checked: version,
                lease: None,
                at: now,
            };
            let attempt_id = tx.start_attempts(&[attempt])?[0];
            return Ok(Start::Go(attempt_id));
        }
        RepeatPlan::Withdraw {
            command_id,
            explanation,
            ..
        } => {
            let note = format!("not repeated: {explanation}; asking the channel to withdraw command {command_id}");
            tx.apply_records(&[history::note(
                id,
                i.state,
                said(HistorySignal::RepeatRefused, note),
                now,
            )])?;
        }
        RepeatPlan::Review { reason, explanation } => {
            let note = format!("not repeated (the first request may or may not have gone out): {explanation}");
            let why = ToReview::RefusedRepeat {
                reason: ReviewReason::for_refused_repeat(*reason),
                version,
            };
            recovery::to_review(tx, id, why, &note, now)?;
        }
        RepeatPlan::Hold { until, why } => {
            let note = format!("not repeated now: {why} (until {})", until.to_rfc3339());
            tx.apply_records(&[history::note(id, i.state, said(HistorySignal::Deferred, note), now)])?;
            tx.hold_uncertain(id, *until)?;
        }
    }
    Ok(Start::Refused(plan, version))
}

/// Repeats the send with the same key and content (idempotent channels
/// only): validity first, in the transaction that records the attempt;
/// then the pre-send check right before the request leaves. `command_id`
/// is the engine command known for it (`None` when the engine said it has
/// none), which a refused repeat asks the engine to withdraw.
pub(super) async fn repeat(
    db: &Db,
    settings: &Arc<Settings>,
    channel: &Arc<dyn Channel>,
    item: &UncertainItem,
    command_id: Option<String>,
) -> Result<ItemResult> {
    let id = item.intention.id;
    let s = settings.clone();
    let ch = (channel.kind(), channel.capabilities());
    let start = db
        .call(move |store| Ok(store.write(|tx| start_repeat(tx, id, &s, ch, command_id.as_deref(), Utc::now()))?))
        .await?;
    let wait = settings.reconcile_wait(item.tries);
    let attempt_id = match start {
        Start::Moved => return Ok(ItemResult::Resolved),
        Start::Go(a) => a,
        Start::Refused(
            RepeatPlan::Withdraw {
                command_id,
                reason,
                explanation,
            },
            version,
        ) => {
            let answer = channel.cancel(&command_id).await;
            let step = withdrawal(&answer, &command_id);
            let settled = db
                .call(move |store| {
                    let now = Utc::now();
                    Ok(store.write(|tx| match &step {
                        Withdrawal::Evidence(sig, note) => {
                            let note = format!("{note}; not repeated: {explanation}");
                            recovery::evidence(tx, id, *sig, (Some(&command_id), None), &note, now)?;
                            Ok::<_, crate::store::StoreError>(Settled::Resolved)
                        }
                        Withdrawal::Review(note) => {
                            let note = format!("{note}; not repeated: {explanation}");
                            let why = ToReview::RefusedRepeat {
                                reason: ReviewReason::for_refused_repeat(reason),
                                version,
                            };
                            recovery::to_review(tx, id, why, &note, now)?;
                            Ok(Settled::Review)
                        }
                        Withdrawal::Wait(note) => {
                            recovery::note(tx, id, note, Some(&command_id), now)?;
                            tx.hold_uncertain(id, now + wait)?;
                            Ok(Settled::Waiting)
                        }
                    })?)
                })
                .await?;
            return Ok(ItemResult::Refused(settled));
        }
        Start::Refused(RepeatPlan::Review { .. }, _) => return Ok(ItemResult::Refused(Settled::Review)),
        Start::Refused(_, _) => return Ok(ItemResult::Waiting),
    };
    if let Clearance::Stop(why) = db.presend().check(attempt_id, Holder::Reconciler).await {
        let s = settings.clone();
        db.call(move |store| {
            Ok(store.write(|tx| abandon_unsent(tx, attempt_id, &Holder::Reconciler, &why, &s.rules, Utc::now()))?)
        })
        .await?;
        return Ok(ItemResult::NotSent);
    }
    let req = send_request(&item.intention, item.contact.as_ref(), Utc::now());
    let outcome: SendOutcome = channel.send(&req).await;
    let s = settings.clone();
    let finished = db
        .call(move |store| {
            let now = Utc::now();
            Ok(store.write(|tx| {
                let f = finish_attempt(
                    tx,
                    attempt_id,
                    &attempt_result(&outcome),
                    Cause::Reconciler,
                    &s.retry,
                    now,
                )?;
                tx.hold_uncertain(id, now + wait)?;
                Ok::<_, crate::store::StoreError>(f)
            })?)
        })
        .await?;
    Ok(ItemResult::Repeated(finished))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    const MOTOR: Capabilities = Capabilities {
        idempotent_keys: true,
        command_lookup: true,
        cancel: true,
    };
    const NO_CANCEL: Capabilities = Capabilities {
        idempotent_keys: true,
        command_lookup: false,
        cancel: false,
    };

    fn cancel(reason: CancelReason) -> Validity {
        Validity::Cancel {
            reason,
            explanation: "the commitment was cancelled (now v2)".into(),
        }
    }

    #[test]
    fn a_repeat_is_sent_only_while_valid() {
        assert_eq!(repeat_plan(Validity::Valid, None, MOTOR), RepeatPlan::Send);
        assert_eq!(repeat_plan(Validity::Valid, Some("cmd-1"), MOTOR), RepeatPlan::Send);
        // Quiet hours or the daily cap: nothing now, look again then.
        let until = Utc::now() + Duration::hours(3);
        let plan = repeat_plan(
            Validity::Defer {
                until,
                why: "quiet hours".into(),
            },
            None,
            MOTOR,
        );
        assert_eq!(
            plan,
            RepeatPlan::Hold {
                until,
                why: "quiet hours".into()
            }
        );
    }

    #[test]
    fn an_invalid_repeat_withdraws_a_known_command_or_goes_to_a_person() {
        // No command known (the request was reset, or the engine said it
        // has none): review, never a send.
        let p = repeat_plan(cancel(CancelReason::CommitmentCancelled), None, MOTOR);
        assert!(
            matches!(&p, RepeatPlan::Review { reason: CancelReason::CommitmentCancelled, explanation } if explanation.contains("cancelled")),
            "{p:?}"
        );
        // A command the engine may still hold queued: withdraw it.
        assert_eq!(
            repeat_plan(cancel(CancelReason::Superseded), Some("cmd-9"), MOTOR),
            RepeatPlan::Withdraw {
                command_id: "cmd-9".into(),
                reason: CancelReason::Superseded,
                explanation: "the commitment was cancelled (now v2)".into(),
            }
        );
        // A channel that cannot withdraw: a person.
        assert!(matches!(
            repeat_plan(cancel(CancelReason::Expired), Some("cmd-9"), NO_CANCEL),
            RepeatPlan::Review {
                reason: CancelReason::Expired,
                ..
            }
        ));
    }

    #[test]
    fn the_engines_answer_to_a_withdrawal_is_evidence_or_a_reason_to_wait() {
        use crate::channel::ChannelState;
        assert!(matches!(
            withdrawal(&CancelOutcome::Cancelled, "c1"),
            Withdrawal::Evidence(Signal::Cancel(CancelReason::Withdrawn), n) if n.contains("withdrew command c1")
        ));
        // Too late: its real state is the evidence.
        assert!(matches!(
            withdrawal(&CancelOutcome::TooLate { state: ChannelState::Delivered }, "c1"),
            Withdrawal::Evidence(Signal::Delivered, n) if n.contains("too late")
        ));
        assert!(matches!(
            withdrawal(
                &CancelOutcome::TooLate {
                    state: ChannelState::Failed
                },
                "c1"
            ),
            Withdrawal::Evidence(Signal::Failed, _)
        ));
        assert!(matches!(
            withdrawal(
                &CancelOutcome::TooLate {
                    state: ChannelState::Ambiguous
                },
                "c1"
            ),
            Withdrawal::Wait(_)
        ));
        assert!(matches!(
            withdrawal(&CancelOutcome::Unavailable { detail: "down".into() }, "c1"),
            Withdrawal::Wait(n) if n.contains("down")
        ));
        assert!(matches!(
            withdrawal(&CancelOutcome::Unsupported, "c1"),
            Withdrawal::Review(_)
        ));
    }

    #[test]
    fn refused_repeats_carry_a_reason_for_the_refusal() {
        for (reason, review) in [
            (CancelReason::CommitmentCancelled, ReviewReason::ChangedWhileUncertain),
            (CancelReason::Superseded, ReviewReason::ChangedWhileUncertain),
            (CancelReason::Expired, ReviewReason::InvalidWhileUncertain),
            (CancelReason::OptedOut, ReviewReason::InvalidWhileUncertain),
        ] {
            assert_eq!(ReviewReason::for_refused_repeat(reason), review);
        }
    }
}
