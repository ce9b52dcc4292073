//! The string tables: placeholders, defaults, and completeness.

use super::*;
use crate::ops::OpKind;

#[test]
fn fill_replaces_every_placeholder() {
    assert_eq!(fill("a {x} b {y} {x}", &[("x", "1"), ("y", "2")]), "a 1 b 2 1");
}

#[test]
fn spanish_is_the_default() {
    assert_eq!(strings(Language::default()).screen_attention, "Atención");
    assert_eq!(strings(Language::En).screen_attention, "Attention");
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.to_string_lossy().contains("test") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p, text));
        }
    }
}

/// The string literals right after each `prefix` in `text`.
fn literals_after(text: &str, prefix: &str) -> Vec<String> {
    text.match_indices(prefix)
        .filter_map(|(i, _)| {
            let rest = &text[i + prefix.len()..];
            let rest = rest.strip_prefix('"')?;
            let end = rest.find('"')?;
            let word = &rest[..end];
            word.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
                .then(|| word.to_string())
        })
        .collect()
}

/// Every history signal, cause and reprocessing action the code can
/// write has words in both languages: the test reads the workspace's
/// sources, so a new `signal: "…"`, `entry("…")`, `Signal::…`,
/// `Cause::…` or reprocessing action without a text fails here.
#[test]
fn every_signal_cause_and_reprocess_action_is_said_in_both_languages() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in ["core", "ledger", "app", "channels", "server"] {
        sources(&crates.join(c).join("src"), &mut files);
    }
    let (mut signals, mut causes, mut actions) = (Vec::new(), Vec::new(), Vec::new());
    for (path, text) in &files {
        for prefix in ["signal: ", "entry(", "webhook_entry("] {
            signals.extend(literals_after(text, prefix));
        }
        // The `as_str`/`name` match arms of the typed vocabularies:
        // `Signal::… => "…"`, `Cause::… => "…"`, `Action::… => "…"`.
        let name = path.file_name().unwrap().to_string_lossy();
        let target = match name.as_ref() {
            "state.rs" => Some(("Signal::", &mut signals)),
            "reprocess.rs" => Some(("Action::", &mut actions)),
            _ => None,
        };
        if let Some((prefix, out)) = target {
            for line in text.lines().map(str::trim).filter(|l| l.starts_with(prefix)) {
                out.extend(literals_after(line, " => ").pop());
            }
        }
    }
    signals.extend(OpKind::ALL.iter().map(|o| o.as_str().to_string()));
    // The typed vocabularies list themselves (`webhook` is only a prefix).
    use crate::domain::history::{Cause, HistorySignal};
    signals.extend(
        HistorySignal::all()
            .filter(|h| *h != HistorySignal::Webhook)
            .map(|h| h.as_str().to_string()),
    );
    causes.extend(Cause::ALL.iter().map(|c| c.as_str().to_string()));
    assert!(
        signals.len() > 20 && causes.len() == 6 && actions.len() == 10,
        "{signals:?} {causes:?} {actions:?}"
    );
    for t in [&ES, &EN] {
        let missing: Vec<&String> = signals.iter().filter(|s| lookup(t.signals, s).is_none()).collect();
        assert!(missing.is_empty(), "signals without text: {missing:?}");
        assert_ne!(t.signal("webhook:delivered"), "webhook:delivered");
        for c in &causes {
            assert!(lookup(t.causes, c).is_some(), "cause {c} has no text");
        }
        for a in &actions {
            assert!(
                lookup(t.reprocess_actions, a).is_some(),
                "reprocess action {a} has no text"
            );
        }
    }
}

/// Every next step of the work queue has words in both languages.
#[test]
fn every_next_step_is_said_in_both_languages() {
    for t in [&ES, &EN] {
        for step in NextStep::ALL {
            assert!(!t.next_step(step).is_empty(), "{step:?}");
        }
    }
}

/// Every refusal has a few words beside a dimmed key, in both languages
/// (issue 25 §3).
#[test]
fn every_refusal_is_said_short_in_both_languages() {
    for t in [&ES, &EN] {
        for r in crate::ops::Refusal::examples() {
            assert!(lookup(t.refusal_short, r.rule()).is_some(), "{}", r.rule());
            assert!(!t.refusal(&r, chrono::Utc::now()).is_empty(), "{}", r.rule());
        }
    }
}

/// The reasons a refused repeat goes to review with (dispatch/repeat.rs)
/// are said in both languages, never shown as their code.
#[test]
fn refused_repeat_reasons_are_said_in_both_languages() {
    use crate::domain::state::ReviewReason;
    let es = ES.reason(ReviewReason::ChangedWhileUncertain.as_str());
    assert_eq!(
        es,
        "la cita cambió mientras no sabíamos si el mensaje salió: confirmar con el paciente"
    );
    let en = EN.reason(ReviewReason::ChangedWhileUncertain.as_str());
    assert!(en.starts_with("the appointment changed while we did not know"), "{en}");
    let code = ReviewReason::InvalidWhileUncertain.as_str();
    assert_ne!(ES.reason(code), code);
    assert_ne!(EN.reason(code), code);
}

