//! Bench-only ledger helpers (never in the product): the raw-insert
//! baseline that measures what this disk can durably write, and a fast
//! generator of a large, realistic ledger for the console, dispatch and
//! webhook benchmarks. Free functions over a `rusqlite::Connection` opened
//! with the production pragmas (`store::open_connection`), so the ledger
//! crate ships no test tools. The ledger's own console tests include this
//! file by path to build the same generated ledger.
//!
//! The generator writes rows directly (no planner, no state machine) so that
//! a million intentions take seconds, not minutes; what it writes has the
//! shape the product writes: the same columns, a realistic mix of states per
//! operating day, one attempt per intention that reached the channel and a
//! history row for every state change.

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use rusqlite::{Connection, Result, TransactionBehavior, params};
use sha2::{Digest, Sha256};

/// Payload bytes of one raw-baseline row: about what one intention row
/// stores (key, recipient, template, parameters, rendered body,
/// fingerprint, times, state), measured on generated intentions.
pub const RAW_ROW_BYTES: usize = 420;

/// What [`generate_intentions`] generates.
#[derive(Debug, Clone)]
pub struct LedgerShape {
    /// Distinct contacts; intention `i` goes to contact `i / 3 % contacts`.
    pub contacts: u64,
    /// Days of history before `now` (intentions spread evenly).
    pub past_days: i64,
    /// Days of planned work after `now`.
    pub future_days: i64,
    pub now: DateTime<Utc>,
    pub tz: Tz,
    /// Total intentions the generated ledger will hold (used to spread
    /// them over the days).
    pub total: u64,
}

/// A cheap deterministic hash for picking states and times.
fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Common first names in Peru, for generated patients: with [`SURNAMES`],
/// names collide as a real clinic's do (many María, many Quispe), so the
/// search is measured on look-alikes, not on unique strings.
pub const FIRST_NAMES: [&str; 50] = [
    "María",
    "José",
    "Juan",
    "Rosa",
    "Luis",
    "Carmen",
    "Carlos",
    "Ana",
    "Jorge",
    "Luz",
    "Miguel",
    "Elena",
    "Pedro",
    "Julia",
    "Víctor",
    "Lucía",
    "César",
    "Gloria",
    "Manuel",
    "Teresa",
    "Jesús",
    "Sofía",
    "Ángel",
    "Isabel",
    "Raúl",
    "Patricia",
    "Jhon",
    "Milagros",
    "Edwin",
    "Flor",
    "Héctor",
    "Mario",
    "Marta",
    "Ricardo",
    "Silvia",
    "Óscar",
    "Verónica",
    "Alberto",
    "Yolanda",
    "Fernando",
    "Norma",
    "Walter",
    "Gladys",
    "Roberto",
    "Liliana",
    "Daniel",
    "Susana",
    "Javier",
    "Mónica",
    "Wilmer",
];

/// Common surnames in Peru (see [`FIRST_NAMES`]).
pub const SURNAMES: [&str; 80] = [
    "Quispe",
    "Flores",
    "Sánchez",
    "Rodríguez",
    "García",
    "Rojas",
    "Huamán",
    "Mamani",
    "Vásquez",
    "Chávez",
    "Ramos",
    "Ramírez",
    "Díaz",
    "Torres",
    "Mendoza",
    "Castillo",
    "Espinoza",
    "López",
    "Gonzales",
    "Pérez",
    "Cruz",
    "Gutiérrez",
    "Vargas",
    "Romero",
    "Fernández",
    "Salazar",
    "Morales",
    "Herrera",
    "Córdova",
    "Ríos",
    "Medina",
    "Castro",
    "Jiménez",
    "Aguilar",
    "Ruiz",
    "Cáceres",
    "Paredes",
    "Silva",
    "Reyes",
    "Álvarez",
    "Condori",
    "Ccahuana",
    "Huanca",
    "Cusi",
    "Palomino",
    "Villanueva",
    "Soto",
    "Campos",
    "Vega",
    "Ortiz",
    "Chumpitaz",
    "Benites",
    "Navarro",
    "Muñoz",
    "Salas",
    "Valdivia",
    "Zapata",
    "Arias",
    "Alvarado",
    "Cárdenas",
    "Guerrero",
    "Tello",
    "Cabrera",
    "Peña",
    "Meza",
    "Lozano",
    "Delgado",
    "Valverde",
    "Inga",
    "Apaza",
    "Ticona",
    "Yupanqui",
    "Poma",
    "Ccori",
    "Nina",
    "Limachi",
    "Ñahui",
    "Arce",
    "Núñez",
    "Ochoa",
];

