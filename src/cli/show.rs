//! `intents show ID|KEY` for a person (issue 25 §8): the verdict first,
//! then the content, the history in order, attempts and related messages,
//! with states, signals and causes in the configured language. Keys,
//! evidence ids and the channel's own notes stay as stored: this is the
//! technician's view too (`--json` has everything, untranslated).

use std::io::Write as _;
use std::process::ExitCode;

use chrono::Utc;
use chrono_tz::Tz;

use crate::domain::key::Purpose;
use crate::domain::mask::mask_phone;
use crate::domain::text::inert;
use crate::domain::verdict::{Facts, verdict};
use crate::i18n::Strings;
use crate::store::IntentionDetail;

pub(super) fn show_intention(t: &Strings, d: &IntentionDetail, tz: Tz) -> anyhow::Result<ExitCode> {
    let (w, c) = (t.words, t.cli);
    let now = Utc::now();
    let i = &d.intention;
    let commitment = d.commitment.as_ref().map(|c| &c.commitment);
    let v = verdict(&Facts {
        state: i.state,
        state_reason: i.state_reason.as_deref(),
        purpose: Purpose::from_slug(&i.purpose),
        state_changed_at: i.state_changed_at,
        due_at: i.due_at,
        channel_took_it: crate::domain::verdict::channel_took_it(
            d.history.iter().map(|h| (h.to_state.as_str(), h.signal.as_str())),
        ),
        commitment,
    });
    let mut out = Vec::new();
    out.push(w.verdict(&v, now, tz));
    out.push(format!("#{} {}", i.id, inert(&i.key)));
    let reason = i
        .state_reason
        .as_deref()
        .map(|r| format!(" ({})", inert(t.reason(r))))
        .unwrap_or_default();
    out.push(format!("  {:<11} {}{reason}", c.show_state, t.state(i.state.as_str())));
    let mut about = format!("{} v{}", inert(&i.commitment_ref), i.commitment_version);
    if let Some(cm) = commitment {
        for part in [cm.name.as_deref(), cm.service.as_deref()].into_iter().flatten() {
            about.push_str(&format!(" · {}", inert(part)));
        }
        if let Some(at) = cm.starts_at {
            about.push_str(&format!(" · {}", w.when(at, now, tz)));
        }
    }
    let label = if v.is_order() { w.customer } else { c.show_commitment };
    out.push(format!("  {:<11} {about}", label.to_lowercase()));
    out.push(format!(
        "  {:<11} {} ({}, {})",
        c.show_to,
        mask_phone(&i.recipient),
        inert(&i.category),
        inert(&i.channel)
    ));
    let params: Vec<_> = i.parameters.iter().map(|p| inert(p)).collect();
    out.push(format!(
        "  {:<11} {} [{}] {:?}",
        c.show_template,
        inert(&i.template),
        inert(&i.language),
        params
    ));
    out.push(format!("  {:<11} {}", c.show_text, inert(&i.body)));
    out.push(format!("  {:<11} {}", c.show_due, w.when(i.due_at, now, tz)));
    if let Some(e) = i.expires_at {
        out.push(format!("  {:<11} {}", c.show_expires, w.when(e, now, tz)));
    }
    out.push(format!("  {:<11} {}", c.show_fingerprint, inert(&i.fingerprint)));
    if let Some(r) = &i.reason {
        out.push(format!(
            "  {:<11} {} ({}: {}, {} {})",
            c.show_reason,
            inert(r),
            t.form_responsible,
            inert(&i.created_by),
            t.detail_authorized,
            inert(i.authorized_by.as_deref().unwrap_or("-"))
        ));
    }
    history(t, d, tz, &mut out);
    let mut stdout = std::io::stdout().lock();
    for line in out {
        if let Err(e) = writeln!(stdout, "{line}") {
            return super::ledger::closed_pipe(e);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn history(t: &Strings, d: &IntentionDetail, tz: Tz, out: &mut Vec<String>) {
    let c = t.cli;
    out.push(c.show_history.to_string());
    for h in &d.history {
        out.push(format!(
            "  {} {} → {} {}{} ({}) {}{}",
            h.at.with_timezone(&tz).format("%d/%m %H:%M:%S%.3f"),
            inert(h.from_state.as_deref().map(|s| t.state(s)).unwrap_or("-")),
            inert(t.state(&h.to_state)),
            inert(&t.signal(&h.signal)),
            if h.applied {
                String::new()
            } else {
                format!(" {}", c.show_recorded)
            },
            inert(t.cause(&h.cause)),
            h.evidence
                .as_deref()
                .map(|e| format!("[{}] ", inert(e)))
                .unwrap_or_default(),
            inert(h.note.as_deref().unwrap_or(""))
        ));
    }
    out.push(c.show_attempts.to_string());
    for a in &d.attempts {
        out.push(format!(
            "  {} {} {} · http {} cmd {} msg {} {}",
            a.n,
            a.started_at.with_timezone(&tz).format("%d/%m %H:%M:%S"),
            t.words.attempt_outcome(a.outcome),
            a.http_status.map(|s| s.to_string()).unwrap_or("-".into()),
            inert(a.command_id.as_deref().unwrap_or("-")),
            inert(a.message_id.as_deref().unwrap_or("-")),
            inert(a.error_detail.as_deref().unwrap_or(""))
        ));
    }
    if !d.related.is_empty() {
        out.push(c.show_related.to_string());
        for r in &d.related {
            out.push(format!(
                "  #{} {} {} ({})",
                r.id,
                inert(&r.key),
                t.state(&r.state),
                t.words.relation(&r.relation)
            ));
        }
    }
}
