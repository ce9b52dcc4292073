//! The engine's webhooks are delivered at least once (docs/design.md, "The
//! WhatsApp engine contract"): an engine that crashes delivers again what
//! it had not delivered. The simulator does not: SIGKILLed, it forgets the
//! events it had not yet posted, and it gives up on one after six tries.
//! When the webhook server falls behind (on PostgreSQL, while an import or
//! a claim holds the rows it writes), a command the engine resolved as not
//! sent can then stay `accepted` in the ledger for good, which the checker
//! must count as lost: the ledger says the message went, the engine says it
//! did not.
//!
//! So while settling, the harness plays the engine's outbox: for every
//! intention the ledger still has `accepted` whose command the engine's
//! journal shows as never sent (`fallido`, `cancelado`), it posts the
//! engine's own last state of that command as a signed event to the
//! webhook server, as the engine would after a restart. The facts come from the engine's journal only;
//! nothing the ledger does not know from the engine is invented, and the
//! count is in the report.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::domain::state::IntentionState;
use crate::store::IntentionRow;
use unavez::channel::motor_event::{MotorEvent, SIGNATURE_HEADER, sign};

use super::ChaosError;
use super::procs::WEBHOOK_SECRET;

/// The engine's final word that a command never went out: what the ledger
/// must learn for an `accepted` intention not to read as sent. (One that
/// went out is in the engine's log: the checker needs no event for it.)
const NEVER_SENT: &[&str] = &["fallido", "cancelado"];

/// The engine's last journaled record of each key, and whether the
/// command was ambiguous on the way (its resolution says so).
pub fn last_states(journal: &Path) -> Result<HashMap<String, (serde_json::Value, bool)>, ChaosError> {
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(ChaosError::Io(format!("reading {}: {e}", journal.display()))),
    };
    let mut out: HashMap<String, (serde_json::Value, bool)> = HashMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(cmd) = v.get("command") else { continue };
        let Some(key) = cmd.get("idempotency_key").and_then(|k| k.as_str()) else {
            continue;
        };
        let ambiguous = cmd.get("estado").and_then(|e| e.as_str()) == Some("ambiguo");
        let entry = out.entry(key.to_string()).or_insert((cmd.clone(), false));
        entry.0 = cmd.clone();
        entry.1 |= ambiguous;
    }
    Ok(out)
}

/// The events to post: one per `accepted` intention whose command the
/// engine says never went out, with the engine's last state of it. Pure.
pub fn behind(rows: &[IntentionRow], engine: &HashMap<String, (serde_json::Value, bool)>) -> Vec<MotorEvent> {
    let accepted: Vec<&str> = rows
        .iter()
        .filter(|r| r.state == IntentionState::Accepted)
        .map(|r| r.key.as_str())
        .collect();
    verdicts(&accepted, engine)
}

/// [`behind`] for the keys of the `accepted` intentions.
fn verdicts(accepted: &[&str], engine: &HashMap<String, (serde_json::Value, bool)>) -> Vec<MotorEvent> {
    let field = |c: &serde_json::Value, f: &str| c.get(f).and_then(|x| x.as_str()).map(str::to_string);
    accepted
        .iter()
        .filter_map(|key| {
            let (cmd, ambiguous) = engine.get(*key)?;
            let estado = field(cmd, "estado")?;
            if !NEVER_SENT.contains(&estado.as_str()) {
                return None;
            }
            let command_id = field(cmd, "command_id")?;
            Some(MotorEvent {
                // Its own id: a copy of an event already applied changes
                // nothing either way (states only rise).
                event_id: format!("evt_chaos_outbox_{command_id}_{estado}"),
                kind: "comando.estado".into(),
                instance_id: field(cmd, "instance_id")?,
                command_id,
                idempotency_key: key.to_string(),
                estado,
                provider_message_id: field(cmd, "provider_message_id"),
                detail: field(cmd, "detail"),
                resolves_ambiguous: *ambiguous,
                occurred_at: field(cmd, "updated_at")?,
            })
        })
        .collect()
}

/// Posts `events` to the webhook server at `url`, signed as the simulator
/// signs them, each once (an event already sent this run is not sent
/// again); how many the server took.
pub fn post(
    rt: &tokio::runtime::Runtime,
    url: &str,
    events: Vec<MotorEvent>,
    done: &mut HashSet<String>,
) -> Result<usize, ChaosError> {
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| ChaosError::Io(format!("webhook client: {e}")))?;
        let mut taken = 0;
        for ev in events {
            if done.contains(&ev.event_id) {
                continue;
            }
            let body = serde_json::to_vec(&ev).map_err(|e| ChaosError::Io(e.to_string()))?;
            let signature = sign(WEBHOOK_SECRET.as_bytes(), &body);
            let res = client
                .post(url)
                .header("content-type", "application/json")
                .header(SIGNATURE_HEADER, signature)
                .body(body)
                .send()
                .await;
            if res.is_ok_and(|r| r.status().is_success()) {
                done.insert(ev.event_id);
                taken += 1;
            }
        }
        Ok(taken)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(lines: &[&str]) -> HashMap<String, (serde_json::Value, bool)> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("engine-state.jsonl");
        std::fs::write(&p, lines.join("\n")).unwrap();
        last_states(&p).unwrap()
    }

    fn cmd(key: &str, estado: &str) -> String {
        serde_json::json!({"command": {"command_id": format!("cmd_{key}"), "instance_id": "i", "idempotency_key": key,
            "estado": estado, "detail": (estado == "fallido").then_some("no_salio"), "updated_at": "2026-12-01T00:00:00Z"}})
        .to_string()
    }

    #[test]
    fn the_last_state_wins_and_an_ambiguous_past_is_remembered() {
        let j = journal(&[
            &cmd("a", "en_cola"),
            &cmd("a", "ambiguo"),
            &cmd("a", "fallido"),
            &cmd("b", "enviado"),
        ]);
        assert_eq!(j["a"].0["estado"], "fallido");
        assert!(j["a"].1);
        assert!(!j["b"].1);
        assert!(
            last_states(Path::new("/nonexistent/engine-state.jsonl"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn only_an_accepted_intention_the_engine_never_sent_gets_the_engine_verdict() {
        let j = journal(&[
            &cmd("failed", "ambiguo"),
            &cmd("failed", "fallido"),
            &cmd("out", "enviado"),
            &cmd("queued", "en_cola"),
        ]);
        let ev = verdicts(&["failed", "out", "queued", "unknown"], &j);
        assert_eq!(ev.len(), 1);
        let e = &ev[0];
        assert_eq!((e.idempotency_key.as_str(), e.estado.as_str()), ("failed", "fallido"));
        assert_eq!(e.detail.as_deref(), Some("no_salio"));
        assert!(e.resolves_ambiguous);
        assert_eq!(e.command_id, "cmd_failed");
    }
}