/// Why a webhook event was parked or refused (store/webhooks.rs), for
/// a technician in Atención, in both languages.
#[test]
fn parked_and_refused_event_reasons_are_said_in_both_languages() {
    use crate::domain::counter::Unactionable;
    use crate::store::{PARKED_KEY_MESSAGE_MISMATCH, PARKED_UNKNOWN_STATE, REFUSED_FOREIGN_INSTANCE};
    let unactionable = Unactionable::ALL.map(Unactionable::as_str);
    for code in [
        PARKED_KEY_MESSAGE_MISMATCH,
        PARKED_UNKNOWN_STATE,
        REFUSED_FOREIGN_INSTANCE,
        "template_blocked",
    ]
    .into_iter()
    .chain(unactionable)
    {
        assert_ne!(ES.reason(code), code);
        assert_ne!(EN.reason(code), code);
    }
    assert!(ES.reason(PARKED_KEY_MESSAGE_MISMATCH).contains("apartado"));
    // A few words each for the row of a technician's Atención.
    for t in [&ES, &EN] {
        for code in [
            PARKED_KEY_MESSAGE_MISMATCH,
            PARKED_UNKNOWN_STATE,
            REFUSED_FOREIGN_INSTANCE,
        ]
        .into_iter()
        .chain(unactionable)
        {
            assert!(lookup(t.channel_event_reasons, code).is_some(), "{code}");
        }
    }
}

// tablero, themes, progress, errors

/// Every kind of failure has its own sentence in both languages, and the
/// flash line's form keeps the technical text short.
#[test]
fn every_failure_is_said_in_both_languages() {
    use crate::tui::failure::{Failure, FailureKind};
    for kind in FailureKind::ALL {
        let (es, en) = (ES.failure(kind), EN.failure(kind));
        assert!(!es.is_empty() && !en.is_empty(), "{kind:?}");
        assert_ne!(es, en, "{kind:?}");
    }
    let mut seen: Vec<&str> = FailureKind::ALL.iter().map(|k| ES.failure(*k)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), FailureKind::ALL.len(), "two kinds share a sentence");
    let long = Failure::new(FailureKind::Busy, "database error: database is locked ".repeat(5));
    let line = ES.failure_line(&long);
    assert!(line.starts_with("La base de datos está ocupada"), "{line}");
    let aside = line.split_once(" (").unwrap().1;
    assert!(aside.chars().count() <= 41 && aside.ends_with("…)"), "{aside}");
    assert_eq!(
        ES.failure_line(&Failure::new(FailureKind::Unavailable, "")),
        ES.reprocess_unavailable
    );
}

/// Issue 25 §2: the resend confirmation's family and a pending resend's
/// refusal read dates as every front-desk screen does, across a year
/// boundary too: "ayer 23:50" on New Year's Day, the year only on a date
/// of another year, never a bare "31/12" that reads as this year's.
#[test]
fn resend_dates_carry_the_year_only_when_it_is_another() {
    use chrono::TimeZone;
    let tz = chrono_tz::America::Lima;
    let now = tz
        .with_ymd_and_hms(2027, 1, 1, 10, 0, 0)
        .unwrap()
        .with_timezone(&chrono::Utc);
    let at = |y, mo, d, h, mi| {
        tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let t = strings(Language::Es);
    let member = crate::store::FamilyMember {
        id: 1,
        key: "cita-1:aviso-reserva:v1".into(),
        state: crate::domain::state::IntentionState::Read,
        created_by: "system".into(),
        authorized_by: None,
        created_at: at(2026, 12, 20, 9, 0),
        accepted_at: Some(at(2026, 12, 20, 9, 1)),
        delivered_at: Some(at(2026, 12, 31, 23, 50)),
        read_at: Some(at(2027, 1, 1, 8, 5)),
    };
    let [_, detail] = t.resend_member(&member, true, tz, now);
    assert!(detail.contains("aceptado 20/12/2026 09:01"), "{detail}");
    assert!(detail.contains("entregado ayer 23:50"), "{detail}");
    assert!(detail.contains("leído hoy 08:05"), "{detail}");
    let later = tz
        .with_ymd_and_hms(2027, 2, 3, 10, 0, 0)
        .unwrap()
        .with_timezone(&chrono::Utc);
    let [_, detail] = t.resend_member(&member, true, tz, later);
    assert!(detail.contains("leído 01/01 08:05"), "{detail}");

    let pending = |at: chrono::DateTime<chrono::Utc>| crate::domain::refusal::Refusal::ResendPending {
        key: "cita-1:aviso-reserva:v1:reenvio:1".into(),
        authorized_by: Some("ana".into()),
        authorized_at: at.with_timezone(&tz).fixed_offset(),
    };
    let why = t.refusal(&pending(at(2026, 12, 31, 23, 40)), now);
    assert!(why.contains("ana ya autorizó un reenvío ayer 23:40"), "{why}");
    let why = t.refusal(&pending(at(2026, 12, 30, 23, 40)), now);
    assert!(why.contains("30/12/2026 23:40"), "{why}");
    let why = strings(Language::En).refusal(&pending(at(2027, 1, 1, 9, 15)), now);
    assert!(why.contains("ana already authorized a resend today 09:15"), "{why}");
}