/// Generated contact `id`'s name: a first name and two surnames, picked by
/// hash (deterministic, spread evenly).
pub fn patient_name(id: u64) -> String {
    format!(
        "{} {} {}",
        FIRST_NAMES[(mix(id ^ 0xf1) % FIRST_NAMES.len() as u64) as usize],
        SURNAMES[(mix(id ^ 0x5a1) % SURNAMES.len() as u64) as usize],
        SURNAMES[(mix(id ^ 0x5a2) % SURNAMES.len() as u64) as usize]
    )
}

/// Generated contact `id`'s phone: a Peruvian mobile, `+519` and eight
/// digits.
pub fn patient_phone(id: u64) -> String {
    format!("+519{id:08}")
}

/// The state of generated intention `i` given whether it is already due:
/// past days look like a working clinic's history, future days are mostly
/// planned with some cancellations.
fn state_for(i: u64, past: bool) -> (&'static str, Option<&'static str>) {
    let p = mix(i ^ 0x5555) % 1000;
    if !past {
        return if p < 850 {
            ("planned", None)
        } else {
            ("cancelled", Some("superseded"))
        };
    }
    // Per mille: a working clinic where uncertain and review are the
    // exceptions the console exists for (0.2 % and 0.3 %), not the norm.
    match p {
        0..450 => ("read", None),
        450..720 => ("delivered", None),
        720..820 => ("sent", None),
        820..850 => ("accepted", None),
        850..870 => ("failed", Some("invalid_number")),
        870..995 => ("cancelled", Some("commitment_cancelled")),
        995..997 => ("uncertain", Some("timeout")),
        _ => ("review", Some("reconciliation_exhausted")),
    }
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction, committing on `Ok`, as
/// the product's writes do.
pub fn write<T>(conn: &mut Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let out = f(&tx)?;
    tx.commit()?;
    Ok(out)
}

/// The ledger's storage form of an instant (milliseconds since the epoch).
fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The operating day's `YYYY-MM-DD`, as the planner stores it.
fn operating_day(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%d").to_string()
}

/// Creates the raw-baseline table: an integer primary key, a unique
/// key like an intention's, and a payload of [`RAW_ROW_BYTES`].
pub fn raw_setup(c: &Connection) -> Result<()> {
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS bench_raw (
             id INTEGER PRIMARY KEY,
             key TEXT NOT NULL UNIQUE,
             payload TEXT NOT NULL,
             at INTEGER NOT NULL)",
    )?;
    Ok(())
}

/// One raw-baseline row.
pub fn raw_insert(c: &Connection, key: &str, payload: &str, at: i64) -> Result<()> {
    c.prepare_cached("INSERT INTO bench_raw(key, payload, at) VALUES (?1, ?2, ?3)")?
        .execute(params![key, payload, at])?;
    Ok(())
}

/// Inserts `n` contacts ([`patient_phone`], [`patient_name`]), ids 1..=n.
pub fn generate_contacts(c: &Connection, n: u64, now: DateTime<Utc>) -> Result<()> {
    let mut stmt = c.prepare_cached(
        "INSERT INTO contacts(id, phone, name, language, consent_marketing, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'es', 0, ?4, ?4)",
    )?;
    for id in 1..=n {
        stmt.execute(params![id as i64, patient_phone(id), patient_name(id), ms(now)])?;
    }
    Ok(())
}

/// Inserts intentions `from..to` (three per appointment: booking notice,
/// 24 h and 2 h reminders), with their commitments, attempts and
/// history. Call in batches inside separate transactions.
pub fn generate_intentions(c: &Connection, shape: &LedgerShape, from: u64, to: u64) -> Result<()> {
    let mut commit = c.prepare_cached(
        "INSERT INTO commitments(id, ref, kind, status, version, starts_at, service, location, contact_id,
             created_at, updated_at)
         VALUES (?1, ?2, 'appointment', ?3, 1, ?4, 'Odontología', 'Sede Miraflores', ?5, ?6, ?6)",
    )?;
    let mut intent = c.prepare_cached(
        "INSERT INTO intentions(id, key, commitment_id, commitment_version, purpose, contact_id, recipient,
             category, channel, template, language, parameters, body, fingerprint, correlation_id,
             asks_confirmation, due_at, expires_at, day, state, state_reason, state_changed_at,
             created_by, attempt_count, provider_command_id, provider_message_id, created_at, updated_at)
         VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, 'transactional', 'motor', ?7, 'es', ?8, ?9, ?10, ?11, ?12, ?13,
             ?14, ?15, ?16, ?17, ?18, 'planner', ?19, ?20, ?21, ?22, ?18)",
    )?;
    let mut attempt = c.prepare_cached(
        "INSERT INTO attempts(intention_id, n, worker, channel, started_at, ended_at, outcome, http_status,
             command_id, message_id, commitment_version_checked)
         VALUES (?1, 1, 'bench', 'motor', ?2, ?3, ?4, ?5, ?6, ?7, 1)",
    )?;
    let mut hist = c.prepare_cached(
        "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause,
             evidence, commitment_version)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, 1)",
    )?;
    let span_ms = (shape.past_days + shape.future_days).max(1) * 86_400_000;
    let start = shape.now - Duration::days(shape.past_days);
    for i in from..to {
        let cid = (i / 3 + 1) as i64;
        let contact = (i / 3 % shape.contacts.max(1) + 1) as i64;
        let phone = patient_phone(contact as u64);
        let name = patient_name(contact as u64);
        let reference = format!("cita-{cid:06}");
        // Appointments spread evenly over the whole span, between 08:00
        // and 20:00 local-ish, so every operating day has its share.
        let slot = (i / 3) as i64 * span_ms / (shape.total.max(3) / 3) as i64;
        let starts_at = start + Duration::milliseconds(slot) + Duration::minutes((mix(i / 3) % 720) as i64);
        if i % 3 == 0 {
            let status = if mix(i / 3).is_multiple_of(10) {
                "cancelled"
            } else {
                "scheduled"
            };
            commit.execute(params![
                cid,
                reference,
                status,
                ms(starts_at),
                contact,
                ms(starts_at - Duration::days(3))
            ])?;
        }
        let (purpose, template, due) = match i % 3 {
            0 => ("reserva", "cita_reservada", starts_at - Duration::days(3)),
            1 => (
                "recordatorio-24h",
                "recordatorio_confirmar",
                starts_at - Duration::hours(24),
            ),
            _ => ("recordatorio-2h", "recordatorio", starts_at - Duration::hours(2)),
        };
        let key = format!("{reference}:{purpose}:v1");
        let past = due <= shape.now;
        let (state, reason) = state_for(i, past);
        let day = operating_day(due, shape.tz);
        let when = day.clone();
        let params_json = format!("[\"{name}\",\"{when}\",\"09:30\",\"Sede Miraflores\"]");
        let body = format!(
            "Hola {name}, le recordamos su cita de Odontología el {when} a las 09:30 en Sede Miraflores. Responda 1 para confirmar."
        );
        let fp = hex::encode(Sha256::digest(format!("{key}|{body}").as_bytes()));
        let corr = format!("uv-{}", &fp[..20]);
        let changed = if past {
            due + Duration::seconds(5)
        } else {
            due - Duration::days(3)
        };
        let reached = !matches!(state, "planned" | "cancelled");
        let (cmd, wamid) = if reached {
            (Some(format!("cmd-{i}")), Some(format!("wamid.{i}")))
        } else {
            (None, None)
        };
        let id = (i + 1) as i64;
        intent.execute(params![
            id,
            key,
            cid,
            purpose,
            contact,
            phone,
            template,
            params_json,
            body,
            fp,
            corr,
            i % 3 == 1,
            ms(due),
            ms(starts_at),
            day,
            state,
            reason,
            ms(changed),
            reached as i64,
            cmd,
            wamid,
            ms(due - Duration::days(3)),
        ])?;
        hist.execute(params![
            id,
            ms(due - Duration::days(3)),
            None::<&str>,
            "planned",
            "reserved",
            "planner",
            None::<&str>
        ])?;
        if reached {
            let (outcome, status) = match state {
                "uncertain" => ("uncertain", None),
                "failed" => ("failed", Some(400)),
                _ => ("accepted", Some(202)),
            };
            attempt.execute(params![
                id,
                ms(due),
                ms(due + Duration::seconds(1)),
                outcome,
                status,
                cmd,
                wamid
            ])?;
            hist.execute(params![
                id,
                ms(due),
                "planned",
                "dispatching",
                "claim",
                "dispatcher",
                None::<&str>
            ])?;
        }
        if state != "planned" {
            let (from, cause) = if reached {
                ("dispatching", "webhook")
            } else {
                ("planned", "planner")
            };
            hist.execute(params![id, ms(changed), from, state, state, cause, wamid])?;
        }
    }
    Ok(())
}

/// Intentions in the ledger (bench sanity check).
pub fn count_intentions(c: &Connection) -> Result<i64> {
    c.query_row("SELECT count(*) FROM intentions", [], |r| r.get(0))
}

/// Spreads the due times of every planned intention: the first at
/// `start_ms`, then one every `step_us` microseconds in id order (an
/// offered load for the latency benchmark).
pub fn spread_due(c: &Connection, start_ms: i64, step_us: i64) -> Result<usize> {
    let first: i64 = c.query_row("SELECT coalesce(min(id), 0) FROM intentions", [], |r| r.get(0))?;
    c.execute(
        "UPDATE intentions SET due_at = ?1 + ((id - ?2) * ?3) / 1000 WHERE state = 'planned'",
        params![start_ms, first, step_us],
    )
}

/// Puts every intention on one operating day (reprocess benchmark).
pub fn set_day(c: &Connection, day: &str) -> Result<usize> {
    c.execute("UPDATE intentions SET day = ?1", [day])
}

/// Milliseconds from due to the channel's acceptance, one per accepted
/// attempt (latency benchmark).
pub fn due_to_accepted_ms(c: &Connection) -> Result<Vec<i64>> {
    let mut stmt = c.prepare(
        "SELECT a.ended_at - i.due_at FROM attempts a JOIN intentions i ON i.id = a.intention_id
         WHERE a.outcome = 'accepted' AND a.ended_at IS NOT NULL",
    )?;
    stmt.query_map([], |r| r.get(0))?.collect()
}

/// Intentions by state (bench progress polling).
pub fn count_state(c: &Connection, state: &str) -> Result<i64> {
    c.query_row("SELECT count(*) FROM intentions WHERE state = ?1", [state], |r| {
        r.get(0)
    })
}

/// Turns every intention into one the Cloud API accepted: state
/// `accepted`, channel `cloud`, message id `wamid.bench.{id}` (webhook
/// benchmark).
pub fn all_accepted_on_cloud(c: &Connection) -> Result<usize> {
    c.execute(
        "UPDATE intentions SET state = 'accepted', state_reason = NULL, channel = 'cloud',
             provider_message_id = 'wamid.bench.' || id",
        [],
    )
}
